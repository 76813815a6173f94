"""``workers.retrieval`` in ``ditto.yaml``: the RETRIEVAL worker and its targets, and
``workers.memory.search_target`` handing MEMORY.SEARCH to it."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from ditto import ConfigError
from ditto.app.bootstrap import open_runtime
from ditto.app.config import load_config

pytestmark = pytest.mark.anyio


def _config(tmp_path: Path, retrieval: str, memory: str = "") -> Path:
    (tmp_path / "notes").mkdir(exist_ok=True)
    (tmp_path / "notes" / "kites.md").write_text(
        "# Kites\n\nThe red kite nests in old oak woods.\n\nIt hunts over open fields.\n"
    )
    config = tmp_path / "ditto.yaml"
    config.write_text(
        "workers:\n"
        "  memory:\n"
        f"    sqlite_path: '{tmp_path / 'memory.sqlite'}'\n"
        "    embedder: {kind: hashing}\n"
        f"{memory}"
        "  retrieval:\n"
        "    search_limit: 3\n"
        f"{retrieval}"
    )
    return config


async def test_configured_targets_are_searched(tmp_path: Path) -> None:
    config = _config(
        tmp_path,
        "    targets:\n"
        "      memory: {kind: memory}\n"
        f"      notes: {{kind: corpus, path: '{tmp_path / 'notes'}', chunk_words: 16}}\n",
    )
    async with open_runtime(load_config(config, env={})) as runtime:
        (
            await runtime.invoke(
                "MEMORY.WRITE", {"memories": [{"content": "kites eat voles", "key": "diet"}]}
            )
        ).unwrap()
        notes = await runtime.invoke(
            "RETRIEVAL.SEARCH", {"query": {"content": "oak woods"}, "target": {"name": "notes"}}
        )
        memory = await runtime.invoke(
            "RETRIEVAL.SEARCH", {"query": {"content": "voles"}, "target": {"name": "memory"}}
        )
    found = notes.unwrap()
    assert found.candidates[0].id == "kites.md#0"
    assert found.candidates[0].metadata["title"] == "Kites"
    assert found.strategy == "auto"
    assert [c.content["key"] for c in memory.unwrap().candidates] == ["diet"]


async def test_a_corpus_cache_keeps_its_vectors_between_runs(tmp_path: Path) -> None:
    cache = tmp_path / "cache" / "notes.sqlite"
    config = _config(
        tmp_path,
        "    targets:\n"
        f"      notes: {{kind: corpus, path: '{tmp_path / 'notes'}', cache: '{cache}'}}\n",
    )
    for _ in range(2):
        async with open_runtime(load_config(config, env={})) as runtime:
            found = await runtime.invoke(
                "RETRIEVAL.SEARCH",
                {"query": {"content": "oak woods"}, "target": {"name": "notes"}},
            )
        assert found.unwrap().candidates[0].id == "kites.md#0"
    with sqlite3.connect(cache) as connection:
        assert connection.execute("SELECT count(*) FROM vectors").fetchone() == (1,)


async def test_memory_search_may_be_handed_to_a_target(tmp_path: Path) -> None:
    config = _config(
        tmp_path, "    targets:\n      memory: {kind: memory}\n", "    search_target: memory\n"
    )
    settings = load_config(config, env={})
    assert settings.workers.memory.search_target == "memory"
    async with open_runtime(settings) as runtime:
        writes = [{"content": f"kite note {n}", "key": f"k{n}"} for n in range(5)]
        (await runtime.invoke("MEMORY.WRITE", {"memories": writes})).unwrap()
        hits = (await runtime.invoke("MEMORY.SEARCH", {"query": "kite note 3"})).unwrap().hits
        missing = await runtime.invoke("MEMORY.SEARCH", {"query": "kite", "strategy": "telepathy"})
    assert hits[0].memory.key == "k3"
    assert missing.error is not None
    assert missing.error.code == "INVALID_INPUT"


async def test_no_targets_no_retrieval_worker(tmp_path: Path) -> None:
    async with open_runtime(load_config(_config(tmp_path, ""), env={})) as runtime:
        assert "RETRIEVAL.SEARCH" not in {t for info in runtime.workers() for t in info.node_types}


@pytest.mark.parametrize(
    ("target", "named"),
    [
        ("{kind: corpus}", "needs path"),
        ("{kind: milvus, path: m.db}", "needs collection"),
        ("{kind: memory, path: somewhere}", "no path"),
        ("{kind: qdrant}", "kind"),
        ("{kind: memory, cache: c.sqlite}", "corpus target's setting"),
    ],
)
def test_a_target_missing_what_its_kind_reads_is_refused(
    tmp_path: Path, target: str, named: str
) -> None:
    config = _config(tmp_path, f"    targets:\n      t: {target}\n")
    with pytest.raises(ConfigError, match=named):
        load_config(config, env={})
