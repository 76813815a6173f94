"""Vector and hybrid search on every store: exact top-k against brute force, filters before the
limit, deletes, model binding, explanations, reindexing and other processes' changes."""

from __future__ import annotations

import math
import zlib
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack
from typing import Any

import numpy as np
import pytest

from ditto import Ditto, create_ditto
from tests.workers.memory.conftest import OpenStore, requires
from workers.memory import MemoryStore, MemoryStoreError, create_memory_worker
from workers.memory.maintenance.reindex import reindex
from workers.memory.ports import KeywordSearch, VectorStore
from workers.memory.retrieval.embeddings import CallableEmbedder, HashingEmbedder

pytestmark = [pytest.mark.anyio, requires(VectorStore, KeywordSearch)]

DIMENSION = 16


class TableEmbedder(CallableEmbedder):
    """Random vectors, fixed per (seed, text), so a brute-force reference can be computed and
    two instances agree."""

    def __init__(self, model_id: str = "table", dimension: int = DIMENSION, seed: int = 1) -> None:
        self.table: dict[str, np.ndarray] = {}
        self.seed = seed
        self.calls = 0
        super().__init__(self._vectors, model_id, dimension)

    def _vectors(self, texts: list[str]) -> list[list[float]]:
        self.calls += 1
        for text in texts:
            if text not in self.table:
                rng = np.random.default_rng([self.seed, zlib.crc32(text.encode())])
                self.table[text] = rng.normal(size=self.dimension)
        return [self.table[text].tolist() for text in texts]

    def unit(self, text: str) -> np.ndarray:
        vector = self.table[text]
        return vector / np.linalg.norm(vector)


class Env:
    def __init__(self, store: MemoryStore, stack: AsyncExitStack, factory: Any) -> None:
        self.store = store
        self.stack = stack
        self.factory = factory  # opens another store on the same data, as another process

    async def runtime(self, store: MemoryStore | None = None, **options: Any) -> Ditto:
        worker = create_memory_worker(store or self.store, **options)
        return await self.stack.enter_async_context(create_ditto(workers=[worker]))


@pytest.fixture
async def env(open_store: OpenStore) -> AsyncIterator[Env]:
    store = await open_store()
    async with AsyncExitStack() as stack:
        yield Env(store, stack, open_store)


async def ok(runtime: Ditto, node: str, payload: Any) -> Any:
    result = await runtime.invoke(node, payload)
    assert result.ok, result.error
    return result.output


async def failure(runtime: Ditto, node: str, payload: Any) -> str:
    result = await runtime.invoke(node, payload)
    assert not result.ok, result.output
    assert result.error is not None
    return result.error.code


async def seed(runtime: Ditto, count: int, namespaces: int = 1) -> list[Any]:
    drafts = [
        {"content": f"doc-{n}", "namespace": f"ns{n % namespaces}", "key": f"k{n}"}
        for n in range(count)
    ]
    return list((await ok(runtime, "MEMORY.WRITE", {"memories": drafts})).items)


def brute_force(embedder: TableEmbedder, query: str, texts: list[str], k: int) -> list[str]:
    scores = {text: float(embedder.unit(text) @ embedder.unit(query)) for text in texts}
    return sorted(scores, key=lambda text: -scores[text])[:k]


async def test_vector_top_k_equals_brute_force_and_filters_apply_before_the_limit(env: Env) -> None:
    embedder = TableEmbedder()
    runtime = await env.runtime(embedder=embedder)
    items = await seed(runtime, 120, namespaces=10)
    texts = [item.content for item in items]
    await embedder.embed(["query"])
    for limit in (1, 7, 30):
        hits = await ok(
            runtime, "MEMORY.SEARCH", {"query": "query", "strategy": "vector", "limit": limit}
        )
        assert [hit.memory.content for hit in hits.hits] == brute_force(
            embedder, "query", texts, limit
        )
        for hit in hits.hits:
            expected = float(embedder.unit(hit.memory.content) @ embedder.unit("query"))
            assert math.isclose(hit.score, expected, abs_tol=1e-5)
    # One namespace in ten: the limit is still met, by that namespace's nearest records.
    scoped = await ok(
        runtime,
        "MEMORY.SEARCH",
        {"query": "query", "strategy": "vector", "limit": 5, "filter": {"namespace": "ns3"}},
    )
    in_ns3 = [item.content for item in items if item.namespace == "ns3"]
    assert [hit.memory.content for hit in scoped.hits] == brute_force(embedder, "query", in_ns3, 5)


