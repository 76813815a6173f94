"""Keyword search for the PostgreSQL store: the exact Okapi BM25 top-k over every record
holding any query word (OR semantics), filter applied before the limit, with MaxScore pruning
over the GIN index's postings.

**Scores.** A record scores Okapi BM25 (k1 = 1.2, b = 0.75) for the query's terms, reported on
the calibrated scale every keyword search shares (``retrieval.keyword.calibrated``):
``1 - exp(-bm25 / ideal)``, ``ideal`` the sum of the terms' IDFs. The same ``min_score`` thus
means the same here, on SQLite and in the in-process store.

* Terms are the lexemes PostgreSQL derives from the query words (``to_tsvector('english',
  word)``: the parser and stemmer the ``tsv`` column is built with), deduplicated. A word
  PostgreSQL treats as a stop word has none.
* Statistics are exact, over the whole table, as FTS5's are over its whole index, read in the
  search's own snapshot from the counters the database keeps in every write transaction
  (``search_schema``): ``N``, each term's document frequency ``n``, and the sum of the
  records' lengths. IDF is ``log((N - n + 0.5) / (n + 0.5))`` floored just above 0
  (``retrieval.keyword.idf``); a term no record holds still counts in ``ideal``.
* A record's length is its number of words, stop words included (``memories.words``), as FTS5
  and the in-process store count it; a term's frequency is its number of positions in ``tsv``
  (a ``tsvector`` keeps at most 255 per lexeme).

Scores still differ a little from SQLite's on the same records where FTS5's ``porter
unicode61`` tokenizer and PostgreSQL's ``english`` configuration stem words differently.

**Reading frequencies cheaply.** ``unnest(tsv)`` costs about 6 µs a record, so term
frequencies come from ``ts_rank``, a C function costing about 0.1 µs a call: with every weight
1, ``ts_rank`` of one lexeme is ``Σ_{i ≤ tf} 1/i² / (π²/6)``, strictly increasing in ``tf``, so
``width_bucket`` among the midpoints of those values returns ``tf`` (exact for every count a
``tsvector`` holds: the tests check 1 to 255).

**MaxScore.** A term adds ``idf · F`` to a record, ``F = tf (k1 + 1) / (tf + k1 (1 - b + b ·
len / avgdl))``; its bound is ``idf`` times an upper bound of ``F`` over the records holding
it, kept by the database (``search_impacts``: the greatest ``F`` of its postings at a reference
average, scaled to the current one), and never above the loosest, ``idf (k1 + 1)``. Terms are
taken rarest first, in rounds (``search_plan``: the rare ones together while their postings
are few). A round reads, through the GIN index, the records holding a term of the round and
none of the earlier rounds', keeps those the filter keeps, scores each *fully* (every term of
the query it may hold) and returns its best ``k``; the best ``k`` of all rounds so far are kept,
with their exact scores. After a round, a record holding none of the terms read so far scores
less than the sum of the remaining terms' bounds: once the ``k``-th best score reaches that
sum, no unread record can enter, and the search stops.

Once no remaining term *alone* has a bound above the ``k``-th score, an unread record can
only enter by holding several of them: one last round reads the records holding all of some
smallest set of remaining terms whose bounds together exceed it (a ``tsquery`` OR of ANDs, so
GIN intersects the postings and only records where frequent words meet are read), and the
search ends. Frequent terms (small IDF, so small bounds) are thus read only where they meet,
and the work is mostly the rare terms' postings.

Exact, ties included: within each round and across them hits are ordered by score, then id,
and an unread record scores strictly below the ``k``-th.

Every statement runs in one ``REPEATABLE READ`` read-only transaction: the statistics, the
postings and the rows are one snapshot, as FTS5's ``bm25()`` sees within one statement.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from itertools import pairwise
from typing import TYPE_CHECKING, Any

from workers.memory.model.contracts import MemoryFilter
from workers.memory.retrieval.keyword import calibrated
from workers.memory.stores.postgres.search_plan import (
    K1,
    B,
    KeywordPlan,
    KeywordPlanner,
    any_query,
)
from workers.memory.stores.postgres.sql import Params, columns, records, where_clause

if TYPE_CHECKING:
    from workers.memory.stores.postgres.pool import Connection

__all__ = ("KeywordPlan", "KeywordPlanner", "keyword_search")

_POSITIONS = 256
"""More positions than a ``tsvector`` keeps for one lexeme."""


def _frequency_steps() -> list[float]:
    """Midpoints between ``ts_rank('{1,1,1,1}', tsv, lexeme)`` of successive term frequencies
    (``Σ_{i ≤ tf} 1/i² / 1.64493406685``, as ``calc_rank_or`` computes it): the ``n``-th is
    where frequency ``n`` begins, so ``width_bucket`` turns a rank into its frequency."""
    values = [0.0]
    total = 0.0
    for count in range(1, _POSITIONS + 1):
        total += 1.0 / count**2
        values.append(total / 1.64493406685)
    return [(low + high) / 2 for low, high in pairwise(values)]


_STEPS = _frequency_steps()
_ONES = "'{1,1,1,1}'::float4[]"


def _scored(source: str, plan: KeywordPlan, params: Params, read: int) -> str:
    """``(id, score)`` of the rows of ``source`` (a query over ``memories`` yielding ``id``,
    ``tsv`` and ``words`` of records holding none of ``terms[:read]``): their BM25 for every
    term of the plan (those it holds none of add nothing, so they are not looked up)."""
    steps = params.add(_STEPS)
    frequencies = ", ".join(
        f"width_bucket(ts_rank({_ONES}, c.tsv, {params.add(term)}::tsquery)::float8, "
        f"{steps}::float8[]) AS tf{n}"
        for n, term in enumerate(plan.terms)
        if n >= read
    )
    average = params.add(plan.average)
    norm = f"{K1!r} * (1 - {B!r} + {B!r} * c.words / {average}::float8)"
    # OFFSET 0 keeps the subquery whole: each frequency and the norm are computed once a row.
    frequencies_of = f"SELECT c.id, {frequencies}, {norm} AS norm FROM ({source}) c OFFSET 0"
    score = " + ".join(
        f"{params.add(weight)}::float8 * f.tf{n} * {K1 + 1!r} / (f.tf{n} + f.norm)"
        for n, weight in enumerate(plan.weights)
        if n >= read
    )
    return f"SELECT f.id, {score} AS score FROM ({frequencies_of}) f"


async def keyword_search(
    connection: Connection,
    planner: KeywordPlanner,
    s: str,
    words: Sequence[str],
    filter: MemoryFilter,
    limit: int,
    now: datetime,
) -> list[tuple[Any, float]]:
    """The exact BM25 top ``limit`` of the records ``filter`` keeps at ``now`` that hold any
    of ``words``: ``(row, score)`` pairs best first, ties by id, rows in ``columns()`` order,
    scores on the calibrated scale (``retrieval.keyword.calibrated``)."""
    async with connection.transaction(isolation="repeatable_read", readonly=True):
        plan = await planner.plan(connection, words)
        if plan is None:
            return []
        best: list[tuple[str, float]] = []
        read = 0
        while read < len(plan.terms):
            threshold = best[-1][1] if len(best) >= limit else None
            # Strictly below: an unread record scores less than the unread terms' bounds.
            if threshold is not None and threshold >= plan.bound(read):
                break
            combined: list[tuple[int, ...]] | None = None
            if threshold is not None and plan.bound(read, read + 1) <= threshold:
                combined = plan.combinations(read, threshold)
            if combined:
                # No unread term alone can lift a record above the k-th score: only records
                # holding one of these sets of them can (GIN intersects their postings).
                match = " | ".join(
                    "( " + " & ".join(plan.terms[n] for n in chosen) + " )" for chosen in combined
                )
                found = await _round(connection, s, plan, match, read, filter, limit, now)
                end = len(plan.terms)
            else:
                end = plan.next_round(read)
                match = any_query(plan.terms[read:end])
                found = await _round(connection, s, plan, match, read, filter, limit, now)
            best += found
            best.sort(key=lambda hit: (-hit[1], hit[0]))
            del best[limit:]
            read = end
        if not best:
            return []
        rows = await connection.fetch(
            f"SELECT {columns()} FROM {records(s)} WHERE m.id = ANY($1::text[])",
            [id for id, _ in best],
        )
    stored = {row["id"]: row for row in rows}
    return [(stored[id], calibrated(score, plan.ideal)) for id, score in best]


async def _round(
    connection: Connection,
    s: str,
    plan: KeywordPlan,
    match: str,
    read: int,
    filter: MemoryFilter,
    limit: int,
    now: datetime,
) -> list[tuple[str, float]]:
    """The best ``limit`` ``(id, BM25)`` among the records the filter keeps that match
    ``match`` (a ``tsquery`` text) and hold none of ``terms[:read]``, best first, ties by
    id."""
    params = Params([match])
    condition = "m.tsv @@ $1::tsquery"
    if read:
        condition += f" AND NOT (m.tsv @@ {params.add(any_query(plan.terms[:read]))}::tsquery)"
    if plan.phrases:
        condition += f" AND m.tsv @@ {params.add(plan.every)}::tsquery"
    where = where_clause(filter, params, s, now)
    candidates = f"SELECT m.id, m.tsv, m.words FROM {s}.memories m WHERE {condition} AND {where}"
    rows = await connection.fetch(
        f"SELECT r.id, r.score FROM ({_scored(candidates, plan, params, read)}) r "
        f"ORDER BY r.score DESC, r.id LIMIT {params.add(limit)}",
        *params.values,
    )
    return [(row["id"], float(row["score"])) for row in rows]
