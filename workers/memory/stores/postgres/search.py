"""Keyword search for the PostgreSQL store: Okapi BM25 with OR semantics, scored as FTS5 scores
on SQLite and planned by document frequency as the SQLite store plans FTS5
(``workers.memory.stores.sqlite.search``).

**Scores.** A record scores Okapi BM25 (k1 = 1.2, b = 0.75) for the query's terms, reported on
the calibrated scale every keyword search shares (``search.keyword.calibrated``):
``1 - exp(-bm25 / ideal)``, ``ideal`` the sum of the terms' IDFs. The same ``min_score`` thus
means the same here and on SQLite.

* Terms are the lexemes PostgreSQL derives from the query words (``to_tsvector('english',
  word)``: the parser and stemmer the ``tsv`` column is built with), deduplicated. A word
  PostgreSQL treats as a stop word has none.
* Statistics are over the whole table, as FTS5's are over its whole index: IDF is
  ``log((N - n + 0.5) / (n + 0.5))`` floored just above 0 (``search.keyword.idf``), for ``n``
  of ``N`` records holding the term; a term no record holds still counts in ``ideal``, with the
  highest IDF there is (as on SQLite).
* A record's length is its number of lexeme positions (its words, stop words excepted); a
  term's frequency, its positions in the record (a ``tsvector`` keeps at most 255 per lexeme).

What is estimated, and cached, per store:

* ``N``: ``count(*)``, cached ``_COUNT_TTL`` seconds; once ``pg_class.reltuples`` (kept by
  (auto)vacuum and analyze) reaches ``_COUNTED_UP_TO`` records, that estimate instead. Never
  below a term count ``n`` the search scores with (those are cached apart, and may be newer):
  a cached ``N`` below one is read again, and raised to it if still below, so ``n <= N``.
* ``n``: exact from the GIN index up to the budget (the count the plan makes anyway, cached
  ``_COUNT_TTL`` seconds). Above it, ANALYZE's ``most_common_elem_freqs`` for ``tsv`` times
  ``N`` when the term is among them (a sample of 30,000 rows at the default statistics
  target, so within a few percent of ``n``), else an exact ``count(*)``; either cached
  ``_STATISTICS_TTL`` seconds. A frequent term carries little IDF: its error moves scores
  little.
* The average length: from ``TABLESAMPLE SYSTEM`` of about ``_SAMPLE`` records (the whole
  table below that), cached ``_STATISTICS_TTL`` seconds, sampled again sooner once ``N`` moved
  by more than a tenth.

Scores still differ a little from SQLite's on the same records: FTS5's ``porter unicode61``
tokenizer and PostgreSQL's ``english`` configuration stem and stop some words differently,
FTS5 counts stop words in a record's length (``tsv`` has no stop words to count), and a word
PostgreSQL splits into several lexemes is one phrase on FTS5 but several terms here.

**Reading frequencies cheaply.** ``unnest(tsv)`` costs about 6 µs a record (measured), more
than the whole budget allows, so term frequencies and lengths come from ``ts_rank``, a C
function costing about 0.1 µs a call. With every weight 1, ``ts_rank`` of one lexeme is
``Σ_{i ≤ tf} 1/i² / (π²/6)``: strictly increasing in ``tf``, so ``width_bucket`` among the
midpoints of those values returns ``tf`` (exact for every count a ``tsvector`` holds: the tests
check 1 to 255). A record's length is ``ts_rank(q) / ts_rank(q, 2)``: normalisation 2 divides
by the number of positions.

**The plan.** Ranking every match of an OR of all query words reads and scores every record
holding any of them: with a frequent word in the query that is a large part of the table
(measured: 50 ms p50 and 150 ms p99 at 100k records). The plan bounds that work:

1. Stop words are dropped (``search.text.query_words``).
2. Each word becomes a ``tsquery`` through ``websearch_to_tsquery('english', word)`` (a word
   PostgreSQL treats as a stop word becomes empty and is dropped: it matches nothing; words
   with one stem are merged).
3. Each of its lexemes' document count comes from the GIN index, counting at most
   ``budget + 1`` matches: cheap because bounded, and exact below the budget, which is all the
   plan needs (a word counts as its rarest lexeme: exact for the usual word of one lexeme).
   Words that match nothing are dropped. The rest are added rarest first while their summed
   counts stay within ``budget`` (the rarest word is always kept).
4. Phase 1 ranks the records matching the kept words, filter applied before the limit. When
   even the rarest word matches more than ``budget`` records, it ranks only its newest matches:
   at most ``budget`` of them, among the newest ``_WINDOW * budget`` records (by
   ``created_at``).
5. If phase 1 found fewer than ``limit`` records and something was left out, phase 2 fills the
   rest with the newest records matching any query word, ranked after phase 1 (as on SQLite,
   a filler may score above a phase-1 hit; it still ranks after it).

Both phases score against every term of the query, so a record's score is the one the
unplanned ranking gives it: the plan chooses which records are scored, never how. Within each
phase hits are ordered by score, ties by id.

asyncpg prepares every statement, and after a few runs PostgreSQL may switch it to a generic
plan that cannot see the words (it guesses 0.5% of rows match any ``tsquery``). So each
statement is written so that its generic plan is the right one: phase 1 and the counts go
through the GIN index, and the statements that want the newest matches walk ``created_at``
with sizes the planner can read.

This module runs the plan: it scores in SQL and ranks the two phases. The statistics are
``search_stats``, the plan ``search_plan``.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from itertools import pairwise
from typing import TYPE_CHECKING, Any

from workers.memory.model.contracts import MemoryFilter
from workers.memory.retrieval.keyword import calibrated
from workers.memory.stores.postgres.search_plan import (
    DEFAULT_BUDGET,
    KeywordPlan,
    KeywordPlanner,
    any_query,
)
from workers.memory.stores.postgres.search_stats import Word
from workers.memory.stores.postgres.sql import Params, columns, where_clause

if TYPE_CHECKING:
    from workers.memory.stores.postgres.pool import Connection

__all__ = ("DEFAULT_BUDGET", "KeywordPlan", "KeywordPlanner", "Word", "keyword_search")

_WINDOW = 4
"""A sliced phase 1 looks for its matches among the newest ``_WINDOW * budget`` records."""


_K1 = 1.2
_B = 0.75

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


def _scored(source: str, plan: KeywordPlan, params: Params) -> str:
    """The rows of ``source`` (a query over ``memories``) with their BM25 for the plan's terms
    as ``score`` (see the module: frequencies and lengths are read through ``ts_rank``)."""
    steps = params.add(_STEPS)
    every = params.add(any_query(plan.terms))
    frequencies = ", ".join(
        f"width_bucket(ts_rank({_ONES}, c.tsv, {params.add(term)}::tsquery)::float8, "
        f"{steps}::float8[]) AS tf{n}"
        for n, term in enumerate(plan.terms)
    )
    length = (
        f"round(ts_rank({_ONES}, c.tsv, {every}::tsquery)::float8 "
        f"/ nullif(ts_rank({_ONES}, c.tsv, {every}::tsquery, 2), 0))"
    )
    average = params.add(plan.average)
    norm = f"{_K1!r} * (1 - {_B!r} + {_B!r} * coalesce({length} / {average}::float8, 1))"
    # OFFSET 0 keeps the subquery whole: each frequency and the norm are computed once a row.
    frequencies_of = f"SELECT c.*, {frequencies}, {norm} AS norm FROM ({source}) c OFFSET 0"
    score = " + ".join(
        f"{params.add(weight)}::float8 * f.tf{n} * {_K1 + 1!r} / (f.tf{n} + f.norm)"
        for n, weight in enumerate(plan.weights)
    )
    return f"SELECT f.*, {score} AS score FROM ({frequencies_of}) f"


async def keyword_search(
    connection: Connection,
    planner: KeywordPlanner,
    s: str,
    words: Sequence[str],
    filter: MemoryFilter,
    limit: int,
    now: datetime,
) -> list[tuple[Any, float]]:
    """Ranked ``(row, score)`` pairs: rows in ``columns()`` order, scores BM25 on the
    calibrated scale (``search.keyword.calibrated``), best first, ties by id."""
    plan = await planner.plan(connection, words)
    if plan is None:
        return []
    params = Params([plan.kept])
    where = where_clause(filter, params, s, now)
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
        f"SELECT c.* FROM ({_scored(candidates, plan, params)}) c "
        f"ORDER BY c.score DESC, c.id LIMIT {params.add(limit)}"
    )
    rows = await connection.fetch(
        f"SELECT {columns()}, m.score FROM ({ranked}) m "
        f"LEFT JOIN {s}.memory_usage u ON u.id = m.id ORDER BY m.score DESC, m.id",
        *params.values,
    )
    hits = [(row, float(row["score"])) for row in rows]
    if len(hits) < limit and plan.partial:
        found = [row["id"] for row, _ in hits]
        hits += await _newest(connection, s, plan, filter, found, limit - len(found), now)
    return [(row, calibrated(score, plan.ideal)) for row, score in hits]


async def _newest(
    connection: Connection,
    s: str,
    plan: KeywordPlan,
    filter: MemoryFilter,
    found: list[str],
    wanted: int,
    now: datetime,
) -> list[tuple[Any, float]]:
    """Phase 2: the ``wanted`` newest records matching any word, not yet found, best first."""
    params = Params([plan.every, found])
    where = where_clause(filter, params, s, now)
    # With a frequent word among them, matches are dense: walk `created_at` down and stop at
    # `wanted` (`IS TRUE` keeps the GIN index out: a generic plan, blind to the words, would
    # take it and sort every match). Otherwise the matches are few: take them all from GIN.
    match = "(m.tsv @@ $1::tsquery) IS TRUE" if plan.dense else "m.tsv @@ $1::tsquery"
    newest = (
        f"SELECT m.* FROM {s}.memories m "
        f"WHERE {match} AND {where} AND m.id <> ALL($2::text[]) "
        f"ORDER BY m.created_at DESC, m.id DESC LIMIT {params.add(wanted)}"
    )
    rows = await connection.fetch(
        f"SELECT {columns()}, m.score FROM ({_scored(newest, plan, params)}) m "
        f"LEFT JOIN {s}.memory_usage u ON u.id = m.id ORDER BY m.score DESC, m.id",
        *params.values,
    )
    return [(row, float(row["score"])) for row in rows]
