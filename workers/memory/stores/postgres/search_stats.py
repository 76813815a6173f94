"""What keyword search on the PostgreSQL store scores with: each query word's lexemes (from
PostgreSQL's own parser and stemmer, cached: analysing a word never changes) and BM25's exact
statistics, read in the search's snapshot from the tables the database keeps
(``search_schema``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from workers.memory.stores.postgres.pool import Connection

__all__ = ("KeywordStatistics", "Statistics", "Word", "as_query")

_CACHE_ENTRIES = 50_000


@dataclass(frozen=True, slots=True)
class Word:
    """What one query word is on PostgreSQL's ``english`` configuration."""

    query: str
    """Its ``tsquery`` text (empty: PostgreSQL treats it as a stop word)."""
    lexemes: tuple[str, ...]
    """Its lexemes (one for most words; none for a stop word)."""


@dataclass(frozen=True, slots=True)
class Statistics:
    """BM25's statistics of one snapshot, exact."""

    documents: int
    """``N``: the records stored."""
    words: int
    """Their lengths' sum (``memories.words``)."""
    frequency: dict[str, int]
    """Records holding each lexeme asked for (0: none)."""
    impact: dict[str, float]
    """For each lexeme asked for, an upper bound of its BM25 factor ``tf (k1 + 1) / (tf + k1
    (1 - b + b dl / avgdl))`` over the records holding it, at this snapshot's ``avgdl``
    (``search_impacts``; 0: none)."""

    @property
    def average(self) -> float:
        """``avgdl``; 1 while no record has a word (the ratio stays defined)."""
        return self.words / self.documents if self.documents and self.words else 1.0


class KeywordStatistics:
    """Word lookups and statistics for one store's schema ``s`` (quoted)."""

    def __init__(self, s: str) -> None:
        self._words: dict[str, Word] = {}
        self._lookup_sql = (
            "SELECT w.word, websearch_to_tsquery('english', w.word)::text, "
            "tsvector_to_array(to_tsvector('english', w.word)) FROM unnest($1::text[]) AS w(word)"
        )
        # The average as ``Statistics.average`` computes it (an integer ratio in float8: the
        # same double), so that impacts are scaled to the average the search scores with.
        self._statistics_sql = (
            f"WITH n AS (SELECT coalesce(sum(documents), 0) AS documents, "
            f"coalesce(sum(words), 0) AS words FROM {s}.memory_keyword_totals), "
            "a AS (SELECT CASE WHEN documents > 0 AND words > 0 "
            "THEN words::float8 / documents::float8 ELSE 1.0 END AS average FROM n) "
            "SELECT n.documents, n.words, "
            "(SELECT array_agg(f.documents ORDER BY l.n) FROM unnest($1::text[]) "
            "WITH ORDINALITY AS l(term, n), LATERAL (SELECT coalesce(sum(t.documents), 0) "
            f"AS documents FROM {s}.memory_keyword_terms t WHERE t.term = l.term) f), "
            "(SELECT array_agg(f.impact ORDER BY l.n) FROM unnest($1::text[]) "
            "WITH ORDINALITY AS l(term, n), LATERAL (SELECT coalesce(max(t.impact * "
            "greatest(1.0, a.average / t.reference)), 0) AS impact "
            f"FROM {s}.memory_keyword_terms t WHERE t.term = l.term) f) "
            "FROM n, a"
        )

    async def lookup(self, connection: Connection, words: Sequence[str]) -> dict[str, Word]:
        """Each word's ``tsquery`` text and lexemes."""
        unknown = [word for word in words if word not in self._words]
        if unknown:
            rows = await connection.fetch(self._lookup_sql, unknown)
            if len(self._words) + len(unknown) > _CACHE_ENTRIES:
                self._words.clear()
            for word, query, lexemes in rows:
                self._words[word] = Word(query, tuple(lexemes))
        return {word: self._words[word] for word in words}

    async def statistics(self, connection: Connection, lexemes: Sequence[str]) -> Statistics:
        """``N``, the length sum, the lexemes' document frequencies summed over the shards and
        their impact bounds, the shards' greatest (call it inside the search's snapshot)."""
        row = await connection.fetchrow(self._statistics_sql, list(lexemes))
        assert row is not None  # a SELECT of scalars returns one row
        documents, words, counts, impacts = row
        return Statistics(
            int(documents),
            int(words),
            dict(zip(lexemes, map(int, counts or ()), strict=True)),
            dict(zip(lexemes, map(float, impacts or ()), strict=True)),
        )


def as_query(lexeme: str) -> str:
    """The ``tsquery`` text of one lexeme, quoted as PostgreSQL prints one: a lexeme is never
    read as query syntax."""
    return "'" + lexeme.replace("\\", "\\\\").replace("'", "''") + "'"
