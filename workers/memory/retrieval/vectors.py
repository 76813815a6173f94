"""Vectors in the stores: what is embedded, how a store binds to one model, and the exact
cosine index every store ranks with.

A store holds vectors of one :class:`EmbeddingModel` at a time (its *active* model). Writing or
searching with another model is ``EMBEDDING_MISMATCH`` — incomparable vectors are never
compared. ``reindex`` moves a store to a new model: vectors of the *target* model are written
beside the old ones (so it can stop and resume), then the target becomes active and the old
vectors go.

A record's vectors are one per *chunk* of its text (:mod:`~.chunking`: one for a text within
the embedder's window, overlapping windows beyond it). They travel together — :class:`Vectors`
counts each record's rows — and are stored together: one blob of ``chunks × dimension``
little-endian float32 per record and model (:func:`to_blob`, :func:`from_blob`), in the same
vector row or frame every store already had, so no store needed a new table. A record is
written, replaced and deleted with all its chunks at once, and one text hash guards them all.

The index (:class:`~.vector_index.VectorIndex`) is an exact top-k over a float32 matrix of unit
chunk rows that ranks each record by its best chunk. Stores update it incrementally as they
commit; the SQL stores also number every vector change with a *generation* taken under the
store's write lock, so a process picks up other processes' changes by reading what is newer
than its own generation.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Awaitable, Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TypeVar

import numpy as np

from ditto.errors import ErrorCode
from workers.memory.model.contracts import MemoryDraft, MemoryItem
from workers.memory.model.errors import MemoryStoreError
from workers.memory.model.records import content_text
from workers.memory.retrieval.embeddings.base import EmbeddingModel, Matrix
from workers.memory.retrieval.vector_index import VectorIndex

__all__ = (
    "APPROXIMATE_FETCH",
    "VECTOR_THREAD",
    "VectorIndex",
    "VectorState",
    "Vectors",
    "check_model",
    "from_blob",
    "from_blobs",
    "hash_text",
    "matching_rows",
    "mismatch",
    "ranked_filtered",
    "ranked_filtered_async",
    "stale_rows",
    "stored_rows",
    "text_hash",
    "to_blob",
    "vector_text",
    "vectors_required",
)

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Vectors:
    """Vectors that travel with a WRITE or UPDATE: record ``i`` (draft/patch ``i``) has the
    ``counts[i]`` rows after those of the records before it — one per chunk of its text."""

    model: EmbeddingModel
    matrix: Matrix
    hashes: tuple[str, ...] | None = None
    """:func:`hash_text` of the text each record's rows were computed from: the store refuses
    the rows of a record whose stored text differs (it changed while they were computed)."""
    counts: tuple[int, ...] | None = None
    """Rows (chunks) per record, each at least 1; ``None``: one row each."""
    _starts: tuple[int, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        counts = self.counts if self.counts is not None else (1,) * len(self.matrix)
        if any(count < 1 for count in counts) or sum(counts) != len(self.matrix):
            raise ValueError("Vectors: counts must be positive and add up to the matrix's rows")
        starts = [0]
        for count in counts:
            starts.append(starts[-1] + count)
        object.__setattr__(self, "_starts", tuple(starts))

    def __len__(self) -> int:
        """How many records the vectors are for."""
        return len(self._starts) - 1

    def of(self, record: int) -> Matrix:
        """The ``(chunks, dimension)`` rows of record ``record``."""
        return self.matrix[self._starts[record] : self._starts[record + 1]]

    def select(self, records: Sequence[int]) -> Vectors:
        """The vectors of the given records only, in that order."""
        rows = [row for r in records for row in range(self._starts[r], self._starts[r + 1])]
        hashes = None if self.hashes is None else tuple(self.hashes[r] for r in records)
        counts = tuple(self._starts[r + 1] - self._starts[r] for r in records)
        return Vectors(self.model, self.matrix[rows], hashes, counts)


@dataclass(frozen=True, slots=True)
class VectorState:
    """Which model a store's vectors belong to, and the one a reindex is moving it to."""

    active: EmbeddingModel | None = None
    target: EmbeddingModel | None = None


def vector_text(record: MemoryDraft | MemoryItem) -> str:
    """What is embedded for a record: its summary and the text of its content."""
    text = content_text(record.content)
    return f"{record.summary}\n{text}" if record.summary else text


def mismatch(model: EmbeddingModel, state: VectorState) -> MemoryStoreError:
    return MemoryStoreError(
        f"this store holds vectors of {state.active}, not {model}: use that embedder, or move "
        "the store to the new model with reindex (`ditto memory reindex`)",
        code=ErrorCode.EMBEDDING_MISMATCH,
    )


def vectors_required(state: VectorState) -> MemoryStoreError:
    return MemoryStoreError(
        f"this store holds vectors of {state.active}: writes need that embedder (configure it), "
        "or every record would have to be found without one",
        code=ErrorCode.EMBEDDING_MISMATCH,
    )


def check_model(model: EmbeddingModel, state: VectorState, *, writing: bool) -> None:
    """Raises ``EMBEDDING_MISMATCH`` unless ``model`` may write (active, reindex target, or the
    first model) or search (active) this store's vectors."""
    if state.active is None or model == state.active:
        return
    if writing and model == state.target:
        return
    raise mismatch(model, state)


def to_blob(vectors: Matrix) -> bytes:
    """A record's chunk vectors (one row each) as one little-endian float32 blob."""
    return np.ascontiguousarray(vectors, dtype="<f4").tobytes()


