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
  (auto)vacuum and analyze) reaches ``_COUNTED_UP_TO`` records, that estimate instead.
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
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import pairwise
from time import monotonic
from typing import TYPE_CHECKING, Any

from workers.memory.contracts import MemoryFilter
from workers.memory.search.keyword import calibrated, idf
from workers.memory.stores.postgres.sql import Params, columns, where_clause

if TYPE_CHECKING:
    from workers.memory.stores.postgres.pool import Connection

__all__ = ("DEFAULT_BUDGET", "KeywordPlan", "KeywordPlanner", "Word", "keyword_search")

DEFAULT_BUDGET = 1_500
"""Records phase 1 may score; bounds the cost of one search (a few µs per record, mostly
reading it: measured, 1,500 keeps p50 under 10 ms and p99 under 30 ms at 100k records)."""

_WINDOW = 4
"""A sliced phase 1 looks for its matches among the newest ``_WINDOW * budget`` records."""

_CACHE_ENTRIES = 50_000
_COUNT_TTL = 10.0
_STATISTICS_TTL = 60.0
_COUNTED_UP_TO = 100_000
"""Below this many records (by ``pg_class.reltuples``) ``N`` is counted, above it estimated."""
_SAMPLE = 1_000
"""Records the average length is measured on."""

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


class KeywordPlanner:
    """Plans keyword searches on one store's schema, caching what it learns.

    A word's lexemes and their document counts are cached for ``_COUNT_TTL`` seconds once the
    word matches something: a plan only needs counts roughly right, and a stale one costs a
    little speed and moves scores (so perhaps the order) a little; it never invents a record.
    A word matching nothing is looked up again each time, so a word written a moment ago is
    found at once. Table statistics are cached as the module describes.

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

    async def documents(self, connection: Connection) -> int:
        """``N``: the records in the table (counted, or estimated in a large table)."""
        now = monotonic()
        if self._documents is None or now - self._documents[1] >= _COUNT_TTL:
            count = await connection.fetchval(self._documents_sql)
            self._documents = (max(int(count), 0), now)
        return self._documents[0]

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
        documents = await self.documents(connection)
        weights: dict[str, float] = {}
        for term, count in counted.items():
            if count > self.budget:
                count = await self.frequency(connection, term, documents)
            weights[term] = idf(documents, count)
        return KeywordPlan(
            kept=_any(kept),
            every=_any([query for _, _, query in sized]),
            sliced=sliced,
            partial=sliced or len(kept) < len(sized),
            dense=sized[-1][0] > self.budget,
            terms=tuple(term for term, count in counted.items() if count),
            weights=tuple(weights[term] for term, count in counted.items() if count),
            ideal=math.fsum(weights.values()),
            average=await self.average(connection, documents),
        )


def _as_query(lexeme: str) -> str:
    """SQL for the ``tsquery`` of one lexeme (``lexeme`` is an SQL expression), quoted as
    PostgreSQL prints one: no lexeme is ever read as query syntax."""
    return f"('''' || replace(replace({lexeme}, '\\', '\\\\'), '''', '''''') || '''')::tsquery"


def _any(queries: Sequence[str]) -> str:
    """``tsquery`` texts OR-ed (each parenthesised: a word may be a phrase)."""
    return " | ".join(f"( {query} )" for query in queries)


def _scored(source: str, plan: KeywordPlan, params: Params) -> str:
    """The rows of ``source`` (a query over ``memories``) with their BM25 for the plan's terms
    as ``score`` (see the module: frequencies and lengths are read through ``ts_rank``)."""
    steps = params.add(_STEPS)
    every = params.add(_any(plan.terms))
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
) -> list[tuple[Any, float]]:
    """Ranked ``(row, score)`` pairs: rows in ``columns()`` order, scores BM25 on the
    calibrated scale (``search.keyword.calibrated``), best first, ties by id."""
    plan = await planner.plan(connection, words)
    if plan is None:
        return []
    params = Params([plan.kept])
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
        hits += await _newest(connection, s, plan, filter, found, limit - len(found))
    return [(row, calibrated(score, plan.ideal)) for row, score in hits]


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
