"""Keyword search for the PostgreSQL store: ``ts_rank_cd`` with OR semantics, planned by
document frequency as the SQLite store plans FTS5 (``workers.memory.stores.sqlite.search``).

Ranking every match of an OR of all query words reads and scores every record holding any of
them: with a frequent word in the query that is a large part of the table (measured: 50 ms p50
and 150 ms p99 at 100k records, most of it ``ts_rank_cd``). The plan bounds that work:

1. Stop words are dropped (``search.text.query_words``).
2. Each word becomes a ``tsquery`` through ``websearch_to_tsquery('english', word)``, the
   parser and stemmer the ``tsv`` column is built with (a word PostgreSQL treats as a stop word
   becomes empty and is dropped: it matches nothing; words with one stem are merged).
3. Each word's document count comes from the GIN index, counting at most ``budget + 1``
   matches: cheap because bounded, and exact below the budget, which is all the plan needs.
   Words that match nothing are dropped. The rest are added rarest first while their summed
   counts stay within ``budget`` (the rarest word is always kept).
4. Phase 1 ranks the records matching the kept words, filter applied before the limit. When
   even the rarest word matches more than ``budget`` records, it ranks only its newest matches:
   at most ``budget`` of them, among the newest ``_WINDOW * budget`` records (by
   ``created_at``).
5. If phase 1 found fewer than ``limit`` records and something was left out, phase 2 fills the
   rest with the newest records matching any query word, ranked after phase 1 (as on SQLite,
   a filler may score above a phase-1 hit; it still ranks after it).

Both phases score with ``ts_rank_cd`` against the whole query, so a record's score is the one
the unplanned ranking gives it (``sql.keyword_search_sql``): ``ts_rank_cd`` has no inverse
document frequency, so scoring against the kept words alone would rank differently, not just
cost less. The plan chooses which records are scored, never how.

asyncpg prepares every statement, and after a few runs PostgreSQL may switch it to a generic
plan that cannot see the words (it guesses 0.5% of rows match any ``tsquery``). So each
statement is written so that its generic plan is the right one: phase 1 and the counts go
through the GIN index, and the statements that want the newest matches walk ``created_at``
with sizes the planner can read.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from time import monotonic
from typing import TYPE_CHECKING, Any

from workers.memory.contracts import MemoryFilter
from workers.memory.stores.postgres.sql import Params, columns, where_clause

if TYPE_CHECKING:
    from workers.memory.stores.postgres.pool import Connection

__all__ = ("DEFAULT_BUDGET", "KeywordPlan", "KeywordPlanner", "keyword_search")

DEFAULT_BUDGET = 1_500
"""Records phase 1 may score; bounds the cost of one search (a few µs per record, mostly
``ts_rank_cd``: measured, 1,500 keeps p50 near 10 ms and p99 near 30 ms at 100k records)."""

_WINDOW = 4
"""A sliced phase 1 looks for its matches among the newest ``_WINDOW * budget`` records."""

_CACHE_ENTRIES = 50_000
_COUNT_TTL = 10.0


@dataclass(frozen=True, slots=True)
class KeywordPlan:
    """What one search runs: ``tsquery`` texts built from PostgreSQL's own output."""

    kept: str
    """The words phase 1 ranks the matches of, OR-ed."""
    every: str
    """Every query word that matches something, OR-ed: what scores are computed against."""
    sliced: bool
    """Even the rarest word matches more than the budget: phase 1 ranks its newest matches."""
    partial: bool
    """Phase 1 left something out (frequent words, or older matches): phase 2 may fill."""
    dense: bool
    """Some word matches more than the budget: the newest matches are near the top."""