async def test_deleted_and_updated_records_change_results_at_once(env: Env) -> None:
    embedder = TableEmbedder()
    runtime = await env.runtime(embedder=embedder)
    items = await seed(runtime, 40)
    request = {"query": "query", "strategy": "vector", "limit": 3}
    first = (await ok(runtime, "MEMORY.SEARCH", request)).hits
    await ok(runtime, "MEMORY.DELETE", {"ids": [first[0].memory.id]})
    after = (await ok(runtime, "MEMORY.SEARCH", request)).hits
    assert first[0].memory.id not in {hit.memory.id for hit in after}
    assert [hit.memory.id for hit in after[:2]] == [hit.memory.id for hit in first[1:3]]
    # An update re-embeds: the record now sits where its new text's vector puts it.
    await embedder.embed(["query"])
    embedder.table["near"] = embedder.table["query"] + 0.01
    target = items[-1].id
    await ok(runtime, "MEMORY.UPDATE", {"updates": [{"id": target, "content": "near"}]})
    top = (await ok(runtime, "MEMORY.SEARCH", request)).hits[0]
    assert top.memory.id == target
    assert top.score > 0.99


async def test_a_store_refuses_vectors_of_another_model(env: Env) -> None:
    runtime = await env.runtime(embedder=TableEmbedder("model-a"))
    await seed(runtime, 3)
    state = await env.store.vector_state()
    assert state.active is not None
    assert (state.active.model_id, state.active.dimension) == ("model-a", DIMENSION)
    for other in (TableEmbedder("model-b"), TableEmbedder("model-a", dimension=8)):
        other_runtime = await env.runtime(embedder=other)
        for strategy in ("vector", "hybrid", "auto"):
            search = {"query": "doc-1", "strategy": strategy}
            assert await failure(other_runtime, "MEMORY.SEARCH", search) == "EMBEDDING_MISMATCH"
        write = {"memories": [{"content": "new"}]}
        assert await failure(other_runtime, "MEMORY.WRITE", write) == "EMBEDDING_MISMATCH"
    plain = await env.runtime()  # no embedder: its records could never be found by vector
    assert await failure(plain, "MEMORY.WRITE", {"memories": [{"content": "x"}]}) == (
        "EMBEDDING_MISMATCH"
    )
    assert len((await ok(runtime, "MEMORY.QUERY", {})).items) == 3  # nothing was written


