"""Every store with a vector index ranks from the approximate graph above its threshold, with
filters before the limit, deletes and updates reflected (real stores, real usearch)."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from ditto import create_ditto
from tests.workers.memory.conftest import requires
from tests.workers.memory.test_vector_search import (
    Env,
    TableEmbedder,
    brute_force,
    env,  # noqa: F401 - the fixture
    ok,
    seed,
)
from workers.memory import MemoryStore, SqliteMemoryStore, create_memory_worker
from workers.memory.ports import KeywordSearch, VectorStore
from workers.memory.retrieval.ann_index import AnnSettings
from workers.memory.retrieval.vector_index import VectorIndex

pytest.importorskip("usearch", reason="the ann extra (usearch) is not installed")
pytestmark = [pytest.mark.anyio, requires(VectorStore, KeywordSearch)]


def index_of(store: MemoryStore) -> VectorIndex:
    """The store's in-memory index (private: the test waits for its background build)."""
    folder = getattr(store, "_folder", None)
    return folder.vectors.index if folder is not None else store._index  # type: ignore[attr-defined, no-any-return]


async def test_a_store_above_the_threshold_ranks_from_the_graph(env: Env) -> None:  # noqa: F811
    assert isinstance(env.store, VectorStore)
    # f32: the graph's cosines equal exact search's, so its ranking can be compared exactly
    # (half precision, the default, is checked against exact search in test_ann_index).
    env.store.configure_ann(AnnSettings(threshold=60, dtype="f32"))
    embedder = TableEmbedder()
    runtime = await env.runtime(embedder=embedder)
    items = await seed(runtime, 150, namespaces=10)
    await embedder.embed(["query"])
    request = {"query": "query", "strategy": "vector", "limit": 7}
    await ok(runtime, "MEMORY.SEARCH", request)  # SQL stores load their index on a search
    index = index_of(env.store)
    assert await anyio.to_thread.run_sync(index.wait_ann, 120) == "ready"
    texts = [item.content for item in items]
    # 150 rows with ef 512: the graph search reaches every node, so it is the exact answer.
    hits = await ok(runtime, "MEMORY.SEARCH", request)
    assert [hit.memory.content for hit in hits.hits] == brute_force(embedder, "query", texts, 7)
    scoped = await ok(runtime, "MEMORY.SEARCH", {**request, "filter": {"namespace": "ns3"}})
    in_ns3 = [item.content for item in items if item.namespace == "ns3"]
    assert [hit.memory.content for hit in scoped.hits] == brute_force(embedder, "query", in_ns3, 7)
    # A deleted record never comes back.
    best = hits.hits[0].memory
    await ok(runtime, "MEMORY.DELETE", {"ids": [best.id]})
    again = await ok(runtime, "MEMORY.SEARCH", request)
    assert best.id not in [hit.memory.id for hit in again.hits]
    assert len(again.hits) == 7
    assert index.ann_state == "ready"


async def test_sqlite_saves_its_graph_when_it_closes_and_opens_with_it(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "memory.sqlite"
    embedder = TableEmbedder()
    request = {"query": "query", "strategy": "vector", "limit": 7}
    settings = AnnSettings(threshold=60, dtype="f32")  # rankings compared exactly
    async with SqliteMemoryStore(path) as store:
        store.configure_ann(settings)
        async with create_ditto(
            workers=[create_memory_worker(store, embedder=embedder)]
        ) as runtime:
            items = await seed(runtime, 150, namespaces=10)
            await embedder.embed(["query"])
            await ok(runtime, "MEMORY.SEARCH", request)
            assert await anyio.to_thread.run_sync(store._index.wait_ann, 120) == "ready"
    assert (tmp_path / "memory.sqlite.ann").exists()
    assert (tmp_path / "memory.sqlite.ann.npz").exists()
    caplog.clear()
    async with SqliteMemoryStore(path) as store:
        store.configure_ann(settings)
        async with create_ditto(
            workers=[create_memory_worker(store, embedder=embedder)]
        ) as runtime:
            hits = await ok(runtime, "MEMORY.SEARCH", request)
            assert store._index.ann_state == "ready"  # loaded with the rows: nothing to wait for
    assert "vector graph" not in caplog.text
    texts = [item.content for item in items]
    assert [hit.memory.content for hit in hits.hits] == brute_force(embedder, "query", texts, 7)