class KeywordPlanner:
    """Plans keyword searches on one store's schema, caching what it learns.

    A word's ``tsquery`` and document count are cached for ``_COUNT_TTL`` seconds once it
    matches something: a plan only needs counts roughly right, and a stale one costs a little
    speed, never a result. A word matching nothing is looked up again each time, so a word
    written a moment ago is found at once.

    Args:
        s: The store's schema, quoted.
        budget: Records phase 1 may score (at least 1).
    """

    def __init__(self, s: str, budget: int) -> None:
        self.budget = budget
        self._words: dict[str, tuple[str, int, float]] = {}
        self._lookup_sql = (
            "SELECT w.word, q::text, CASE WHEN numnode(q) = 0 THEN 0 ELSE "
            f"(SELECT count(*) FROM (SELECT FROM {s}.memories m WHERE m.tsv @@ q LIMIT $2) c) "
            "END FROM unnest($1::text[]) AS w(word), websearch_to_tsquery('english', w.word) q"
        )

    async def lookup(
        self, connection: Connection, words: Sequence[str]
    ) -> dict[str, tuple[str, int]]:
        """Each word's ``tsquery`` text and the records it matches, counted up to
        ``budget + 1`` (0: it matches nothing)."""
        now = monotonic()
        found = {
            word: (entry[0], entry[1])
            for word in words
            if (entry := self._words.get(word)) is not None and now - entry[2] < _COUNT_TTL
        }
        stale = [word for word in words if word not in found]
        if stale:
            rows = await connection.fetch(self._lookup_sql, stale, self.budget + 1)
            if len(self._words) + len(stale) > _CACHE_ENTRIES:
                self._words.clear()
            for word, query, count in rows:
                found[word] = (query, count)
                if count:
                    self._words[word] = (query, count, now)
        return found

    async def plan(self, connection: Connection, words: Sequence[str]) -> KeywordPlan | None:
        """The plan for ``words``, or ``None`` when none of them matches anything."""
        found = await self.lookup(connection, words)
        # Words matching nothing are dropped, words with one stem ("record", "records") merged.
        queries = dict(found[word] for word in words if found[word][1])
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
        return KeywordPlan(
            kept=_any(kept),
            every=_any([query for _, _, query in sized]),
            sliced=sliced,
            partial=sliced or len(kept) < len(sized),
            dense=sized[-1][0] > self.budget,
        )


def _any(queries: Sequence[str]) -> str:
    """``tsquery`` texts OR-ed (each parenthesised: a word may be a phrase)."""
    return " | ".join(f"( {query} )" for query in queries)


async def keyword_search(
    connection: Connection,
    planner: KeywordPlanner,
    s: str,
    words: Sequence[str],
    filter: MemoryFilter,
    limit: int,
) -> list[tuple[Any, float]]:
    """Ranked ``(row, score)`` pairs (rows in ``columns()`` order; higher score is better; ties
    by id)."""
    plan = await planner.plan(connection, words)
    if plan is None:
        return []
    params = Params([plan.kept, plan.every])
    where = where_clause(filter, params, s)
    budget = planner.budget
    if plan.sliced:
        # The newest window of the table, read down the `created_at` index: it costs the
        # window, where the GIN index would hand over every match of a frequent word.
        # Literal sizes: with a `$n` LIMIT a generic plan guesses 10% of the table.
        candidates = (
            f"SELECT m.* FROM (SELECT * FROM {s}.memories "
            f"ORDER BY created_at DESC, id DESC LIMIT {budget * _WINDOW:d}) m "
            f"WHERE m.tsv @@ $1::tsquery AND {where} "
            f"ORDER BY m.created_at DESC, m.id DESC LIMIT {budget:d}"
        )
    else:
        candidates = f"SELECT m.* FROM {s}.memories m WHERE m.tsv @@ $1::tsquery AND {where}"
    ranked = (
        f"SELECT c.*, ts_rank_cd(c.tsv, $2::tsquery) AS score FROM ({candidates}) c "
        f"ORDER BY score DESC, c.id LIMIT {params.add(limit)}"
    )
    rows = await connection.fetch(
        f"SELECT {columns()}, m.score FROM ({ranked}) m "
        f"LEFT JOIN {s}.memory_usage u ON u.id = m.id ORDER BY m.score DESC, m.id",
        *params.values,
    )
    hits = [(row, float(row["score"])) for row in rows]
    if len(hits) < limit and plan.partial:
        found = [row["id"] for row, _ in hits]
        hits += await _newest(connection, s, plan, filter, found, limit - len(found))
    return hits


async def _newest(
    connection: Connection,
    s: str,
    plan: KeywordPlan,
    filter: MemoryFilter,
    found: list[str],
    wanted: int,
) -> list[tuple[Any, float]]:
    """Phase 2: the ``wanted`` newest records matching any word, not yet found, best first."""
    params = Params([plan.every, found])
    where = where_clause(filter, params, s)
    # With a frequent word among them, matches are dense: walk `created_at` down and stop at
    # `wanted` (`IS TRUE` keeps the GIN index out: a generic plan, blind to the words, would
    # take it and sort every match). Otherwise the matches are few: take them all from GIN.
    match = "(m.tsv @@ $1::tsquery) IS TRUE" if plan.dense else "m.tsv @@ $1::tsquery"
    newest = (
        f"SELECT m.*, ts_rank_cd(m.tsv, $1::tsquery) AS score FROM {s}.memories m "
        f"WHERE {match} AND {where} AND m.id <> ALL($2::text[]) "
        f"ORDER BY m.created_at DESC, m.id DESC LIMIT {params.add(wanted)}"
    )
    rows = await connection.fetch(
        f"SELECT {columns()}, m.score FROM ({newest}) m "
        f"LEFT JOIN {s}.memory_usage u ON u.id = m.id ORDER BY m.score DESC, m.id",
        *params.values,
    )
    return [(row, float(row["score"])) for row in rows]
