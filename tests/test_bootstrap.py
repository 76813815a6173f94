"""``ditto.bootstrap``: settings become a runtime with the configured MEMORY worker."""

from __future__ import annotations

from pathlib import Path

import pytest

from ditto.bootstrap import open_runtime
from ditto.config import load_config

pytestmark = pytest.mark.anyio


async def test_the_default_is_a_sqlite_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    async with open_runtime(load_config(env={})) as runtime:
        written = await runtime.invoke("MEMORY.WRITE", {"memories": [{"key": "k", "content": 1}]})
        assert written.ok
    assert (tmp_path / "memory.sqlite").exists()
    async with open_runtime(load_config(env={})) as runtime:
        found = await runtime.invoke("MEMORY.GET", {"keys": ["k"]})
    assert found.unwrap().items[0].content == 1


async def test_configured_limits_and_backend_apply(tmp_path: Path) -> None:
    config = tmp_path / "ditto.yaml"
    config.write_text(
        "workers:\n  memory:\n    backend: inprocess\n    query_limit: 2\n    track_usage: false\n"
    )
    async with open_runtime(load_config(config, env={})) as runtime:
        await runtime.invoke("MEMORY.WRITE", {"memories": [{"content": n} for n in range(5)]})
        page = (await runtime.invoke("MEMORY.QUERY", {})).unwrap()
        await runtime.invoke("MEMORY.SEARCH", {"query": "3"})
        everything = (await runtime.invoke("MEMORY.QUERY", {"limit": 10})).unwrap()
    assert len(page.items) == 2
    assert page.next_cursor is not None
    assert all(item.usage_count == 0 for item in everything.items)
    assert not (tmp_path / "memory.sqlite").exists()
