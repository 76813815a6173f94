"""Planning one keyword search on the PostgreSQL store: the query's terms with their exact
statistics, rarest first, and the rounds that read their postings (``search`` says why in
that order and when the rounds stop).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from workers.memory.retrieval.keyword import idf
from workers.memory.stores.postgres.search_stats import KeywordStatistics, as_query

if TYPE_CHECKING:
    from workers.memory.stores.postgres.pool import Connection

__all__ = ("K1", "KeywordPlan", "KeywordPlanner", "any_query")

K1 = 1.2
B = 0.75
"""BM25's constants, FTS5's."""

_ROUND_POSTINGS = 250
"""Rare terms share one round while their postings together stay below this many (a round
costs a round trip; scoring a few more records costs less)."""

_COMBINED_TERMS = 8
"""At most this many remaining terms are combined (``KeywordPlan.combinations``)."""

_MARGIN = 1e-9
"""Relative room added to a stored impact bound: the database computes a term's factor in
another order than the search scores it, so the two may differ in the last bits."""


@dataclass(frozen=True, slots=True)
class KeywordPlan:
    """What one search scores with, from one snapshot."""

    every: str
    """Every query word PostgreSQL makes something of, OR-ed: what a hit must match."""
    phrases: bool
    """Some word has several lexemes: holding one of them does not match the word."""
    terms: tuple[str, ...]
    """The lexemes some record holds, as ``tsquery`` texts, rarest first."""
    frequency: tuple[int, ...]
    """Records holding each."""
    weights: tuple[float, ...]
    """Each one's IDF."""
    impacts: tuple[float, ...]
    """For each, an upper bound of its BM25 factor ``tf (k1 + 1) / (tf + k1 (1 - b + b dl /
    avgdl))`` in any record holding it (at most ``k1 + 1``, the factor's limit as ``tf``
    grows; ``search_impacts`` proves the stored bounds)."""
    ideal: float
    """The sum of the IDFs of all the query's lexemes (``retrieval.keyword.calibrated``)."""
    average: float
    """The average record length in words."""

    def bound(self, start: int, end: int | None = None) -> float:
        """An upper bound of what ``terms[start:end]`` add to any record's score, strict: each
        term adds ``idf · factor`` with the factor below both ``k1 + 1`` and its impact (which
        gets a relative margin for rounding)."""
        return math.fsum(self.bounds[start:end])

    @property
    def bounds(self) -> tuple[float, ...]:
        """Each term's bound (``bound``)."""
        return tuple(
            weight * min(K1 + 1.0, impact * (1.0 + _MARGIN))
            for weight, impact in zip(self.weights, self.impacts, strict=True)
        )

    def next_round(self, start: int) -> int:
        """Where a round reading ``terms[start:]``'s postings ends: the next term, and the
        ones after it while their postings together stay few."""
        end, postings = start + 1, self.frequency[start]
        while end < len(self.terms) and postings + self.frequency[end] <= _ROUND_POSTINGS:
            postings += self.frequency[end]
            end += 1
        return end

    def combinations(self, start: int, threshold: float) -> list[tuple[int, ...]] | None:
        """The smallest sets of ``terms[start:]`` (as indexes) whose bounds together exceed
        ``threshold``: a record holding none of the earlier terms can score above
        ``threshold`` only if it holds all of one of them. ``None`` when there are too many
        terms to enumerate the sets of."""
        rest = range(start, len(self.terms))
        if len(rest) > _COMBINED_TERMS:
            return None
        bound = self.bounds
        found: list[tuple[int, ...]] = []
        for size in range(1, len(rest) + 1):
            for chosen in itertools.combinations(rest, size):
                if math.fsum(bound[n] for n in chosen) > threshold and not any(
                    set(smaller) <= set(chosen) for smaller in found
                ):
                    found.append(chosen)
        return found


class KeywordPlanner(KeywordStatistics):
    """Plans keyword searches on one store's schema ``s`` (quoted)."""

    async def plan(self, connection: Connection, words: Sequence[str]) -> KeywordPlan | None:
        """The plan for ``words`` in the connection's snapshot, or ``None`` when no record
        holds any of them (or the store is empty)."""
        found = await self.lookup(connection, words)
        lexemes = list(dict.fromkeys(lexeme for word in words for lexeme in found[word].lexemes))
        if not lexemes:
            return None
        statistics = await self.statistics(connection, lexemes)
        weights = {
            lexeme: idf(statistics.documents, statistics.frequency[lexeme]) for lexeme in lexemes
        }
        held = sorted(
            (lexeme for lexeme in lexemes if statistics.frequency[lexeme]),
            key=lambda lexeme: (statistics.frequency[lexeme], lexeme),
        )
        if not held:
            return None
        queries = list(dict.fromkeys(found[word].query for word in words if found[word].lexemes))
        return KeywordPlan(
            every=any_query(queries),
            phrases=any(len(found[word].lexemes) > 1 for word in words),
            terms=tuple(as_query(lexeme) for lexeme in held),
            frequency=tuple(statistics.frequency[lexeme] for lexeme in held),
            weights=tuple(weights[lexeme] for lexeme in held),
            impacts=tuple(statistics.impact[lexeme] for lexeme in held),
            ideal=math.fsum(weights.values()),
            average=statistics.average,
        )


def any_query(queries: Sequence[str]) -> str:
    """``tsquery`` texts OR-ed (each parenthesised: a word may be a phrase)."""
    return " | ".join(f"( {query} )" for query in queries)