def from_blob(blob: bytes, dimension: int) -> Matrix:
    """The ``(chunks, dimension)`` vectors of :func:`to_blob`'s blob (a blob written before
    chunks is one row).

    Raises:
        MemoryStoreError: ``MEMORY_BACKEND_ERROR`` for a blob that is not whole vectors.
    """
    vectors = np.frombuffer(blob, dtype="<f4")
    if not len(vectors) or len(vectors) % dimension:
        raise MemoryStoreError(
            "a stored vector has the wrong dimension", code=ErrorCode.MEMORY_BACKEND_ERROR
        )
    return vectors.reshape(-1, dimension).astype(np.float32)


def from_blobs(blobs: Sequence[bytes], dimension: int) -> tuple[Matrix, list[int]]:
    """Records' blobs as one matrix for :meth:`VectorIndex.upsert`, and each one's rows."""
    parts = [from_blob(blob, dimension) for blob in blobs]
    return np.concatenate(parts), [len(part) for part in parts]


VECTOR_THREAD = ThreadPoolExecutor(1, thread_name_prefix="ditto-vectors")
"""Where every index ranks. numpy hands a large product to BLAS's own threads; calling BLAS
from one thread keeps those warm, where calls from several threads measured 10 ms p99 spikes
(10,000 x 384) against under 1 ms from one. Ranking is one product at a time anyway: BLAS
already uses every core for it."""


APPROXIMATE_FETCH = 2048
"""Most candidates a filtered search takes from the approximate graph before it goes exact:
``limit`` passing among 2,048 near neighbours means the filter lets through more than about
0.5 % of the records at ``limit`` 10 — below that an exact scan finds them surely."""


def ranked_filtered(
    index: VectorIndex,
    query: Matrix,
    limit: int,
    matching: Callable[[list[str]], list[T]],
    key: Callable[[T], str],
) -> list[tuple[T, float]]:
    """The ``limit`` best records that pass a filter: filters apply before the limit.

    Takes the top candidates, keeps those ``matching`` accepts (it returns the records of the
    given ids that pass the filter, in any order), and widens the candidate set until ``limit``
    pass or every vector was looked at. While the index answers from its approximate graph,
    the candidates come from it up to :data:`APPROXIMATE_FETCH` of them; a filter that lets
    fewer through (a small share of the records) is searched exactly from there on, so the
    answer never has fewer records than the exact one.
    """
    fetch = max(4 * limit, 32)
    while True:
        ids, scores = index.top(query, fetch, exact=fetch > APPROXIMATE_FETCH)
        passed = matching(ids)
        if len(passed) >= limit or len(ids) < fetch:
            return _best(passed, dict(zip(ids, scores, strict=True)), limit, key)
        fetch *= 4


async def ranked_filtered_async(
    index: VectorIndex,
    query: Matrix,
    limit: int,
    matching: Callable[[list[str]], Awaitable[list[T]]],
    key: Callable[[T], str],
) -> list[tuple[T, float]]:
    """:func:`ranked_filtered` with an async ``matching`` (a store that filters over the
    network)."""
    fetch = max(4 * limit, 32)
    while True:
        ranking = VECTOR_THREAD.submit(_top, index, query, fetch)
        ids, scores = await asyncio.wrap_future(ranking)
        passed = await matching(ids)
        if len(passed) >= limit or len(ids) < fetch:
            return _best(passed, dict(zip(ids, scores, strict=True)), limit, key)
        fetch *= 4


def _top(index: VectorIndex, query: Matrix, fetch: int) -> tuple[list[str], list[float]]:
    return index.top(query, fetch, exact=fetch > APPROXIMATE_FETCH)


def _best(
    passed: list[T], score_of: dict[str, float], limit: int, key: Callable[[T], str]
) -> list[tuple[T, float]]:
    ranked = sorted(passed, key=lambda record: (-score_of[key(record)], key(record)))
    return [(record, score_of[key(record)]) for record in ranked[:limit]]


def hash_text(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def text_hash(record: MemoryDraft | MemoryItem) -> str:
    """A fingerprint of :func:`vector_text`: a vector is kept only for the text it was
    computed from (an imported or concurrently changed record needs a new one)."""
    return hash_text(vector_text(record))


def stored_rows(
    vectors: Vectors, items: Sequence[MemoryItem], rows: Sequence[int], generation: int
) -> list[tuple[str, str, int, bytes, str, int]]:
    """``(id, model, dimension, vector, text_hash, gen)`` for the SQL stores' vector table."""
    model = vectors.model
    return [
        (
            items[row].id,
            model.model_id,
            model.dimension,
            to_blob(vectors.of(row)),
            text_hash(items[row]),
            generation,
        )
        for row in rows
    ]


def stale_rows(
    vectors: Vectors, items: Sequence[MemoryItem], rows: Sequence[int]
) -> list[tuple[str, str, int, str]]:
    """``(id, model, dimension, text_hash)``: delete other models' vectors of each record
    whose text hash differs — they were computed from a text that just changed."""
    model = vectors.model
    return [(items[row].id, model.model_id, model.dimension, text_hash(items[row])) for row in rows]


def matching_rows(
    items: Sequence[MemoryItem], hashes: Sequence[str] | None, *, skip: bool
) -> list[int]:
    """Indexes of the records that still have the text their vectors were computed from.

    Raises:
        MemoryStoreError: ``CONFLICT`` for a changed one, unless ``skip``.
    """
    if hashes is None:
        return list(range(len(items)))
    kept = []
    for index, (item, expected) in enumerate(zip(items, hashes, strict=True)):
        if text_hash(item) == expected:
            kept.append(index)
        elif not skip:
            raise MemoryStoreError(
                f"record {item.id} changed while its vector was being computed; retry",
                code=ErrorCode.CONFLICT,
            )
    return kept
