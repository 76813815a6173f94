"""The Milvus provider on a real Milvus Lite engine: the collection records its embedding model,
filters run inside Milvus, the HNSW index agrees with the exact one, and its limits are
refused with stable codes."""

from __future__ import annotations

import random
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from ditto import Ditto, create_ditto
from ditto.errors import ErrorCode
from workers.memory.retrieval.embeddings import HashingEmbedder
from workers.retrieval import MilvusDocument, MilvusProvider, create_retrieval_worker

pytestmark = pytest.mark.anyio

WORDS = [f"term{n}" for n in range(300)]
"""A vocabulary large enough that two documents rarely tie for a query."""


def _documents(count: int, seed: int = 7) -> list[MilvusDocument]:
    chooser = random.Random(seed)
    return [
        MilvusDocument(
            f"doc-{n:04d}",
            " ".join(chooser.choices(WORDS, k=12)),
            {"group": f"g{n % 4}", "n": n},
        )
        for n in range(count)
    ]


@pytest.fixture
async def provider(anyio_backend: str, tmp_path: Path) -> AsyncIterator[MilvusProvider]:
    opened = MilvusProvider.from_uri(str(tmp_path / "milvus.db"), "docs", HashingEmbedder(64))
    try:
        await opened.upsert(_documents(60))
        yield opened
    finally:
        await opened.aclose()


async def _search(runtime: Ditto, **request: Any) -> Any:
    request.setdefault("target", {"name": "milvus"})
    return await runtime.invoke("RETRIEVAL.SEARCH", request)


async def test_filters_run_in_milvus_before_the_limit(provider: MilvusProvider) -> None:
    async with create_ditto(workers=[create_retrieval_worker({"milvus": provider})]) as runtime:
        result = await _search(
            runtime,
            query={"content": "kite owl vole"},
            filter={"metadata": {"group": "g3", "n": 7}},
            limit=5,
            options={"explain": True},
        )
    (candidate,) = result.unwrap().candidates
    assert candidate.id == "doc-0007"
    assert candidate.metadata["group"] == "g3"
    assert candidate.metadata["explain"] == {
        "strategy": "vector",
        "vector_rank": 1,
        "cosine": candidate.score,
    }


@pytest.mark.parametrize(
    "filter",
    [{"metadata": {"flag": True}}, {"metadata": {"group": None}}, {"namespace": "team"}],
    ids=["boolean", "null", "not-metadata"],
)
async def test_what_milvus_cannot_filter_faithfully_is_refused(
    provider: MilvusProvider, filter: dict[str, Any]
) -> None:
    async with create_ditto(workers=[create_retrieval_worker({"milvus": provider})]) as runtime:
        result = await _search(runtime, query={"content": "kite"}, filter=filter)
    assert result.error is not None
    assert result.error.code == ErrorCode.INVALID_INPUT


async def test_an_upsert_replaces_a_document(provider: MilvusProvider) -> None:
    await provider.upsert([MilvusDocument("doc-0001", "heron heron heron", {"group": "new"})])
    async with create_ditto(workers=[create_retrieval_worker({"milvus": provider})]) as runtime:
        found = await _search(runtime, query={"content": "heron heron heron"}, limit=1)
        old = await _search(runtime, query={"content": "x"}, filter={"metadata": {"n": 1}})
    (candidate,) = found.unwrap().candidates
    assert (candidate.id, candidate.content, candidate.metadata) == (
        "doc-0001",
        "heron heron heron",
        {"group": "new"},
    )
    assert candidate.score == pytest.approx(1.0, abs=1e-5)
    assert old.unwrap().candidates == []


async def test_another_embedding_model_is_a_mismatch(tmp_path: Path) -> None:
    path = str(tmp_path / "milvus.db")
    first = MilvusProvider.from_uri(path, "docs", HashingEmbedder(64))
    await first.upsert(_documents(3))
    await first.aclose()  # the engine lets go of the file: it can be opened again
    other = MilvusProvider.from_uri(path, "docs", HashingEmbedder(128))
    try:
        async with create_ditto(workers=[create_retrieval_worker({"m": other})]) as runtime:
            result = await _search(runtime, query={"content": "kite"}, target={"name": "m"})
        with pytest.raises(Exception, match="another model") as raised:
            await other.upsert(_documents(1))
    finally:
        await other.aclose()
    assert result.error is not None
    assert result.error.code == ErrorCode.EMBEDDING_MISMATCH
    assert getattr(raised.value, "code", None) == ErrorCode.EMBEDDING_MISMATCH


async def test_a_missing_collection_is_provider_unavailable(tmp_path: Path) -> None:
    empty = MilvusProvider.from_uri(str(tmp_path / "milvus.db"), "nothing", HashingEmbedder(64))
    try:
        async with create_ditto(workers=[create_retrieval_worker({"m": empty})]) as runtime:
            result = await _search(runtime, query={"content": "kite"}, target={"name": "m"})
    finally:
        await empty.aclose()
    assert result.error is not None
    assert result.error.code == ErrorCode.RETRIEVAL_PROVIDER_UNAVAILABLE


async def test_the_hnsw_index_finds_what_the_exact_one_does(tmp_path: Path) -> None:
    embedder = HashingEmbedder(64)
    documents = _documents(400, seed=11)
    exact = MilvusProvider.from_uri(str(tmp_path / "flat.db"), "docs", embedder)
    approximate = MilvusProvider.from_uri(str(tmp_path / "hnsw.db"), "docs", embedder, index="HNSW")
    queries = [" ".join(random.Random(n).choices(WORDS, k=4)) for n in range(20)]
    try:
        await exact.upsert(documents)
        await approximate.upsert(documents)
        worker = create_retrieval_worker({"flat": exact, "hnsw": approximate})
        overlap = 0
        async with create_ditto(workers=[worker]) as runtime:
            for query in queries:
                found = {}
                for name in ("flat", "hnsw"):
                    output = (
                        await _search(
                            runtime, query={"content": query}, target={"name": name}, limit=10
                        )
                    ).unwrap()
                    assert output.metadata["index"] == name.upper()
                    found[name] = {candidate.id for candidate in output.candidates}
                overlap += len(found["flat"] & found["hnsw"])
    finally:
        await exact.aclose()
        await approximate.aclose()
    assert overlap / (10 * len(queries)) >= 0.9


async def test_documents_over_milvus_limits_are_refused(provider: MilvusProvider) -> None:
    for document in (MilvusDocument("", "text"), MilvusDocument("big", "x" * 70_000)):
        with pytest.raises(Exception, match="bytes") as raised:
            await provider.upsert([document])
        assert getattr(raised.value, "code", None) == ErrorCode.INVALID_INPUT


async def test_a_collection_written_earlier_is_searched_after_a_reopen(tmp_path: Path) -> None:
    path = str(tmp_path / "milvus.db")
    writer = MilvusProvider.from_uri(path, "docs", HashingEmbedder(64))
    await writer.upsert(_documents(10))
    await writer.aclose()  # the engine stops: the next provider starts it on the same file
    reader = MilvusProvider.from_uri(path, "docs", HashingEmbedder(64))
    worker = create_retrieval_worker({"m": reader}, own_targets=True)
    async with create_ditto(workers=[worker]) as runtime:
        result = await _search(runtime, query={"content": "x"}, target={"name": "m"}, limit=10)
    assert sorted(c.id for c in result.unwrap().candidates) == [f"doc-{n:04d}" for n in range(10)]
