"""The rerank stage: MMR and embedding rerank orderings on crafted hits (a real in-process
store and the hashing embedder), option and config checks, and MEMORY.SEARCH on SQLite with a
reranker on."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ditto import ConfigError, Ditto, create_ditto, load_config
from workers.memory import (
    InProcessMemoryStore,
    MemoryStoreError,
    SqliteMemoryStore,
    create_memory_worker,
)
from workers.memory.model.contracts import MemoryItem, SearchHit
from workers.memory.retrieval.chunking import chunks
from workers.memory.retrieval.embeddings import HashingEmbedder
from workers.memory.retrieval.embeddings.base import embed_texts
from workers.memory.retrieval.hybrid import SearchEngine, SearchSettings
from workers.memory.retrieval.rerank import EmbeddingReranker, MMRReranker

pytestmark = pytest.mark.anyio

EMBEDDER = HashingEmbedder(256)
SAME = "redis context entries expire after the ttl of the session"
NEAR_SAME = "redis context entries expire after the ttl of each session"
OTHER = "postgres keeps memory records durably in tables"


async def written(texts: list[str]) -> list[MemoryItem]:
    """Records written through MEMORY.WRITE into an in-process store, in order."""
    store = InProcessMemoryStore()
    worker = create_memory_worker(store, embedder=EMBEDDER)
    async with create_ditto(workers=[worker], config=None) as runtime:
        result = await runtime.invoke(
            "MEMORY.WRITE", {"memories": [{"content": text} for text in texts]}
        )
    return list(result.unwrap().items)


def hits(items: list[MemoryItem], scores: list[float], explain: bool = False) -> list[SearchHit]:
    return [
        SearchHit(item, score, {} if explain else None)
        for item, score in zip(items, scores, strict=True)
    ]


def contents(found: list[SearchHit]) -> list[Any]:
    return [hit.memory.content for hit in found]


async def test_mmr_moves_a_near_duplicate_below_a_different_record() -> None:
    items = await written([SAME, NEAR_SAME, OTHER])
    fused = hits(items, [1.0, 0.95, 0.8])
    diverse = await MMRReranker(EMBEDDER, 0.5).rerank("redis ttl", fused, 3)
    assert contents(diverse) == [SAME, OTHER, NEAR_SAME]
    assert [hit.score for hit in diverse] == [1.0, 0.8, 0.95]  # MMR keeps the fused scores


async def test_mmr_with_lambda_one_keeps_the_fused_order_and_cuts_to_the_limit() -> None:
    items = await written([SAME, NEAR_SAME, OTHER])
    kept = await MMRReranker(EMBEDDER, 1.0).rerank("redis ttl", hits(items, [1.0, 0.95, 0.8]), 2)
    assert contents(kept) == [SAME, NEAR_SAME]


async def test_mmr_explains_its_score_only_when_the_hit_has_an_explanation() -> None:
    items = await written([SAME, OTHER])
    plain = await MMRReranker(EMBEDDER, 0.5).rerank("q", hits(items, [1.0, 0.5]), 2)
    assert all(hit.explain is None for hit in plain)
    told = await MMRReranker(EMBEDDER, 0.5).rerank("q", hits(items, [1.0, 0.5], True), 2)
    assert told[0].explain == {"mmr_lambda": 0.5, "mmr_score": 0.5, "mmr_redundancy": 0.0}


async def test_embedding_rerank_follows_the_query_as_its_weight_grows() -> None:
    items = await written([SAME, OTHER])
    fused = hits(items, [1.0, 0.9])
    query = "postgres durably keeps memory records"
    by_embedding = await EmbeddingReranker(EMBEDDER, 1.0).rerank(query, fused, 2)
    assert contents(by_embedding) == [OTHER, SAME]
    by_fusion = await EmbeddingReranker(EMBEDDER, 0.0).rerank(query, fused, 2)
    assert contents(by_fusion) == [SAME, OTHER]
    assert [hit.score for hit in by_fusion] == pytest.approx([1.0, 0.9])
    mixed = await EmbeddingReranker(EMBEDDER, 0.5).rerank(query, fused, 2)
    assert all(0.0 <= (hit.score or 0.0) <= 1.0 for hit in mixed)


class _FlooredHashing(HashingEmbedder):
    cosine_floor = 0.5


async def test_embedding_rerank_measures_the_cosine_from_the_embedders_floor() -> None:
    items = await written([SAME, OTHER])
    query = "postgres durably keeps memory records"
    plain = await EmbeddingReranker(EMBEDDER, 1.0).rerank(query, hits(items, [1.0, 0.9], True), 2)
    floored = await EmbeddingReranker(_FlooredHashing(256), 1.0).rerank(
        query, hits(items, [1.0, 0.9], True), 2
    )
    assert contents(floored) == contents(plain) == [OTHER, SAME]
    for before, after in zip(plain, floored, strict=True):
        assert before.explain is not None
        assert after.explain is not None
        cosine = before.explain["embedding_cosine"]
        assert after.explain["embedding_cosine"] == pytest.approx(cosine)  # still the cosine
        assert after.score == pytest.approx(max(cosine - 0.5, 0.0) / 0.5)


async def test_embedding_rerank_scores_a_long_record_by_its_best_chunk() -> None:
    filler = " ".join(f"filler{number % 50} words" for number in range(300))
    long_text = f"{filler} the garage door code is kept in the blue notebook"
    assert len(chunks(long_text, 128, 8)) > 1
    items = await written([long_text])
    query = "garage door code blue notebook"
    (hit,) = await EmbeddingReranker(EMBEDDER, 1.0).rerank(query, hits(items, [1.0], True), 1)
    vectors = await embed_texts(EMBEDDER, [query, long_text])
    whole = float(vectors[1] @ vectors[0])
    assert hit.explain is not None
    # the whole text dilutes the passage to nothing; its chunk keeps it
    assert hit.explain["embedding_cosine"] > max(5 * whole, 0.1)
    assert hit.explain["embedding_chunks"] == len(chunks(long_text, 128, 8))


def test_chunks_overlap_and_are_bounded() -> None:
    text = " ".join(str(number) for number in range(2000))
    pieces = chunks(text, 128, 8)
    assert len(pieces) == 8
    first, second = pieces[0].split(), pieces[1].split()
    assert len(first) == 128
    assert first[96:] == second[:32]
    assert chunks("short text", 128) == ["short text"]
    assert chunks(text, None) == [text]  # an embedder without a window reads it whole


def test_an_engine_refuses_a_reranker_it_cannot_run() -> None:
    with pytest.raises(MemoryStoreError, match="need an embedder") as raised:
        SearchEngine(InProcessMemoryStore(), None, SearchSettings(rerank="mmr"))
    assert raised.value.code == "INVALID_INPUT"


# ---------------------------------------------------------------------- through MEMORY.SEARCH


def runtime_on(path: Path, **options: Any) -> tuple[SqliteMemoryStore, Ditto]:
    store = SqliteMemoryStore(path)
    worker = create_memory_worker(store, track_usage=False, **options)
    return store, create_ditto(workers=[worker], config=None)


TOPICS = ("redis ttl expiry", "postgres tables", "sqlite wal file", "vector cosine index")


async def seed(runtime: Ditto) -> None:
    drafts = [
        {"namespace": "mine", "content": f"note {number}: {TOPICS[number % 4]} detail {number}"}
        for number in range(40)
    ] + [{"namespace": "theirs", "content": f"redis ttl expiry secret {n}"} for n in range(5)]
    (await runtime.invoke("MEMORY.WRITE", {"memories": drafts})).unwrap()


def search(query: str, limit: int = 5, **options: Any) -> dict[str, Any]:
    return {
        "query": query,
        "strategy": "hybrid",
        "limit": limit,
        "filter": {"namespace": "mine"},
        "options": options,
    }


@pytest.mark.parametrize("rerank", ["mmr", "embedding"])
async def test_search_reranks_the_fused_candidates_and_keeps_the_filter(
    tmp_path: Path, rerank: str
) -> None:
    store, ditto = runtime_on(tmp_path / "m.sqlite", embedder=EMBEDDER)
    async with store, ditto as runtime:
        await seed(runtime)
        candidates = (await runtime.invoke("MEMORY.SEARCH", search("redis ttl", 30))).unwrap()
        reranked = (
            await runtime.invoke(
                "MEMORY.SEARCH", search("redis ttl", 5, rerank=rerank, explain=True)
            )
        ).unwrap()
    fused_ids = [hit.memory.id for hit in candidates.hits]
    assert len(reranked.hits) == 5
    for rank, hit in enumerate(reranked.hits, start=1):
        assert hit.memory.namespace == "mine"
        assert hit.explain is not None
        assert hit.explain["reranker"] == rerank
        assert hit.explain["rank_after"] == rank
        assert fused_ids[hit.explain["rank_before"] - 1] == hit.memory.id
        assert hit.explain["strategy"] == "hybrid"  # the fusion's explanation is kept


async def test_configured_rerank_applies_and_a_request_can_turn_it_off(tmp_path: Path) -> None:
    settings = SearchSettings(rerank="mmr", mmr_lambda=0.3, rerank_candidates=12)
    store, ditto = runtime_on(tmp_path / "m.sqlite", embedder=EMBEDDER, search_settings=settings)
    async with store, ditto as runtime:
        await seed(runtime)
        on = (await runtime.invoke("MEMORY.SEARCH", search("redis", 4, explain=True))).unwrap()
        off = await runtime.invoke("MEMORY.SEARCH", search("redis", 4, explain=True, rerank="off"))
    assert all(hit.explain and hit.explain["mmr_lambda"] == 0.3 for hit in on.hits)
    assert all(hit.explain and hit.explain["rank_before"] <= 12 for hit in on.hits)
    assert all(hit.explain and "reranker" not in hit.explain for hit in off.unwrap().hits)


@pytest.mark.parametrize(
    ("options", "fragment"),
    [
        ({"rerank": "cross-encoder"}, "unknown rerank 'cross-encoder'; use off, mmr, embedding"),
        ({"rerank": 3}, "rerank must be a reranker's name"),
        ({"rerank": "mmr", "mmr_lambda": 1.5}, "mmr_lambda must be from 0 to 1"),
        ({"rerank": "mmr", "mmr_lambda": "high"}, "mmr_lambda must be a finite number"),
        ({"rerank": "embedding", "rerank_weight": -0.1}, "rerank_weight must not be negative"),
        ({"rerank": "mmr", "rerank_candidates": 0}, "rerank_candidates must be from 1 to 1000"),
        ({"rerank": "mmr", "rerank_candidates": 2.5}, "rerank_candidates must be an integer"),
    ],
)
async def test_bad_rerank_options_are_invalid_input(
    tmp_path: Path, options: dict[str, Any], fragment: str
) -> None:
    store, ditto = runtime_on(tmp_path / "m.sqlite", embedder=EMBEDDER)
    async with store, ditto as runtime:
        result = await runtime.invoke("MEMORY.SEARCH", search("redis", 5, **options))
    assert result.error is not None
    assert result.error.code == "INVALID_INPUT"
    assert fragment in result.error.message


async def test_rerank_without_an_embedder_says_what_it_needs(tmp_path: Path) -> None:
    store, ditto = runtime_on(tmp_path / "m.sqlite")
    async with store, ditto as runtime:
        result = await runtime.invoke(
            "MEMORY.SEARCH", {"query": "redis", "strategy": "keyword", "options": {"rerank": "mmr"}}
        )
    assert result.error is not None
    assert result.error.code == "INVALID_INPUT"
    assert "need an embedder" in result.error.message


def test_config_reads_rerank_and_refuses_it_without_an_embedder(tmp_path: Path) -> None:
    path = tmp_path / "ditto.yaml"
    path.write_text(
        "workers:\n  memory:\n    embedder: {kind: hashing}\n"
        "    search: {rerank: embedding, rerank_weight: 0.25, rerank_candidates: 40}\n"
    )
    search_settings = load_config(path, env={}).workers.memory.search
    assert (search_settings.rerank, search_settings.rerank_weight) == ("embedding", 0.25)
    path.write_text("workers:\n  memory:\n    search:\n      rerank: off\n")
    assert load_config(path, env={}).workers.memory.search.rerank == "off"
    path.write_text("workers:\n  memory:\n    search: {rerank: mmr}\n")
    with pytest.raises(ConfigError, match="needs an embedder"):
        load_config(path, env={})


def test_candidates_default_to_three_times_the_limit_and_at_least_thirty() -> None:
    assert SearchSettings().candidates(5) == 30
    assert SearchSettings().candidates(20) == 60
    assert SearchSettings(rerank_candidates=10).candidates(25) == 25
    assert np.isclose(SearchSettings(mmr_lambda=0).mmr_lambda, 0.0)
