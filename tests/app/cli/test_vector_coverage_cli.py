"""A store that gains an embedder says so: ``stats`` counts the records without a vector and
``search`` notes that vector search cannot see them, both naming ``ditto memory reindex``."""

from __future__ import annotations

import json
from pathlib import Path

import anyio

from tests.app.cli.runner import invoke_cli
from workers.memory import MemoryDraft, SqliteMemoryStore


def test_stats_and_search_point_to_reindex_until_it_ran(tmp_path: Path) -> None:
    async def fill() -> None:  # written with no embedder at all
        async with SqliteMemoryStore(tmp_path / "memory.sqlite") as store:
            await store.write(
                [MemoryDraft(content=f"note {n} about tea") for n in range(3)], "create"
            )

    anyio.run(fill)
    config = tmp_path / "ditto.yaml"
    config.write_text(
        f"workers:\n  memory:\n    sqlite_path: '{tmp_path / 'memory.sqlite'}'\n"
        "    embedder:\n      kind: hashing\n"
    )
    stats = invoke_cli("memory", "stats", "--config", str(config))
    assert stats.exit_code == 0, stats.stderr
    assert "3 records without one" in stats.stdout
    assert "ditto memory reindex" in stats.stdout

    search = invoke_cli("memory", "search", "tea", "--strategy", "vector", "--config", str(config))
    assert "cannot see 3 records without a vector" in search.stderr
    assert "ditto memory reindex" in search.stderr

    assert invoke_cli("memory", "reindex", "--config", str(config)).exit_code == 0
    report = json.loads(invoke_cli("memory", "stats", "--json", "--config", str(config)).stdout)
    assert report["vectors"]["records_without_vector"] == 0
    search = invoke_cli("memory", "search", "tea", "--strategy", "vector", "--config", str(config))
    assert search.exit_code == 0, search.stderr
    assert "no vector" not in search.stderr