async def test_hybrid_explanations_add_up_to_the_fused_score(env: Env) -> None:
    runtime = await env.runtime(embedder=HashingEmbedder(64))
    await ok(
        runtime,
        "MEMORY.WRITE",
        {
            "memories": [
                {"content": "the espresso machine is broken"},
                {"content": "espresso beans are in the cupboard"},
                {"content": "the printer is broken"},
                {"content": "tea is fine"},
            ]
        },
    )
    for options in (
        {"explain": True},
        {"explain": True, "fusion": "weighted"},
        {"explain": True, "fusion": "rrf", "rrf_k": 10, "vector_weight": 2, "keyword_weight": 1},
    ):
        hits = (
            await ok(
                runtime,
                "MEMORY.SEARCH",
                {"query": "broken espresso machine", "strategy": "hybrid", "options": options},
            )
        ).hits
        assert hits
        scores = [hit.score for hit in hits]
        assert scores == sorted(scores, reverse=True)
        for hit in hits:
            why = hit.explain
            assert why["strategy"] == "hybrid"
            total = why["vector_contribution"] + why["keyword_contribution"]
            assert math.isclose(total, why["fused_score"], rel_tol=1e-9)
            assert math.isclose(hit.score, why["fused_score"], rel_tol=1e-9)
            assert why["vector_rank"] is not None or why["keyword_rank"] is not None
            if options.get("fusion") == "rrf":
                k = options.get("rrf_k", 60)
                if why["keyword_rank"] is not None:
                    weight = options.get("keyword_weight", 0.5)
                    assert math.isclose(
                        why["keyword_contribution"], weight / (k + why["keyword_rank"])
                    )
    # auto is hybrid when an embedder is configured; min_score drops weak hits.
    default = (await ok(runtime, "MEMORY.SEARCH", {"query": "broken espresso machine"})).hits
    top = default[0].memory.content
    assert top == "the espresso machine is broken"
    assert default[1].score < default[0].score
    strict = await ok(
        runtime,
        "MEMORY.SEARCH",
        {"query": "broken espresso machine", "options": {"min_score": default[0].score}},
    )
    assert [hit.memory.content for hit in strict.hits] == [top]


async def test_reindex_moves_a_store_to_a_new_model_and_resumes_after_a_failure(
    env: Env,
) -> None:
    old = TableEmbedder("old")
    runtime = await env.runtime(embedder=old)
    await seed(runtime, 30)

    class Flaky(TableEmbedder):
        def _vectors(self, texts: list[str]) -> list[list[float]]:
            if self.calls >= 1:  # the second batch fails
                self.calls += 1
                raise RuntimeError("the embedding service went away")
            return super()._vectors(texts)

    new = Flaky("new", seed=2)
    with pytest.raises(MemoryStoreError, match="failed") as raised:
        await reindex(env.store, new, batch_size=10)
    assert raised.value.code == "EMBEDDING_FAILED"
    state = await env.store.vector_state()
    assert state.active is not None
    assert state.active.model_id == "old"  # search still runs on the old model meanwhile
    assert await env.store.count_missing_vectors(state.target) == 20  # type: ignore[arg-type]

    fixed = TableEmbedder("new", seed=2)
    report = await reindex(env.store, fixed, batch_size=10)
    assert report.embedded == 20  # only what was missing
    assert (await env.store.vector_state()).active.model_id == "new"  # type: ignore[union-attr]
    fresh = await env.runtime(embedder=fixed)
    hits = await ok(fresh, "MEMORY.SEARCH", {"query": "doc-3", "strategy": "vector", "limit": 1})
    assert hits.hits[0].memory.content == "doc-3"
    stale = await env.runtime(embedder=old)
    assert await failure(stale, "MEMORY.SEARCH", {"query": "x", "strategy": "vector"}) == (
        "EMBEDDING_MISMATCH"
    )


# The stores other processes share.
@pytest.mark.parametrize("store_kind", ["sqlite", "postgres", "mysql", "markdown"])
async def test_another_process_sees_new_and_deleted_vectors(env: Env) -> None:
    embedder = TableEmbedder()
    writer = await env.runtime(embedder=embedder)
    reader = await env.runtime(await env.factory(), embedder=embedder)
    request = {"query": "doc-0", "strategy": "vector", "limit": 1}
    await seed(writer, 5)
    assert (await ok(reader, "MEMORY.SEARCH", request)).hits[0].memory.content == "doc-0"
    first = (await ok(writer, "MEMORY.GET", {"keys": ["k0"], "namespace": "ns0"})).items[0]
    await ok(writer, "MEMORY.DELETE", {"ids": [first.id]})
    after = (await ok(reader, "MEMORY.SEARCH", request)).hits
    assert first.id not in {hit.memory.id for hit in after}
    embedder.table["doc-0 again"] = embedder.table["doc-0"]
    await ok(writer, "MEMORY.WRITE", {"memories": [{"content": "doc-0 again"}]})
    assert (await ok(reader, "MEMORY.SEARCH", request)).hits[0].memory.content == "doc-0 again"


