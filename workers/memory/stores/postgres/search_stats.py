"""The BM25 statistics keyword search needs on the PostgreSQL store, measured or estimated and
cached: each query word's lexemes and their document counts, ``N``, the average record length,
and the counts of frequent terms (``search`` says what is estimated, how, and why).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from time import monotonic
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from workers.memory.stores.postgres.pool import Connection

__all__ = ("KeywordStatistics", "Word")

_CACHE_ENTRIES = 50_000
_COUNT_TTL = 10.0
_STATISTICS_TTL = 60.0
_COUNTED_UP_TO = 100_000
"""Below this many records (by ``pg_class.reltuples``) ``N`` is counted, above it estimated."""
_SAMPLE = 1_000
"""Records the average length is measured on."""


@dataclass(frozen=True, slots=True)
class Word:
    """What one query word is on this table, from PostgreSQL's own output."""

    query: str
    """Its ``tsquery`` text (empty: PostgreSQL treats it as a stop word)."""
    terms: tuple[str, ...]
    """Each of its lexemes as a ``tsquery`` text."""
    counts: tuple[int, ...]
    """Records holding each lexeme, counted up to ``budget + 1``."""

    @property
    def count(self) -> int:
        """Records it matches, at most (its rarest lexeme's count; 0: it matches nothing)."""
        return min(self.counts, default=0)


