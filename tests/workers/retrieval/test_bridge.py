"""MEMORY.SEARCH handed on to RETRIEVAL.SEARCH (``RetrievalSearchProvider``): the same hits as
the MEMORY worker's own search, access control and usage kept by the MEMORY worker, and the
retrieval worker's failures under MEMORY's codes."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from ditto import Ditto, create_ditto
from ditto.errors import ErrorCode
from tests.workers.retrieval.conftest import DOCS, embedder, write_docs
from workers.memory import AccessPolicy, SqliteMemoryStore, create_memory_worker
from workers.retrieval import (
    MemoryStoreProvider,
    RetrievalSearchProvider,
    create_retrieval_worker,
)

pytestmark = pytest.mark.anyio


@pytest.fixture
async def store(anyio_backend: str, tmp_path: Path) -> AsyncIterator[SqliteMemoryStore]:
    async with SqliteMemoryStore(tmp_path / "memory.sqlite") as opened:
        await write_docs(opened)
        yield opened


def _runtime(store: SqliteMemoryStore, target: str = "memory", **memory: Any) -> Ditto:
    """A MEMORY worker that hands its searches to a RETRIEVAL worker over the same store."""
    delegating = create_memory_worker(
        store, RetrievalSearchProvider(target), embedder=embedder(), **memory
    )
    retrieval = create_retrieval_worker({"memory": MemoryStoreProvider(store, embedder())})
    return create_ditto(workers=[delegating, retrieval])


@pytest.mark.parametrize("strategy", [None, "keyword", "vector", "hybrid", "recent-keyword"])
async def test_delegated_search_returns_the_native_hits(
    store: SqliteMemoryStore, strategy: str | None
) -> None:
    request = {"query": "red fruit", "strategy": strategy, "limit": 4}
    native = create_memory_worker(store, embedder=embedder(), track_usage=False)
    async with create_ditto(workers=[native]) as runtime:
        expected = (await runtime.invoke("MEMORY.SEARCH", request)).unwrap()
    async with _runtime(store, track_usage=False) as runtime:
        found = (await runtime.invoke("MEMORY.SEARCH", request)).unwrap()
    assert [(h.memory, h.score) for h in found.hits] == [(h.memory, h.score) for h in expected.hits]
    assert found.vector_missing == expected.vector_missing
    assert len(found.hits) == 4


async def test_explanations_and_filters_travel_with_the_search(store: SqliteMemoryStore) -> None:
    request = {
        "query": "red",
        "strategy": "hybrid",
        "filter": {"metadata": {"folder": "veg"}},
        "options": {"explain": True},
    }
    async with _runtime(store) as runtime:
        output = (await runtime.invoke("MEMORY.SEARCH", request)).unwrap()
    assert {hit.memory.key for hit in output.hits} <= {"carrot", "beetroot"}
    assert output.hits[0].memory.key == "beetroot"
    assert output.hits[0].explain["strategy"] == "hybrid"


async def test_the_memory_worker_still_counts_usage(store: SqliteMemoryStore) -> None:
    async with _runtime(store) as runtime:
        hits = (await runtime.invoke("MEMORY.SEARCH", {"query": "crisp apples"})).unwrap().hits
        assert hits[0].memory.key == "apple"
        await store.flush()  # usage counts are written off the search path
        (again,) = (await runtime.invoke("MEMORY.GET", {"ids": [hits[0].memory.id]})).unwrap().items
    assert again.usage_count == 1


async def test_access_control_stays_with_the_memory_worker(store: SqliteMemoryStore) -> None:
    async with _runtime(store, access=AccessPolicy("enforce", "private")) as runtime:
        written = await runtime.invoke(
            "MEMORY.WRITE",
            {"memories": [{"content": "bob keeps red apples in the cellar"}]},
            principal="bob",
        )
        secret = written.unwrap().items[0].id
        as_alice = await runtime.invoke(
            "MEMORY.SEARCH", {"query": "cellar apples"}, principal="alice"
        )
        as_bob = await runtime.invoke("MEMORY.SEARCH", {"query": "cellar apples"}, principal="bob")
        nobody = await runtime.invoke("MEMORY.SEARCH", {"query": "cellar apples"})
    assert secret not in {hit.memory.id for hit in as_alice.unwrap().hits}
    assert as_bob.unwrap().hits[0].memory.id == secret
    assert nobody.error is not None
    assert nobody.error.code == ErrorCode.FORBIDDEN


async def test_a_strategy_the_target_lacks_is_invalid_input(store: SqliteMemoryStore) -> None:
    async with _runtime(store) as runtime:
        result = await runtime.invoke("MEMORY.SEARCH", {"query": "red", "strategy": "telepathy"})
    assert result.error is not None
    assert result.error.code == ErrorCode.INVALID_INPUT


async def test_a_missing_target_is_a_backend_error_naming_the_code(
    store: SqliteMemoryStore,
) -> None:
    async with _runtime(store, target="nowhere") as runtime:
        result = await runtime.invoke("MEMORY.SEARCH", {"query": "red"})
    assert result.error is not None
    assert result.error.code == ErrorCode.MEMORY_BACKEND_ERROR
    assert result.error.details == {"retrieval_code": "RETRIEVAL_TARGET_NOT_FOUND"}


async def test_without_a_retrieval_worker_the_search_fails_and_nothing_else(
    store: SqliteMemoryStore,
) -> None:
    delegating = create_memory_worker(store, RetrievalSearchProvider("memory"))
    async with create_ditto(workers=[delegating]) as runtime:
        result = await runtime.invoke("MEMORY.SEARCH", {"query": "red"})
        got = await runtime.invoke("MEMORY.GET", {"keys": list(DOCS)})
    assert result.error is not None
    assert result.error.code == ErrorCode.MEMORY_BACKEND_ERROR
    assert result.error.details == {"retrieval_code": "UNKNOWN_NODE"}
    assert len(got.unwrap().items) == len(DOCS)


class _Stalled:
    """A memory target whose search never answers: what a stuck Milvus or a lost remote worker
    looks like to the caller."""

    kind = "memory"
    strategies = ("auto",)

    def __init__(self) -> None:
        self.cancelled = anyio.Event()

    async def open(self) -> None:
        pass

    async def search(self, request: Any, ctx: Any) -> Any:
        try:
            await anyio.sleep_forever()
        finally:
            self.cancelled.set()

    async def aclose(self) -> None:
        pass


async def test_the_callers_deadline_reaches_the_retrieval_search(store: SqliteMemoryStore) -> None:
    stalled = _Stalled()
    delegating = create_memory_worker(store, RetrievalSearchProvider("memory"))
    retrieval = create_retrieval_worker({"memory": stalled})
    async with create_ditto(workers=[delegating, retrieval]) as runtime:
        result = await runtime.invoke("MEMORY.SEARCH", {"query": "red"}, timeout=0.2)
    assert result.status == "timeout"
    assert stalled.cancelled.is_set()  # the nested search was cancelled, not left running