async def test_embedder_failures_store_nothing(env: Env) -> None:
    for fn, message in (
        (lambda texts: [[1.0] * 3 for _ in texts], "dimension"),
        (lambda texts: [[math.nan] * DIMENSION for _ in texts], "finite"),
        (lambda texts: [[1.0] * DIMENSION], "vectors for"),
    ):
        runtime = await env.runtime(embedder=CallableEmbedder(fn, "broken", DIMENSION))
        result = await runtime.invoke(
            "MEMORY.WRITE", {"memories": [{"content": "a"}, {"content": "b"}]}
        )
        assert result.error is not None
        assert result.error.code == "EMBEDDING_FAILED"
        assert message in result.error.message
    plain = await env.runtime()
    assert (await ok(plain, "MEMORY.QUERY", {})).items == []


async def test_vector_search_without_an_embedder_is_unavailable(env: Env) -> None:
    runtime = await env.runtime()
    await ok(runtime, "MEMORY.WRITE", {"memories": [{"content": "espresso"}]})
    assert await failure(runtime, "MEMORY.SEARCH", {"query": "x", "strategy": "vector"}) == (
        "SEARCH_UNAVAILABLE"
    )
    auto = await ok(runtime, "MEMORY.SEARCH", {"query": "espresso"})  # auto = keyword here
    assert [hit.memory.content for hit in auto.hits] == ["espresso"]
    for bad in ({"fusion": "max"}, {"rrf_k": 0}, {"colour": 1}, {"explain": "yes"}):
        code = await failure(runtime, "MEMORY.SEARCH", {"query": "x", "options": bad})
        assert code == "INVALID_INPUT", bad


async def test_a_text_changed_while_embedding_is_a_conflict_never_a_stale_vector(env: Env) -> None:
    embedder = TableEmbedder()
    runtime = await env.runtime(embedder=embedder)
    (item,) = (await ok(runtime, "MEMORY.WRITE", {"memories": [{"content": "fruit"}]})).items
    other = await env.runtime(embedder=TableEmbedder())

    class Racing(TableEmbedder):
        async def embed(self, texts: Any) -> Any:
            # Someone changes the summary while this content change is being embedded.
            await ok(other, "MEMORY.UPDATE", {"updates": [{"id": item.id, "summary": "new"}]})
            return await super().embed(texts)

    racing = await env.runtime(embedder=Racing())
    change = {"updates": [{"id": item.id, "content": "quantum chromodynamics"}]}
    assert await failure(racing, "MEMORY.UPDATE", change) == "CONFLICT"
    (stored,) = await env.store.get([item.id], [], "default")
    assert (stored.summary, stored.content) == ("new", "fruit")  # the other change stands
    await ok(runtime, "MEMORY.UPDATE", change)  # a retry embeds the current text
    hits = await ok(
        runtime, "MEMORY.SEARCH", {"query": "new\nquantum chromodynamics", "strategy": "vector"}
    )
    assert hits.hits[0].score > 0.999


async def test_an_unfinished_reindex_leaves_the_old_model_whole(env: Env) -> None:
    old = TableEmbedder("old")
    runtime = await env.runtime(embedder=old)
    await seed(runtime, 12)

    class Failing(TableEmbedder):
        def _vectors(self, texts: list[str]) -> list[list[float]]:
            if self.calls >= 1:
                self.calls += 1
                raise RuntimeError("gone")
            return super()._vectors(texts)

    with pytest.raises(MemoryStoreError, match="failed") as raised:
        await reindex(env.store, Failing("new", seed=2), batch_size=5)
    assert raised.value.code == "EMBEDDING_FAILED"
    hits = await ok(runtime, "MEMORY.SEARCH", {"query": "doc-0", "strategy": "vector", "limit": 20})
    assert len(hits.hits) == 12  # every record still has its old-model vector
    # A record edited meanwhile loses its stale new-model vector and is embedded again.
    first = (await ok(runtime, "MEMORY.GET", {"keys": ["k0"], "namespace": "ns0"})).items[0]
    await ok(runtime, "MEMORY.UPDATE", {"updates": [{"id": first.id, "content": "doc-0 v2"}]})
    new_model = TableEmbedder("new", seed=2)
    report = await reindex(env.store, new_model, batch_size=5)
    assert report.embedded >= 7
    fresh = await env.runtime(embedder=new_model)
    top = await ok(fresh, "MEMORY.SEARCH", {"query": "doc-0 v2", "strategy": "vector", "limit": 1})
    assert top.hits[0].memory.id == first.id
    assert top.hits[0].score > 0.999


