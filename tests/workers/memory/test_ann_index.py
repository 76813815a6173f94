"""The approximate (HNSW, usearch) graph behind :class:`VectorIndex` above its threshold.

Real usearch graphs over clustered random vectors; the exact answer (``top(..., exact=True)``)
is the reference. Builds run where the test says (a ``starter`` that runs them at once, or
holds them), so nothing depends on timing.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path

import numpy as np
import pytest

from ditto.errors import InvalidInputError
from workers.memory.retrieval.ann_index import AnnSettings
from workers.memory.retrieval.embeddings.base import EmbeddingModel
from workers.memory.retrieval.vector_index import VectorIndex
from workers.memory.retrieval.vectors import APPROXIMATE_FETCH, ranked_filtered

pytest.importorskip("usearch", reason="the ann extra (usearch) is not installed")

DIMENSION = 32
MODEL = EmbeddingModel("clustered", DIMENSION)
SETTINGS = AnnSettings(
    threshold=1_000, connectivity=16, expansion_add=100, expansion_search=128, dtype="f32"
)


def clustered(count: int, seed: int, clusters: int = 40) -> np.ndarray:
    """Unit vectors around random centres (neighbours are close, as with text)."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(clusters, DIMENSION))
    rows = centres[rng.integers(0, clusters, count)] + 0.6 * rng.normal(size=(count, DIMENSION))
    return (rows / np.linalg.norm(rows, axis=1)[:, None]).astype(np.float32)


def at_once(build: Callable[[], None]) -> None:
    build()


def recall(index: VectorIndex, queries: np.ndarray, k: int = 10) -> float:
    hits = 0
    for query in queries:
        found, _ = index.top(query, k)
        truth, _ = index.top(query, k, exact=True)
        hits += len(set(found) & set(truth))
    return hits / (k * len(queries))


def built(count: int = 4_000, settings: AnnSettings = SETTINGS) -> tuple[VectorIndex, list[str]]:
    index = VectorIndex(MODEL, settings, starter=at_once)
    ids = [f"r{n:05d}" for n in range(count)]
    index.upsert(ids, clustered(count, seed=1))
    return index, ids


def test_the_graph_agrees_with_exact_search_above_the_threshold() -> None:
    index, _ = built()
    assert index.ann_state == "ready"
    queries = clustered(100, seed=2)
    assert recall(index, queries) >= 0.95
    found, scores = index.top(queries[0], 10)
    assert len(set(found)) == 10
    assert scores == sorted(scores, reverse=True)


def test_below_the_threshold_search_is_exact_and_the_graph_goes_below_half() -> None:
    index = VectorIndex(MODEL, SETTINGS, starter=at_once)
    ids = [f"r{n:05d}" for n in range(999)]
    index.upsert(ids, clustered(999, seed=1))
    assert index.ann_state == "off"
    index.upsert(["one-more"], clustered(1, seed=5))
    assert index.ann_state == "ready"
    index.remove(ids[:400])  # 600 rows: above half the threshold, the graph stays
    assert index.ann_state == "ready"
    index.remove(ids[400:550])  # 450: below half
    assert index.ann_state == "off"
    query = clustered(1, seed=3)[0]
    assert index.top(query, 10) == index.top(query, 10, exact=True)


def test_off_means_exact_at_any_size() -> None:
    index, _ = built(2_000, AnnSettings(threshold=None))
    assert index.ann_state == "off"


def test_deleted_records_never_come_back_and_updates_rank_by_their_new_vector() -> None:
    index, ids = built()
    queries = clustered(30, seed=4)
    gone = {item_id for query in queries for item_id in index.top(query, 10)[0]}
    index.remove(gone)
    for query in queries:
        found, _ = index.top(query, 50)
        assert not gone & set(found)
        assert len(found) == 50
    moved = next(item_id for item_id in ids if item_id not in gone)
    target = clustered(1, seed=9)[0]
    index.upsert([moved], target[None])  # an in-place update of a one-row record
    found, scores = index.top(target, 5)
    assert found[0] == moved
    assert scores[0] == pytest.approx(1.0, abs=1e-5)
    far = -target
    index.upsert([moved], far[None])
    assert moved not in index.top(target, 20)[0]


