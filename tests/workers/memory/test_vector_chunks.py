"""Long records in chunks on every store: a record longer than the embedder's window is found
by a passage past that window, its chunks are replaced by an update, removed by a delete,
produced by reindex, and seen by another process."""

from __future__ import annotations

import math
from collections.abc import AsyncIterator, Sequence
from contextlib import AsyncExitStack
from typing import Any

import pytest

from ditto import Ditto, create_ditto
from tests.workers.memory.conftest import OpenStore, requires
from workers.memory import MemoryStore, create_memory_worker
from workers.memory.maintenance.reindex import reindex
from workers.memory.ports import KeywordSearch, VectorStore
from workers.memory.retrieval.chunking import chunks
from workers.memory.retrieval.embeddings import HashingEmbedder
from workers.memory.retrieval.embeddings.base import Matrix, embed_texts

pytestmark = [pytest.mark.anyio, requires(VectorStore, KeywordSearch)]

FILLER = " ".join(f"filler{n}" for n in range(40))
GARAGE = "the garage code is 4417 in the notebook"
BOAT = "the boat key hangs by the kitchen door"
SHORT = ["the garage is empty", "lunch at noon with friends", "the notebook is blue"]


class WindowEmbedder(HashingEmbedder):
    """Reads only the first ``window`` words of a text, as a model with a bounded window
    does: without chunks, a long record's later words are invisible to it."""

    window = 8

    def __init__(self) -> None:
        super().__init__(64)
        self.model_id = "test-windowed-8"

    async def embed(self, texts: Sequence[str]) -> Matrix:
        return self.embed_now([" ".join(text.split()[: self.window]) for text in texts])


@pytest.fixture
async def stack() -> AsyncIterator[AsyncExitStack]:
    async with AsyncExitStack() as stack:
        yield stack


async def runtime(stack: AsyncExitStack, store: MemoryStore, **options: Any) -> Ditto:
    worker = create_memory_worker(store, **options)
    return await stack.enter_async_context(create_ditto(workers=[worker]))


async def ok(runtime: Ditto, node: str, payload: Any) -> Any:
    result = await runtime.invoke(node, payload)
    assert result.ok, result.error
    return result.output


async def top(runtime: Ditto, query: str) -> list[Any]:
    request = {"query": query, "strategy": "vector", "limit": 10}
    return list((await ok(runtime, "MEMORY.SEARCH", request)).hits)


async def write_long(runtime: Ditto, passage: str = GARAGE) -> str:
    drafts = [{"content": f"{FILLER} {passage}", "key": "long"}]
    drafts += [{"content": text} for text in SHORT]
    written = await ok(runtime, "MEMORY.WRITE", {"memories": drafts})
    return str(written.items[0].id)


async def best_chunk_cosine(embedder: WindowEmbedder, query: str, text: str) -> float:
    pieces = chunks(text, embedder.window)
    vectors = await embed_texts(embedder, [query, *pieces])
    return float((vectors[1:] @ vectors[0]).max())


async def test_a_passage_past_the_window_finds_its_record_scored_by_its_best_chunk(
    open_store: OpenStore, stack: AsyncExitStack
) -> None:
    embedder = WindowEmbedder()
    memory = await runtime(stack, await open_store(), embedder=embedder)
    long_id = await write_long(memory)
    query = "garage code 4417 notebook"
    hits = await top(memory, query)
    assert hits[0].memory.id == long_id
    expected = await best_chunk_cosine(embedder, query, f"{FILLER} {GARAGE}")
    assert math.isclose(hits[0].score, expected, abs_tol=1e-5)
    assert len({hit.memory.id for hit in hits}) == len(hits) == 4  # each record once
    # Without chunks its vector would be its first window, which shares nothing with the query.
    (first_window,) = await embed_texts(embedder, [FILLER])
    (query_vector,) = await embed_texts(embedder, [query])
    assert float(first_window @ query_vector) < hits[1].score


async def test_an_update_replaces_the_chunks_and_a_delete_removes_them(
    open_store: OpenStore, stack: AsyncExitStack
) -> None:
    memory = await runtime(stack, await open_store(), embedder=WindowEmbedder())
    long_id = await write_long(memory)
    await ok(memory, "MEMORY.UPDATE", {"updates": [{"id": long_id, "content": f"{FILLER} {BOAT}"}]})
    assert (await top(memory, "boat key kitchen door"))[0].memory.id == long_id
    assert (await top(memory, "garage code 4417 notebook"))[0].memory.id != long_id
    await ok(memory, "MEMORY.DELETE", {"ids": [long_id]})
    left = await top(memory, "boat key kitchen door")
    assert long_id not in {hit.memory.id for hit in left}
    assert len(left) == len(SHORT)


async def test_reindex_embeds_long_records_in_chunks(
    open_store: OpenStore, stack: AsyncExitStack
) -> None:
    store = await open_store()
    long_id = await write_long(await runtime(stack, store))  # written without an embedder
    embedder = WindowEmbedder()
    report = await reindex(store, embedder, batch_size=2)
    assert report.embedded == 1 + len(SHORT)
    assert await store.count_missing_vectors(report.model) == 0  # type: ignore[attr-defined]
    memory = await runtime(stack, store, embedder=embedder)
    assert (await top(memory, "garage code 4417 notebook"))[0].memory.id == long_id


# The stores other processes share.
@pytest.mark.parametrize("store_kind", ["sqlite", "postgres", "mysql", "markdown"])
async def test_another_process_sees_chunks_written_replaced_and_deleted(
    open_store: OpenStore, stack: AsyncExitStack
) -> None:
    embedder = WindowEmbedder()
    writer = await runtime(stack, await open_store(), embedder=embedder)
    reader = await runtime(stack, await open_store(), embedder=embedder)
    long_id = await write_long(writer)
    assert (await top(reader, "garage code 4417 notebook"))[0].memory.id == long_id
    await ok(writer, "MEMORY.UPDATE", {"updates": [{"id": long_id, "content": f"{FILLER} {BOAT}"}]})
    assert (await top(reader, "boat key kitchen door"))[0].memory.id == long_id
    assert (await top(reader, "garage code 4417 notebook"))[0].memory.id != long_id
    await ok(writer, "MEMORY.DELETE", {"ids": [long_id]})
    assert long_id not in {hit.memory.id for hit in await top(reader, "boat key kitchen door")}
