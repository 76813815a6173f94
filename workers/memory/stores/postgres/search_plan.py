"""Planning one keyword search on the PostgreSQL store: which query words phase 1 ranks and
which phase 2 may fill from, as ``tsquery`` texts, with the BM25 weights of the query's terms
(steps 1 to 3 of the plan ``search`` describes).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from workers.memory.retrieval.keyword import idf
from workers.memory.stores.postgres.search_stats import KeywordStatistics

if TYPE_CHECKING:
    from workers.memory.stores.postgres.pool import Connection

__all__ = ("DEFAULT_BUDGET", "KeywordPlan", "KeywordPlanner", "any_query")

DEFAULT_BUDGET = 1_500
"""Records phase 1 may score; bounds the cost of one search (a few µs per record, mostly
reading it: measured, 1,500 keeps p50 under 10 ms and p99 under 30 ms at 100k records)."""


@dataclass(frozen=True, slots=True)
class KeywordPlan:
    """What one search runs: ``tsquery`` texts built from PostgreSQL's own output, and the
    BM25 statistics of the query's terms."""

    kept: str
    """The words phase 1 ranks the matches of, OR-ed."""
    every: str
    """Every query word that matches something, OR-ed: what phase 2 fills from."""
    sliced: bool
    """Even the rarest word matches more than the budget: phase 1 ranks its newest matches."""
    partial: bool
    """Phase 1 left something out (frequent words, or older matches): phase 2 may fill."""
    dense: bool
    """Some word matches more than the budget: the newest matches are near the top."""
    terms: tuple[str, ...]
    """The query's terms some record holds, as ``tsquery`` texts: what records are scored by."""
    weights: tuple[float, ...]
    """Each term's IDF."""
    ideal: float
    """The sum of the IDFs of all the query's terms (``search.keyword.calibrated``)."""
    average: float
    """The average record length, in lexeme positions."""


class KeywordPlanner(KeywordStatistics):
    """Plans keyword searches on one store's schema, caching what it learns.

    A word's lexemes and their document counts are cached for ``_COUNT_TTL`` seconds once the
    word matches something: a plan only needs counts roughly right, and a stale one costs a
    little speed and moves scores (so perhaps the order) a little; it never invents a record.
    A word matching nothing is looked up again each time, so a word written a moment ago is
    found at once. Table statistics are cached as ``search`` describes.

    Args:
        s: The store's schema, quoted.
        budget: Records phase 1 may score (at least 1).
    """

    async def plan(self, connection: Connection, words: Sequence[str]) -> KeywordPlan | None:
        """The plan for ``words``, or ``None`` when none of them matches anything."""
        found = await self.lookup(connection, words)
        # Words matching nothing are dropped, words with one stem ("record", "records") merged.
        queries = {found[word].query: found[word].count for word in words if found[word].count}
        # Rarest first; the position in the query breaks ties, so a plan is stable.
        sized = sorted(
            (count, position, query) for position, (query, count) in enumerate(queries.items())
        )
        if not sized:
            return None
        kept: list[str] = []
        spent = 0
        for count, _, query in sized:
            if not kept or spent + count <= self.budget:
                kept.append(query)
                spent += count
        sliced = spent > self.budget
        # The terms: every lexeme of every word, once, with its count.
        counted: dict[str, int] = {}
        for word in words:
            counted.update(zip(found[word].terms, found[word].counts, strict=True))
        # N and the counts are cached (and counted) apart: N is raised to them, so n <= N.
        documents = await self.documents(connection, max(counted.values(), default=0))
        frequency = dict(counted)
        for term, count in counted.items():
            if count > self.budget:
                frequency[term] = await self.frequency(connection, term, documents)
        documents = await self.documents(connection, max(frequency.values(), default=0))
        weights = {term: idf(documents, count) for term, count in frequency.items()}
        return KeywordPlan(
            kept=any_query(kept),
            every=any_query([query for _, _, query in sized]),
            sliced=sliced,
            partial=sliced or len(kept) < len(sized),
            dense=sized[-1][0] > self.budget,
            terms=tuple(term for term, count in counted.items() if count),
            weights=tuple(weights[term] for term, count in counted.items() if count),
            ideal=math.fsum(weights.values()),
            average=await self.average(connection, documents),
        )


def any_query(queries: Sequence[str]) -> str:
    """``tsquery`` texts OR-ed (each parenthesised: a word may be a phrase)."""
    return " | ".join(f"( {query} )" for query in queries)
