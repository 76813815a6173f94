"""FTS5's BM25, computed outside FTS5 from what its index stores: the statistics of one
snapshot (``N`` and the total token count from the averages record, document frequencies from
``memory_fts_vocab``), row lengths from ``memory_fts_docsize``, and one term's contribution with
FTS5's constants and order of operations, so the scores are the ones ``bm25()`` reports."""

from __future__ import annotations

import json
import math
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ("K1", "B", "Statistics", "read_statistics", "row_lengths", "term_score")

K1 = 1.2
B = 0.75
"""FTS5's ``bm25()`` constants."""


@dataclass(frozen=True, slots=True)
class Statistics:
    """BM25's statistics as FTS5 computes them, read in the search's snapshot."""

    documents: int
    """``N``: rows in the index."""
    average: float
    """``avgdl``: tokens per row."""
    frequency: dict[str, int]
    """Rows holding each term (0 for terms the index does not hold)."""

    def idf(self, term: str) -> float:
        """FTS5's IDF: ``log((N - n + 0.5) / (n + 0.5))``, 1e-6 where that is not positive."""
        containing = self.frequency[term]
        value = math.log((self.documents - containing + 0.5) / (containing + 0.5))
        return value if value > 0.0 else 1e-6


def _varints(blob: bytes) -> list[int]:
    """SQLite's big-endian varints (FTS5's record format) in ``blob``."""
    values = []
    position = 0
    while position < len(blob):
        value = 0
        for index in range(9):
            byte = blob[position]
            position += 1
            if index == 8:
                value = (value << 8) | byte
                break
            value = (value << 7) | (byte & 0x7F)
            if byte < 0x80:
                break
        values.append(value)
    return values


def read_statistics(connection: sqlite3.Connection, terms: Sequence[str]) -> Statistics | None:
    """``N``, ``avgdl`` and the terms' frequencies, or ``None`` while the index is empty."""
    row = connection.execute("SELECT block FROM memory_fts_data WHERE id = 1").fetchone()
    counts = _varints(bytes(row[0])) if row is not None else []
    if not counts or counts[0] <= 0:
        return None
    documents = counts[0]
    frequency = dict.fromkeys(terms, 0)
    marks = ", ".join("?" * len(terms))
    frequency.update(
        connection.execute(
            f"SELECT term, doc FROM memory_fts_vocab WHERE term IN ({marks})", list(terms)
        ).fetchall()
    )
    return Statistics(documents, sum(counts[1:]) / documents, frequency)


def term_score(idf: float, tf: int, length: int, average: float) -> float:
    """One term's BM25 contribution, in the order of operations of FTS5's ``bm25()``."""
    return idf * ((tf * (K1 + 1.0)) / (tf + K1 * (1 - B + B * length / average)))


def row_lengths(connection: sqlite3.Connection, docs: list[int]) -> list[tuple[int, int]]:
    """Each row's length in tokens (all columns), from FTS5's ``docsize`` table."""
    if not docs:
        return []
    rows = connection.execute(
        "SELECT d.id, d.sz FROM json_each(?) j CROSS JOIN memory_fts_docsize d ON d.id = j.value",
        (json.dumps(docs),),
    ).fetchall()
    # Column sizes under 128 tokens are one byte each (the common case): their sum is the length.
    return [
        (doc, sum(size) if max(size, default=0) < 0x80 else sum(_varints(bytes(size))))
        for doc, size in rows
    ]