class KeywordStatistics:
    """One store's keyword statistics and word lookups, cached as ``KeywordPlanner`` (this
    class and the plan) describes.

    Args:
        s: The store's schema, quoted.
        budget: Records phase 1 may score (at least 1).
    """

    def __init__(self, s: str, budget: int) -> None:
        self.budget = budget
        self._schema = s.strip('"')
        self._words: dict[str, tuple[Word, float]] = {}
        self._frequent: dict[str, tuple[int, float]] = {}
        self._documents: tuple[int, float] | None = None
        self._average: tuple[float, int, float] | None = None
        self._common: tuple[dict[str, float], float] | None = None
        self._lookup_sql = (
            "SELECT w.word, q::text, coalesce(l.terms, '{}'), coalesce(l.counts, '{}') "
            "FROM unnest($1::text[]) AS w(word), websearch_to_tsquery('english', w.word) q, "
            "LATERAL (SELECT array_agg(t.term::text ORDER BY x.n) AS terms, "
            "array_agg(t.count ORDER BY x.n) AS counts "
            "FROM unnest(tsvector_to_array(to_tsvector('english', w.word))) "
            f"WITH ORDINALITY AS x(lexeme, n), LATERAL (SELECT {_as_query('x.lexeme')} AS term, "
            f"(SELECT count(*) FROM (SELECT FROM {s}.memories m "
            f"WHERE m.tsv @@ {_as_query('x.lexeme')} LIMIT $2) c) AS count) t) l"
        )
        self._documents_sql = (
            f"SELECT CASE WHEN c.reltuples >= {_COUNTED_UP_TO:d} THEN c.reltuples::bigint "
            f"ELSE (SELECT count(*) FROM {s}.memories) END "
            f"FROM pg_class c WHERE c.oid = '{s}.memories'::regclass"
        )
        self._average_sql = (
            "SELECT avg(coalesce((SELECT sum(cardinality(u.positions)) FROM unnest(m.tsv) u), "
            f"0))::float8 FROM (SELECT tsv FROM {s}.memories TABLESAMPLE SYSTEM ($1) "
            f"REPEATABLE (0) LIMIT {2 * _SAMPLE:d}) m"
        )
        self._count_sql = f"SELECT count(*) FROM {s}.memories m WHERE m.tsv @@ $1::tsquery"

    async def lookup(self, connection: Connection, words: Sequence[str]) -> dict[str, Word]:
        """Each word's ``tsquery``, lexemes and their counts (up to ``budget + 1``)."""
        now = monotonic()
        found = {
            word: entry[0]
            for word in words
            if (entry := self._words.get(word)) is not None and now - entry[1] < _COUNT_TTL
        }
        stale = [word for word in words if word not in found]
        if stale:
            rows = await connection.fetch(self._lookup_sql, stale, self.budget + 1)
            if len(self._words) + len(stale) > _CACHE_ENTRIES:
                self._words.clear()
            for word, query, terms, counts in rows:
                found[word] = Word(query, tuple(terms), tuple(counts))
                if found[word].count:
                    self._words[word] = (found[word], now)
        return found

    async def documents(self, connection: Connection, at_least: int = 0) -> int:
        """``N``: the records in the table (counted, or estimated in a large table), never
        below ``at_least``.

        ``at_least`` is the largest term count the caller scores with: counted apart from
        ``N`` (later, or exactly where ``N`` is an estimate), it may exceed it, and BM25 needs
        ``n <= N``. A cached ``N`` below it is read again (the table grew since), and the new
        one raised to it when still below (the estimate lags, or records were deleted after
        the term was counted): the table holds at least as many records as a term does.
        """
        now = monotonic()
        cached = self._documents
        if cached is None or now - cached[1] >= _COUNT_TTL or cached[0] < at_least:
            count = await connection.fetchval(self._documents_sql)
            cached = (max(int(count), at_least, 0), now)
            self._documents = cached
        return cached[0]

    async def average(self, connection: Connection, documents: int) -> float:
        """The average record length in lexeme positions, measured on a sample."""
        now = monotonic()
        cached = self._average
        if (
            cached is None
            or now - cached[2] >= _STATISTICS_TTL
            or abs(documents - cached[1]) > cached[1] / 10
        ):
            percent = min(100.0, 100.0 * _SAMPLE / max(documents, 1))
            value = await connection.fetchval(self._average_sql, percent)
            # An empty sample (or table) has no length: 1 keeps the ratio defined.
            cached = (float(value) if value else 1.0, documents, now)
            self._average = cached
        return cached[0]

    async def frequency(self, connection: Connection, term: str, documents: int) -> int:
        """Records holding ``term`` (a ``tsquery`` text) that more than ``budget`` records
        hold: estimated from ANALYZE's statistics, else counted."""
        now = monotonic()
        entry = self._frequent.get(term)
        if entry is not None and now - entry[1] < _STATISTICS_TTL:
            return entry[0]
        share = (await self._common_lexemes(connection)).get(term)
        if share is not None:
            return max(round(share * documents), self.budget + 1)
        count = int(await connection.fetchval(self._count_sql, term))
        if len(self._frequent) >= _CACHE_ENTRIES:
            self._frequent.clear()
        self._frequent[term] = (count, now)
        return count

    async def _common_lexemes(self, connection: Connection) -> dict[str, float]:
        """ANALYZE's most common lexemes of ``tsv`` (as ``tsquery`` texts) and the share of
        records holding each; empty before the first ANALYZE."""
        now = monotonic()
        if self._common is None or now - self._common[1] >= _STATISTICS_TTL:
            row = await connection.fetchrow(
                f"SELECT (SELECT array_agg({_as_query('e.lexeme')}::text) "
                "FROM unnest(s.most_common_elems::text::text[]) e(lexeme)), "
                "s.most_common_elem_freqs FROM pg_stats s "
                "WHERE s.schemaname = $1 AND s.tablename = 'memories' AND s.attname = 'tsv'",
                self._schema,
            )
            common: dict[str, float] = {}
            if row is not None and row[0] is not None and row[1] is not None:
                # The shares are followed by their minimum, maximum (and null share): zip stops.
                common = dict(zip(row[0], row[1], strict=False))
            self._common = (common, now)
        return self._common[0]


def _as_query(lexeme: str) -> str:
    """SQL for the ``tsquery`` of one lexeme (``lexeme`` is an SQL expression), quoted as
    PostgreSQL prints one: no lexeme is ever read as query syntax."""
    return f"('''' || replace(replace({lexeme}, '\\', '\\\\'), '''', '''''') || '''')::tsquery"
