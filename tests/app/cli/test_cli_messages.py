"""What the ``ditto memory`` commands tell a user: a record's content (its summary labelled),
where a missing key lives, and exit 2 for a configuration that cannot do what was asked."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from tests.app.cli.runner import invoke_cli
from workers.memory import MemoryDraft, SqliteMemoryStore


@pytest.fixture
def config(tmp_path: Path) -> Path:
    async def fill() -> None:
        async with SqliteMemoryStore(tmp_path / "memory.sqlite") as store:
            await store.write(
                [
                    MemoryDraft(content="zh-CN", key="pref:lang", namespace="alice"),
                    MemoryDraft(content="en-GB", key="pref:lang", namespace="bob"),
                    MemoryDraft(
                        content="the espresso machine is broken",
                        summary="kitchen note",
                        key="note",
                    ),
                ],
                "create",
            )

    anyio.run(fill)
    path = tmp_path / "ditto.yaml"
    path.write_text(f"workers:\n  memory:\n    sqlite_path: '{tmp_path / 'memory.sqlite'}'\n")
    return path


def test_tables_show_the_content_and_label_the_summary(config: Path) -> None:
    listed = invoke_cli("memory", "list", "--config", str(config))
    assert listed.exit_code == 0, listed.stderr
    assert "the espresso machine is broken (summary: kitchen note)" in listed.stdout


def test_get_names_the_namespaces_a_missing_key_lives_in(config: Path) -> None:
    result = invoke_cli("memory", "get", "pref:lang", "--config", str(config))
    assert result.exit_code == 1
    assert result.stderr.strip() == (
        "not found in namespace 'default': 'pref:lang'; the key exists in 'alice', 'bob' "
        "(pass --namespace)"
    )
    found = invoke_cli("memory", "get", "pref:lang", "--namespace", "bob", "--config", str(config))
    assert found.exit_code == 0
    assert "en-GB" in found.stdout


def test_a_strategy_the_configuration_cannot_serve_exits_2(config: Path) -> None:
    result = invoke_cli(
        "memory", "search", "espresso", "--strategy", "vector", "--config", str(config)
    )
    assert result.exit_code == 2
    assert result.stderr.startswith("SEARCH_UNAVAILABLE: vector search needs an embedder")
