"""LSH candidates over MinHash signatures: which records of a namespace may state nearly the
same thing as an incoming text, most similar first.

:class:`CandidateIndex` keeps the signatures as rows of one ``uint32`` matrix, so scoring a
lookup's candidates (equal bins) is one vectorised comparison: a Python loop over 32 bins
costs about a microsecond per candidate, and a lookup in a namespace of look-alike records
scores dozens. A band's key is its bins' bytes. :meth:`CandidateIndex.add_many` and
:meth:`CandidateIndex.candidates_many` do the same for a batch with one comparison and one
sort for all of it; they return exactly what the one-at-a-time methods return.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import Any, Generic, TypeVar

import numpy as np

from .minhash import BANDS, BINS, Signature

__all__ = ("MAX_BUCKET", "MAX_CANDIDATES", "CandidateIndex", "band_keys")

MAX_BUCKET = 32
"""A band shared by more records than this is skipped when looking for candidates: it is a
template or a common phrase, and scoring every record in it would make one lookup cost the
namespace's size (a duplicate still shares other bands, and its exact hash, with the text)."""
MAX_CANDIDATES = 128
"""The most records one lookup scores: the bound on a write's dedupe cost in a namespace of
look-alike records (bands are read in order until this many are found)."""

K = TypeVar("K", bound=Hashable)
"""A record id: whatever the store uses (str, int, UUID)."""

