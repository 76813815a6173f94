"""The BM25 statistics keyword search reads on the MySQL store: ``N``, the total length and
each term's count, cached for a few seconds.

Counting a frequent term through FULLTEXT and summing every record's length read a large part
of the table (measured: most of a search's time at 100k records), so the values are kept
``_TTL`` seconds — and dropped whenever this store commits a change, so a process searching
what it just wrote scores with exact statistics. Another process's writes are seen within
``_TTL``: a stale count moves scores a little, it never invents or hides a record (which
records match is always read fresh). A term no record holds is never cached, so a word written
a moment ago is found at once.
"""

from __future__ import annotations

from collections.abc import Sequence
from time import monotonic

from workers.memory.stores.sql_driver import SqlDriver, fetch

__all__ = ("MATCH", "SearchStatistics")

MATCH = "MATCH(m.`search_terms`) AGAINST (? IN BOOLEAN MODE)"

_TTL = 10.0
_CACHE_ENTRIES = 50_000


class SearchStatistics:
    """One store's cached keyword statistics (see the module)."""

    def __init__(self) -> None:
        self._totals: tuple[int, int, float] | None = None
        self._counts: dict[str, tuple[int, float]] = {}

    def changed(self) -> None:
        """Forget everything: the store committed a change (or may have)."""
        self._totals = None
        self._counts.clear()

    async def read(self, db: SqlDriver, tokens: Sequence[str]) -> tuple[int, int, dict[str, int]]:
        """``(N, total length, count of each token)``, with every count at most ``N``."""
        now = monotonic()
        counts = {
            token: entry[0]
            for token in tokens
            if (entry := self._counts.get(token)) is not None and now - entry[1] < _TTL
        }
        missing = [token for token in tokens if token not in counts]
        totals = self._totals if self._totals and now - self._totals[2] < _TTL else None
        parts = (
            []
            if totals
            else ["SELECT 0, COUNT(*), COALESCE(SUM(`search_length`), 0) FROM memories"]
        )
        parts += [
            f"SELECT {n + 1}, COUNT(*), 0 FROM memories m WHERE {MATCH}"
            for n in range(len(missing))
        ]
        if parts:
            # One round trip for whatever is not cached, every count through the index.
            rows = await fetch(db, " UNION ALL ".join(parts), missing)
            if len(self._counts) + len(missing) > _CACHE_ENTRIES:
                self._counts.clear()
            for position, count, length in rows:
                if int(position) == 0:
                    totals = (int(count), int(length), now)
                    self._totals = totals
                else:
                    token = missing[int(position) - 1]
                    counts[token] = int(count)
                    if count:
                        self._counts[token] = (int(count), now)
        assert totals is not None
        # Counted apart (and perhaps later), a term may be in more records than N says.
        documents = max(totals[0], *counts.values(), 0)
        return documents, totals[1], counts