async def test_records_without_vectors_are_reported_until_reindexed(env: Env) -> None:
    """A store that gains an embedder: the vector leg cannot see older records, and says how
    many; after reindex it sees them all."""
    plain = await env.runtime()  # no embedder: records without vectors
    await seed(plain, 5)
    embedder = TableEmbedder()
    runtime = await env.runtime(embedder=embedder)
    await ok(runtime, "MEMORY.WRITE", {"memories": [{"content": "doc-new"}]})
    for strategy in ("vector", "hybrid"):
        output = await ok(
            runtime,
            "MEMORY.SEARCH",
            {"query": "doc-new", "strategy": strategy, "options": {"explain": True}},
        )
        assert output.vector_missing == 5
        assert all(hit.explain["vector_missing"] == 5 for hit in output.hits)
    keyword = await ok(runtime, "MEMORY.SEARCH", {"query": "doc", "strategy": "keyword"})
    assert keyword.vector_missing is None
    await reindex(env.store, embedder)
    fresh = await env.runtime(embedder=embedder)  # a new engine: no count cached
    output = await ok(fresh, "MEMORY.SEARCH", {"query": "doc-1", "strategy": "vector"})
    assert output.vector_missing == 0
    assert len(output.hits) == 6


def _pinned_embedder(vectors: dict[str, list[float]], default: list[float]) -> CallableEmbedder:
    """Chosen vectors for chosen texts (``default`` for the rest), so each leg's shape is set."""
    return CallableEmbedder(
        lambda texts: [vectors.get(text, default) for text in texts], "pinned", 3
    )


async def test_confidence_fusion_follows_the_leg_that_singles_a_record_out(env: Env) -> None:
    notes = [f"alpha note {n}" for n in range(12)]
    # The vector leg singles out note 7; the keyword leg scores every note alike.
    runtime = await env.runtime(
        embedder=_pinned_embedder({"alpha": [1, 0, 0], "alpha note 7": [1, 0.1, 0]}, [0.1, 1, 0])
    )
    await ok(runtime, "MEMORY.WRITE", {"memories": [{"content": note} for note in notes]})
    output = await ok(runtime, "MEMORY.SEARCH", {"query": "alpha", "options": {"explain": True}})
    top = output.hits[0]
    assert top.explain["fusion"] == "confidence"
    assert top.explain["keyword_weight"] < 0.01 < 0.99 < top.explain["vector_weight"]
    assert all(0 <= hit.score <= 1 for hit in output.hits)
    assert math.isclose(top.score, top.explain["vector_score"], rel_tol=0.02)


async def test_confidence_fusion_ignores_a_leg_whose_scores_are_flat(env: Env) -> None:
    # Every record has the same vector: the vector leg cannot tell them apart, so the keyword
    # leg, which finds the one record holding the rare word, decides.
    runtime = await env.runtime(embedder=_pinned_embedder({}, [0, 0, 1]))
    contents = [f"alpha routine entry {n}" for n in range(11)] + ["alpha zebra sighting"]
    await ok(runtime, "MEMORY.WRITE", {"memories": [{"content": text} for text in contents]})
    output = await ok(
        runtime, "MEMORY.SEARCH", {"query": "zebra alpha", "options": {"explain": True}}
    )
    top = output.hits[0]
    assert top.memory.content == "alpha zebra sighting"
    assert top.explain["vector_weight"] == 0
    assert math.isclose(top.score, top.explain["keyword_score"])


