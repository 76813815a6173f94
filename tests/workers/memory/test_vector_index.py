"""The exact top-k of :class:`VectorIndex` against a brute-force reference.

Vectors hold small multiples of 1/8 so every dot product is exact in float32, whatever order
BLAS sums in: the reference and the index see the very same scores, and many of them tie —
which is where a pruned selection could go wrong.
"""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from workers.memory.retrieval.embeddings.base import EmbeddingModel
from workers.memory.retrieval.vector_index import VectorIndex, _candidates

DIMENSION = 4
MODEL = EmbeddingModel("exact-eighths", DIMENSION)


def reference(matrix: np.ndarray, ids: list[str], query: np.ndarray, k: int) -> list[str]:
    scores = [float(row @ query) for row in matrix]
    order = sorted(range(len(ids)), key=lambda row: (-scores[row], ids[row]))
    return [ids[row] for row in order[:k]]


@settings(max_examples=200, deadline=None)
@given(
    count=st.integers(min_value=0, max_value=3_000),
    k=st.integers(min_value=1, max_value=80),
    levels=st.sampled_from([2, 3, 17]),  # 2: almost everything ties; 17: few ties
    removed=st.integers(min_value=0, max_value=200),
    seed=st.integers(min_value=0, max_value=2**32 - 1),
)
def test_top_k_equals_brute_force_with_ties_broken_by_id(
    count: int, k: int, levels: int, removed: int, seed: int
) -> None:
    rng = np.random.default_rng(seed)
    matrix = (rng.integers(0, levels, size=(count, DIMENSION)) / 8).astype(np.float32)
    query = (rng.integers(-8, 9, size=DIMENSION) / 8).astype(np.float32)
    ids = [f"id-{n:05d}" for n in rng.permutation(count)]  # ids not in row order
    index = VectorIndex(MODEL)
    index.upsert(ids, matrix)
    gone = (
        set(rng.choice(ids, size=min(removed, count), replace=False).tolist()) if count else set()
    )
    index.remove(gone)  # moves rows around: the index's row order differs from ours
    kept = [row for row, item_id in enumerate(ids) if item_id not in gone]

    found, scores = index.top(query, k)

    expected = reference(matrix[kept], [ids[row] for row in kept], query, k)
    assert found == expected
    by_id = dict(zip(ids, matrix, strict=True))
    assert scores == [float(by_id[item_id] @ query) for item_id in found]


def test_a_query_every_vector_ties_with_ranks_by_id() -> None:
    index = VectorIndex(MODEL)
    ids = [f"r{n:04d}" for n in range(5_000)][::-1]
    index.upsert(ids, np.zeros((len(ids), DIMENSION), dtype=np.float32))
    found, scores = index.top(np.ones(DIMENSION, dtype=np.float32), 3)
    assert found == ["r0000", "r0001", "r0002"]
    assert scores == [0.0, 0.0, 0.0]


def test_a_repeated_id_in_one_batch_keeps_one_row_with_its_last_vector() -> None:
    index = VectorIndex(MODEL)
    index.upsert(["a", "b", "a"], np.eye(3, DIMENSION, dtype=np.float32))
    assert len(index) == 2
    found, scores = index.top(np.eye(1, DIMENSION, 2, dtype=np.float32)[0], 2)
    assert found == ["a", "b"]
    assert scores == [1.0, 0.0]


def test_block_maxima_leave_few_candidates_on_spread_scores() -> None:
    # Correctness never depends on it, so the exact test above cannot see pruning stop working;
    # this one does (a slowdown, not a wrong answer).
    scores = np.random.default_rng(5).normal(size=100_000).astype(np.float32)
    for k in (1, 10, 100):
        assert k <= len(_candidates(scores, k)) <= 20 * k


def best_chunk_reference(
    blocks: dict[str, np.ndarray], query: np.ndarray, k: int
) -> tuple[list[str], list[float]]:
    best = {item_id: float((rows @ query).max()) for item_id, rows in blocks.items()}
    order = sorted(best, key=lambda item_id: (-best[item_id], item_id))[:k]
    return order, [best[item_id] for item_id in order]


@settings(max_examples=200, deadline=None)
@given(
    count=st.integers(min_value=0, max_value=600),
    most=st.sampled_from([1, 2, 5, 40]),  # chunks per record: 1 to `most`
    k=st.integers(min_value=1, max_value=60),
    levels=st.sampled_from([2, 3, 17]),
    changed=st.integers(min_value=0, max_value=100),
    seed=st.integers(min_value=0, max_value=2**32 - 1),
)
def test_records_in_chunks_rank_by_their_best_chunk_each_once(
    count: int, most: int, k: int, levels: int, changed: int, seed: int
) -> None:
    rng = np.random.default_rng(seed)

    def chunked(size: int) -> np.ndarray:
        return (rng.integers(0, levels, size=(size, DIMENSION)) / 8).astype(np.float32)

    ids = [f"id-{n:05d}" for n in rng.permutation(count)]
    blocks = {item_id: chunked(int(rng.integers(1, most + 1))) for item_id in ids}
    index = VectorIndex(MODEL)
    index.upsert(
        ids, np.concatenate([blocks[i] for i in ids] or [chunked(0)]), [len(blocks[i]) for i in ids]
    )
    # Replace some records with another number of chunks and remove others: rows move.
    touched = rng.permutation(ids)[: min(changed, count)].tolist()
    replaced, removed = touched[::2], touched[1::2]
    for item_id in replaced:
        blocks[item_id] = chunked(int(rng.integers(1, most + 1)))
    if replaced:
        index.upsert(
            replaced,
            np.concatenate([blocks[i] for i in replaced]),
            [len(blocks[i]) for i in replaced],
        )
    index.remove(removed)
    for item_id in removed:
        del blocks[item_id]
    assert len(index) == len(blocks)
    assert index.rows == sum(len(rows) for rows in blocks.values())
    query = (rng.integers(-8, 9, size=DIMENSION) / 8).astype(np.float32)

    found, scores = index.top(query, k)

    assert (found, scores) == best_chunk_reference(blocks, query, k)


def test_a_record_chunked_then_short_again_keeps_one_row() -> None:
    index = VectorIndex(MODEL)
    index.upsert(["a", "b"], np.eye(4, DIMENSION, dtype=np.float32)[:3], [2, 1])
    assert (len(index), index.rows) == (2, 3)
    index.upsert(["a"], np.eye(1, DIMENSION, 3, dtype=np.float32))
    assert (len(index), index.rows) == (2, 2)
    found, _ = index.top(np.eye(1, DIMENSION, 0, dtype=np.float32)[0], 2)
    assert found == ["a", "b"]  # both score 0 now: by id
