"""Keyword search while the store grows: the BM25 statistics a search uses (``N`` and each
term's document count ``n``) are cached, and a record written since must never make them
disagree (``n > N`` once made the IDF's logarithm fail with ``MEMORY_BACKEND_ERROR``), nor give
a score outside [0, 1]."""

from __future__ import annotations

import itertools
import math
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import anyio
import pytest

from ditto import Ditto, create_ditto
from tests.services import PostgresSpace
from tests.workers.memory.conftest import TickingClock
from workers.memory import MemoryStore, SqliteMemoryStore, create_memory_worker
from workers.memory.retrieval.keyword import calibrated, idf

pytestmark = pytest.mark.anyio

STORES = ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]

WRITERS = 4
RECORDS_PER_WRITER = 50
SEARCHERS = 4
SEARCHES_PER_SEARCHER = 40

OpenRuntime = Callable[..., Any]


@pytest.fixture
async def open_runtime(
    store_kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> AsyncIterator[Callable[..., Any]]:
    """Opens a runtime over a fresh store of ``store_kind`` (SQLite options as keywords)."""
    opened: list[tuple[MemoryStore, Ditto]] = []
    # Requested before any store opens, so the schema is dropped after the stores close.
    space: PostgresSpace | None = None
    if store_kind == "postgres":
        space = request.getfixturevalue("postgres_space")

    async def open_one(**sqlite_options: Any) -> Ditto:
        store: MemoryStore
        if space is not None:
            from workers.memory.stores.postgres import PostgresMemoryStore

            store = PostgresMemoryStore.from_url(
                space.url, schema=space.schema, clock=TickingClock(), pool_size=8
            )
        else:
            store = SqliteMemoryStore(
                tmp_path / "memory.sqlite", clock=TickingClock(), **sqlite_options
            )
        await store.open()
        runtime = create_ditto(workers=[create_memory_worker(store)])
        await runtime.__aenter__()
        opened.append((store, runtime))
        return runtime

    try:
        yield open_one
    finally:
        for store, runtime in reversed(opened):
            await runtime.__aexit__(None, None, None)
            await store.aclose()


async def write(runtime: Ditto, *contents: str) -> list[str]:
    drafts = [{"content": content} for content in contents]
    result = (await runtime.invoke("MEMORY.WRITE", {"memories": drafts})).unwrap()
    return [item.id for item in result.items]


async def search(runtime: Ditto, query: str, limit: int = 10) -> list[tuple[str, float | None]]:
    result = (await runtime.invoke("MEMORY.SEARCH", {"query": query, "limit": limit})).unwrap()
    return [(hit.memory.id, hit.score) for hit in result.hits]


@pytest.mark.parametrize("store_kind", STORES)
async def test_a_word_written_after_a_search_is_found_at_once(
    open_runtime: OpenRuntime,
) -> None:
    # One reader thread: the search after the writes uses the statistics the first one cached.
    runtime = await open_runtime(readers=1)
    await write(runtime, "espresso at the corner bar", "tea in the garden")
    assert [hit for hit, _ in await search(runtime, "espresso")]  # caches N = 2
    zebras = await write(runtime, *(f"zebra crossing number {n}" for n in range(5)))
    hits = await search(runtime, "zebra")  # n = 5 documents hold "zebra"
    assert {hit for hit, _ in hits} == set(zebras)
    assert all(score is not None and 0.0 <= score <= 1.0 for _, score in hits)


@pytest.mark.parametrize("store_kind", STORES)
async def test_concurrent_writers_and_searchers_never_fail(open_runtime: OpenRuntime) -> None:
    runtime = await open_runtime()
    await write(runtime, "espresso at the corner bar")
    written: list[str] = []
    failures: list[str] = []
    scores: list[float | None] = []
    seen: set[str] = set()
    queries = itertools.cycle(["zebra", "zebra crossing", "quagga zebra espresso"])

    async def writer(number: int) -> None:
        for n in range(RECORDS_PER_WRITER):
            written.extend(await write(runtime, f"zebra crossing from writer {number} item {n}"))

    async def searcher() -> None:
        for _ in range(SEARCHES_PER_SEARCHER):
            result = await runtime.invoke("MEMORY.SEARCH", {"query": next(queries), "limit": 20})
            if result.error is not None:
                failures.append(f"{result.error.code}: {result.error.message}")
                continue
            for hit in result.unwrap().hits:
                seen.add(hit.memory.id)
                scores.append(hit.score)

    async with anyio.create_task_group() as group:
        for number in range(WRITERS):
            group.start_soon(writer, number)
        for _ in range(SEARCHERS):
            group.start_soon(searcher)

    assert failures == []
    assert scores, "the searches found nothing"
    assert all(
        score is not None and math.isfinite(score) and 0.0 <= score <= 1.0 for score in scores
    )
    got = (await runtime.invoke("MEMORY.GET", {"ids": sorted(seen)})).unwrap()
    assert {item.id for item in got.items} == seen  # every hit was a committed record
    assert len(written) == WRITERS * RECORDS_PER_WRITER
    final = await search(runtime, "zebra", limit=1_000)
    assert {hit for hit, _ in final} == set(written)


GRID = [0, 1, 2, 3, 5, 10, 100, 1_000, 1_000_000]


def test_idf_and_calibrated_scores_are_total() -> None:
    weights = []
    for documents, containing in itertools.product(GRID, [*GRID, 4, 7, 11, 1_000_001]):
        weight = idf(documents, containing)  # n > N and N = 0 included
        assert math.isfinite(weight), (documents, containing)
        assert weight > 0, (documents, containing)
        if containing <= documents:  # the consistent case keeps FTS5's formula exactly
            exact = math.log((documents - containing + 0.5) / (containing + 0.5))
            assert weight == max(exact, 1e-6)
        weights.append(weight)
    for ideal, score in itertools.product(
        [*weights, 0.0, -1.0, math.nan, math.inf],
        [0.0, 1e-9, 1.0, 3.0, 1e300, math.inf, math.nan, -1.0],
    ):
        value = calibrated(score, ideal)
        assert 0.0 <= value <= 1.0, (score, ideal)