class _SidedEmbedder(CallableEmbedder):
    """Pinned vectors, and an ``embed_query`` side that logs what it embeds (as e5's ``query:``
    prefix would): searches must embed their query there and records through ``embed``."""

    def __init__(self, vectors: dict[str, list[float]], default: list[float]) -> None:
        self.sides: list[tuple[str, list[str]]] = []
        self._pinned = vectors
        self._default = default
        super().__init__(self._passages, "sided", 3)

    def _passages(self, texts: list[str]) -> list[list[float]]:
        self.sides.append(("passage", list(texts)))
        return [self._pinned.get(text, self._default) for text in texts]

    async def embed_query(self, texts: list[str]) -> list[list[float]]:
        self.sides.append(("query", list(texts)))
        return [self._pinned.get(text, self._default) for text in texts]


async def test_searches_embed_their_query_on_the_embedders_query_side(env: Env) -> None:
    embedder = _SidedEmbedder({"alpha": [1, 0, 0], "alpha note 3": [1, 0.1, 0]}, [0, 1, 0])
    runtime = await env.runtime(embedder=embedder)
    notes = [f"alpha note {n}" for n in range(6)]
    await ok(runtime, "MEMORY.WRITE", {"memories": [{"content": note} for note in notes]})
    # The write embedded its records as passages, once each.
    assert {side for side, _ in embedder.sides} == {"passage"}
    assert sorted(text for _, texts in embedder.sides for text in texts) == notes
    for strategy, options in (("vector", {}), ("hybrid", {}), ("hybrid", {"rerank": "embedding"})):
        embedder.sides.clear()
        payload = {"query": "alpha", "strategy": strategy, "options": options}
        output = await ok(runtime, "MEMORY.SEARCH", payload)
        assert output.hits[0].memory.content == "alpha note 3"
        assert ("query", ["alpha"]) in embedder.sides, strategy
        passages = [text for side, texts in embedder.sides if side == "passage" for text in texts]
        assert "alpha" not in passages, strategy  # the query never went through embed()


class _FlooredEmbedder(CallableEmbedder):
    cosine_floor = 0.77


async def test_a_declared_cosine_floor_lets_a_crowded_vector_leg_count(env: Env) -> None:
    # e5's cosines crowd near the top: the relevant note at 0.9, the rest at 0.8. Measured from
    # 0 the vector leg looks flat and the keyword leg's pick (the note that repeats the word)
    # wins; measured from the embedder's floor the vector leg's pick does.
    def vectors(texts: list[str]) -> list[list[float]]:
        pinned = {"alpha": [1, 0, 0], "alpha note 7": [0.9, math.sqrt(1 - 0.81), 0]}
        return [pinned.get(text, [0.8, 0.6, 0]) for text in texts]

    notes = [f"alpha note {n}" for n in range(12)] + ["alpha alpha alpha note"]
    plain_embedder = CallableEmbedder(vectors, "crowded", 3)
    writer = await env.runtime(embedder=plain_embedder)
    await ok(writer, "MEMORY.WRITE", {"memories": [{"content": note} for note in notes]})
    tops = []
    for embedder in (plain_embedder, _FlooredEmbedder(vectors, "crowded", 3)):
        runtime = await env.runtime(embedder=embedder)
        output = await ok(
            runtime, "MEMORY.SEARCH", {"query": "alpha", "options": {"explain": True}}
        )
        tops.append(output.hits[0])
    plain, floored = tops
    assert plain.memory.content == "alpha alpha alpha note"
    assert plain.explain["vector_weight"] < 0.5
    assert floored.memory.content == "alpha note 7"
    assert floored.explain["vector_weight"] > 0.5
    assert math.isclose(floored.explain["vector_score"], 0.9, rel_tol=1e-5)  # still the cosine
    assert math.isclose(
        floored.score,
        floored.explain["vector_contribution"] + floored.explain["keyword_contribution"],
        rel_tol=1e-9,
    )