def test_chunked_records_come_back_once_ranked_by_their_best_chunk() -> None:
    index = VectorIndex(MODEL, SETTINGS, starter=at_once)
    count, chunks = 600, 3
    ids = [f"c{n:04d}" for n in range(count)]
    vectors = clustered(count * chunks, seed=6)
    index.upsert(ids, vectors, [chunks] * count)
    assert index.rows == count * chunks
    assert index.ann_state == "ready"
    queries = clustered(40, seed=7)
    for query in queries:
        found, scores = index.top(query, 10)
        assert len(found) == len(set(found)) == 10
        best = (vectors @ query).reshape(count, chunks).max(axis=1)  # each record's best chunk
        assert scores == pytest.approx([best[int(i[1:])] for i in found], abs=1e-5)
    assert recall(index, queries) >= 0.95
    # Replacing a chunked record with one row, and removing another: the graph follows.
    index.upsert([ids[0]], queries[0][None])
    index.remove([ids[1]])
    assert index.top(queries[0], 1)[0] == [ids[0]]
    assert all(ids[1] not in index.top(query, 30)[0] for query in queries)


def test_filters_apply_before_the_limit_with_the_graph() -> None:
    index, ids = built()
    queries = clustered(20, seed=8)
    for share in (0.5, 0.002):  # common: from the graph; rare: exact over what passes
        allowed = set(ids[: int(len(ids) * share)])

        def matching(candidates: list[str], allowed: set[str] = allowed) -> list[str]:
            return [item_id for item_id in candidates if item_id in allowed]

        for query in queries:
            found = [item_id for item_id, _ in ranked_filtered(index, query, 5, matching, str)]
            assert len(found) == min(5, len(allowed))
            assert set(found) <= allowed
            if share < 5 / APPROXIMATE_FETCH:  # the exact path: exactly the best that pass
                everything, _ = index.top(query, len(ids), exact=True)
                assert found == [item_id for item_id in everything if item_id in allowed][:5]


def test_search_answers_exactly_while_the_graph_builds_and_changes_reach_it() -> None:
    held: list[Callable[[], None]] = []
    index = VectorIndex(MODEL, SETTINGS, starter=held.append)
    ids = [f"r{n:05d}" for n in range(3_000)]
    vectors = clustered(3_000, seed=1)
    index.upsert(ids, vectors)
    assert index.ann_state == "building"
    assert len(held) == 1
    query = clustered(1, seed=10)[0]
    assert index.top(query, 10) == index.top(query, 10, exact=True)
    # Changes while it builds: logged, then replayed onto the graph before it is used.
    index.remove(ids[:100])
    index.upsert(["late"], query[None])
    index.upsert([ids[200]], (-query)[None])
    builder = threading.Thread(target=held[0])
    builder.start()
    builder.join()
    assert index.wait_ann() == "ready"
    found, scores = index.top(query, 50)
    assert found[0] == "late"
    assert scores[0] == pytest.approx(1.0, abs=1e-5)
    assert not set(ids[:100]) & set(found)
    assert ids[200] not in found
    assert recall(index, clustered(50, seed=11)) >= 0.95


def test_a_reset_discards_a_build_under_way() -> None:
    held: list[Callable[[], None]] = []
    index = VectorIndex(MODEL, SETTINGS, starter=held.append)
    index.upsert([f"r{n}" for n in range(1_200)], clustered(1_200, seed=1))
    index.reset(MODEL)
    held[0]()  # the old build runs to its end and is thrown away
    assert index.ann_state == "off"
    assert len(index) == 0


