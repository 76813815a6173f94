"""Fixtures of the ``ditto ui`` tests: a seeded store, and the app over it in this process."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from starlette.testclient import TestClient

from ditto.app.config import load_config
from ditto.app.ui import UiOptions, create_app
from tests.app.ui.browser import chromium_or_skip
from tests.app.ui.seed import OPERATOR, Seeded, seed

TOKEN = "test-token-0123456789abcdef"


@pytest.fixture(scope="module")
def seeded(tmp_path_factory: pytest.TempPathFactory) -> Seeded:
    """A small seeded store, shared by a module's tests (they change only what they made)."""
    folder = tmp_path_factory.mktemp("ui-store")
    return anyio.run(seed, folder, 40)


def client_for(seeded: Seeded, *, read_only: bool = False, **more: Any) -> TestClient:
    """The app over ``seeded`` (``more``: the other :class:`UiOptions`), not yet started."""
    options = UiOptions(
        settings=load_config(seeded.config),
        token=TOKEN,
        read_only=read_only,
        principal=OPERATOR,
        **more,
    )
    return TestClient(create_app(options), base_url="http://127.0.0.1")


@pytest.fixture
def client(seeded: Seeded) -> Iterator[TestClient]:
    """The app with its token set as the cookie (as a browser holds it)."""
    with client_for(seeded) as opened:
        opened.cookies.set("ditto_ui", TOKEN)
        yield opened


@pytest.fixture(scope="session")
def chromium() -> Path:
    """Debian's Chromium, installed once per session when missing (see ``browser``)."""
    return chromium_or_skip()