_BAND = np.dtype((np.void, 4 * (BINS // BANDS)))
"""A band's bins read as one value: their bytes (a bucket's key)."""
_Matrix = np.ndarray[Any, np.dtype[np.uint32]]


class CandidateIndex(Generic[K]):
    """LSH buckets over the signatures of a namespace's recent records.

    Not thread-safe; one per namespace, rebuilt from stored signatures. With ``max_records``
    the oldest record is dropped when a new one would exceed it. Candidates tied on score
    come oldest first (the same on every run).

    Args:
        max_records: How many records to keep (None: no limit).
    """

    def __init__(self, max_records: int | None = None) -> None:
        self._max = max_records
        self._rows: dict[K, int] = {}
        """Record id -> its row in the matrix, oldest record first."""
        self._ids: list[K] = []
        """Row -> the record id it holds (a free row keeps its last one)."""
        self._free: list[int] = []
        self._matrix: _Matrix = np.zeros((16, BINS), np.uint32)
        self._added: np.ndarray[Any, np.dtype[np.int64]] = np.zeros(16, np.int64)
        """Row -> when its record was added (a count): candidates tied on score come oldest
        first, the same on every run."""
        self._count = 0
        self._buckets: tuple[dict[bytes, set[K]], ...] = tuple({} for _ in range(BANDS))

    def __len__(self) -> int:
        return len(self._rows)

    def add(self, record_id: K, sig: Signature) -> None:
        """Index ``record_id`` under ``sig`` (replacing an earlier signature of it)."""
        self.remove(record_id)
        if self._max is not None and len(self._rows) >= self._max:
            self.remove(next(iter(self._rows)))
        self._place([(record_id, sig)])

    def add_many(self, records: Sequence[tuple[K, Signature]]) -> None:
        """:meth:`add` each ``(record_id, signature)`` in turn, with one array write for all."""
        if not records:
            return
        ids = {record_id for record_id, _ in records}
        crowded = self._max is not None and (
            len(self._rows) + sum(record_id not in self._rows for record_id in ids) > self._max
        )
        if crowded or len(ids) < len(records):  # evictions or repeats: one at a time, in order
            for record_id, sig in records:
                self.add(record_id, sig)
            return
        for record_id in ids:
            self.remove(record_id)
        self._place(records)

    def _place(self, records: Sequence[tuple[K, Signature]]) -> None:
        """Give each record (none of them indexed) a row and its buckets."""
        rows = []
        for record_id, _ in records:
            if self._free:
                row = self._free.pop()
                self._ids[row] = record_id
            else:
                row = len(self._ids)
                self._ids.append(record_id)
            self._rows[record_id] = row
            rows.append(row)
        while len(self._ids) > len(self._matrix):
            self._matrix = np.concatenate((self._matrix, np.zeros_like(self._matrix)))
            self._added = np.concatenate((self._added, np.zeros_like(self._added)))
        values = np.array([sig.values for _, sig in records], np.uint32)
        self._matrix[rows] = values
        self._added[rows] = np.arange(self._count, self._count + len(rows))
        self._count += len(rows)
        buckets = self._buckets
        for (record_id, _), keys in zip(records, _band_keys(values), strict=True):
            for band, key in zip(buckets, keys, strict=True):
                bucket = band.get(key)
                if bucket is None:
                    band[key] = {record_id}
                else:
                    bucket.add(record_id)

    def remove(self, record_id: K) -> None:
        """Forget ``record_id``; unknown ids are ignored."""
        row = self._rows.pop(record_id, None)
        if row is None:
            return
        self._free.append(row)
        for buckets, key in zip(self._buckets, _band_keys(self._matrix[row])[0], strict=True):
            bucket = buckets[key]
            bucket.discard(record_id)
            if not bucket:
                del buckets[key]

    def candidates(
        self, sig: Signature, *, min_similarity: float = 0.0, limit: int | None = None
    ) -> list[K]:
        """Records sharing an LSH band with ``sig``, most similar (estimated) first.

        Args:
            sig: The incoming text's signature.
            min_similarity: Drop candidates whose estimated Jaccard is below this.
            limit: Keep at most this many (the most similar).

        Returns:
            Record ids; confirm each on the texts (:func:`is_near_duplicate`, ``classify``).
        """
        return self.candidates_many([sig], min_similarity=min_similarity, limit=limit)[0]

    def candidates_many(
        self,
        sigs: Sequence[Signature],
        *,
        min_similarity: float = 0.0,
        limit: int | None = None,
    ) -> list[list[K]]:
        """:meth:`candidates` of each signature, scored and ranked together.

        Args:
            sigs: The incoming texts' signatures.
            min_similarity: Drop candidates whose estimated Jaccard is below this.
            limit: Keep at most this many per signature (the most similar).

        Returns:
            One list of record ids per signature, in order.
        """
        if not sigs:
            return []
        values = np.array([sig.values for sig in sigs], np.uint32)
        rows: list[int] = []
        sizes = []
        for keys in _band_keys(values):
            found: set[K] = set()
            for bucket in map(dict.get, self._buckets, keys):
                # A band most records share (a template, a common phrase) says nothing about
                # this text; scoring all of them would make a write cost the namespace's size.
                if bucket and len(bucket) <= MAX_BUCKET:
                    found |= bucket
                    if len(found) >= MAX_CANDIDATES:
                        break
            rows += map(self._rows.__getitem__, found)
            sizes.append(len(found))
        if not rows:
            return [[] for _ in sigs]
        at = np.fromiter(rows, np.int64, len(rows))
        if len(sigs) == 1:  # a single write's lookup: no per-lookup bookkeeping to pay for
            return [self._ranked(at, values[0], min_similarity, limit)]
        lookup = np.repeat(np.arange(len(sigs), dtype=np.int64), sizes)
        equal = self._matrix.take(at, axis=0) == np.repeat(values, sizes, axis=0)
        differing = BINS - _count(equal)
        added = self._added.take(at)
        # One sort for all: by lookup, then the most similar, then the oldest. One int64 key
        # sorts ten times faster than lexsort's three; the key fits all but absurd counts.
        if len(sigs) < 1 << 16 and self._count < 1 << 41:
            order = np.argsort(lookup << 47 | differing << 41 | added)
        else:
            order = np.lexsort((added, differing, lookup))
        if min_similarity > 0:
            order = order[differing[order] <= BINS - min_similarity * BINS]
        ends = np.searchsorted(lookup[order], np.arange(len(sigs) + 1))
        picked = at[order].tolist()
        ids = self._ids
        return [
            [ids[row] for row in picked[start : end if limit is None else min(end, start + limit)]]
            for start, end in zip(ends[:-1].tolist(), ends[1:].tolist(), strict=True)
        ]

    def _ranked(
        self,
        at: np.ndarray[Any, np.dtype[np.int64]],
        values: np.ndarray[Any, np.dtype[np.uint32]],
        min_similarity: float,
        limit: int | None,
    ) -> list[K]:
        """The ids of rows ``at`` ranked against one signature's ``values`` as
        :meth:`candidates_many` ranks a lookup's: most similar, then oldest, first."""
        differing = BINS - (self._matrix.take(at, axis=0) == values).sum(axis=1)
        added = self._added.take(at)
        if self._count < 1 << 41:
            order = np.argsort(differing << 41 | added)
        else:
            order = np.lexsort((added, differing))
        if min_similarity > 0:
            order = order[differing[order] <= BINS - min_similarity * BINS]
        if limit is not None:
            order = order[:limit]
        ids = self._ids
        return [ids[row] for row in at[order].tolist()]


_ONES = np.uint64(0x0101010101010101)


def _count(equal: np.ndarray[Any, np.dtype[np.bool_]]) -> np.ndarray[Any, np.dtype[np.int64]]:
    """Per row, how many of its ``BINS`` flags are set.

    Eight flags (bytes of 0 or 1) read as one 64-bit word, times 0x0101...01, hold their sum
    in the top byte: a few whole-array operations, where numpy's sum along a 32-wide axis
    loops row by row (ten times slower for a batch's few thousand candidates).
    """
    words = np.ascontiguousarray(equal).view(np.uint64)
    sums = ((words * _ONES) >> np.uint64(56)).astype(np.int64)
    total = sums[:, 0].copy()
    for column in range(1, sums.shape[1]):
        total += sums[:, column]
    return total


def _band_keys(values: _Matrix) -> list[list[bytes]]:
    """Each signature's band keys (the bytes of its bins, band by band)."""
    # A void item lists as its bytes (numpy types it as bytes or a tuple of fields).
    return values.reshape(-1, BINS).view(_BAND).tolist()  # type: ignore[return-value]


def band_keys(sigs: Sequence[Signature]) -> list[list[bytes]]:
    """Each signature's LSH band keys, band by band: two texts are candidates of each other
    when they share a key at the same band (what :class:`CandidateIndex` buckets by)."""
    if not sigs:
        return []
    return _band_keys(np.array([sig.values for sig in sigs], np.uint32))