def test_settings_are_checked() -> None:
    with pytest.raises(InvalidInputError):
        AnnSettings(connectivity=1)
    with pytest.raises(InvalidInputError):
        AnnSettings(threshold=-1)
    with pytest.raises(InvalidInputError, match="dtype"):
        AnnSettings(dtype="i8")
    assert not AnnSettings(threshold=0).enabled


def test_a_half_precision_graph_agrees_with_exact_search() -> None:
    half = AnnSettings(
        threshold=1_000, connectivity=16, expansion_add=100, expansion_search=128, dtype="f16"
    )
    index, _ = built(settings=half)
    assert index.ann_state == "ready"
    assert index.ann_settings.dtype == "f16"
    queries = clustered(100, seed=2)
    assert recall(index, queries) >= 0.95
    found, scores = index.top(queries[0], 10)
    assert scores == sorted(scores, reverse=True)
    exact, exact_scores = index.top(queries[0], 10, exact=True)
    # The cosines come from the half-precision copy: close to the exact ones, not equal.
    by_id = dict(zip(exact, exact_scores, strict=True))
    gaps = [
        abs(score - by_id[record])
        for record, score in zip(found, scores, strict=True)
        if record in by_id
    ]
    assert gaps
    assert max(gaps) < 2e-3
    assert max(gaps) > 1e-5  # an f32 graph's cosines match exact search's to about 1e-7


def test_a_saved_graph_is_used_again_only_for_the_same_rows(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "store.sqlite.ann"
    ids = [f"r{n:05d}" for n in range(2_000)]
    vectors = clustered(2_000, seed=1)
    first = VectorIndex(MODEL, SETTINGS, starter=at_once)
    first.ann_file = path
    first.upsert(ids, vectors)
    assert first.save_ann()
    queries = clustered(20, seed=2)

    def reopened(
        order: np.ndarray, rows: np.ndarray
    ) -> tuple[VectorIndex, list[Callable[[], None]]]:
        held: list[Callable[[], None]] = []
        index = VectorIndex(MODEL, SETTINGS, starter=held.append)
        index.ann_file = path
        index.upsert([ids[n] for n in order], rows[order])  # another process: another row order
        return index, held

    order = np.random.default_rng(5).permutation(len(ids))
    caplog.clear()
    again, held = reopened(order, vectors)
    assert again.ann_state == "ready"
    assert held == []  # nothing was built: the file's graph answers
    assert not caplog.records
    for query in queries:
        assert again.top(query, 10) == first.top(query, 10)
    # Changed, added, damaged, missing: a warning naming the file, and a build.
    changed = vectors.copy()
    changed[7] = clustered(1, seed=99)[0]
    stale, held = reopened(order, changed)
    assert stale.ann_state == "building"
    assert len(held) == 1
    assert "vectors changed" in caplog.text
    assert str(path) in caplog.text
    caplog.clear()
    extra = VectorIndex(MODEL, SETTINGS, starter=held.append)
    extra.ann_file = path
    extra.upsert([*ids, "new"], np.concatenate([vectors, clustered(1, seed=98)]))
    assert extra.ann_state == "building"
    assert "records were added" in caplog.text
    caplog.clear()
    with path.open("r+b") as damaged:
        damaged.seek(path.stat().st_size // 2)
        damaged.write(b"\xff" * 64)
        damaged.truncate(path.stat().st_size - 1)
    broken, held = reopened(order, vectors)
    assert broken.ann_state == "building"
    assert "not the one described" in caplog.text
    caplog.clear()
    first.save_ann()  # whole again, then read with half precision: other graph settings
    half = VectorIndex(
        MODEL, AnnSettings(**{**asdict(SETTINGS), "dtype": "f16"}), starter=held.append
    )
    half.ann_file = path
    half.upsert(ids, vectors)
    assert half.ann_state == "building"
    assert "other graph settings" in caplog.text
    caplog.clear()
    path.unlink()
    missing, held = reopened(order, vectors)
    assert missing.ann_state == "building"
    assert "no saved vector graph" in caplog.text
