"""Exact BM25 top-k over every FTS5 match, with MaxScore pruning of frequent words' postings.

FTS5's own ``ORDER BY bm25()`` over the whole query is exact but scores every posting of every
query word, the frequent ones included. MaxScore scores only the rare words' postings:

A word contributes ``idf * tf (k1 + 1) / (tf + k1 (1 - b + b D / avgdl))`` to a row, which is
less than its bound ``idf (k1 + 1)`` for every ``tf`` and ``D``. Words are taken rarest first
into the *essential* set ``E``; the others, ``F``, have a bound sum ``rest``.

1. FTS5 ranks the rows holding a word of ``E`` by their *partial* score — ``bm25()`` of a
   query of ``E``'s words alone, computed and sorted in C. Rows are pulled from that ranking
   best first, only as far as needed. Let ``θ`` be the ``k``-th best partial score among the
   rows the filter keeps (asked about rows best first, only until ``k`` pass). While fewer
   than ``k`` pass or ``θ < rest``, the next rarest word moves into ``E`` (the smallest ``E``
   whose bounds reach ``rest`` is where it starts) — unless the rows holding a word of each
   set are few enough to count again at once (cheaper than scoring the next word's
   postings): then ``θ`` is the ``k``-th best *exact* score among ``E``'s rows, and often
   reaches ``rest`` where the partial one fell short. A rare word beside two words held by a
   tenth of the records is the common case: the rows holding the rare word and another are a
   few hundred, the next word's postings a hundred thousand.
2. One FTS5 query (``F`` AND ``E``) names the rows holding a word of each set: a row's bound is
   its partial score, plus ``rest`` if it holds one. Rows are taken from the ranking best
   first, filtered, and those holding a word of ``F`` are counted again (tokenized with the
   index's tokenizer) and scored exactly; the scan stops when a row's bound falls below the
   ``k``-th exact score so far — and every later row's bound is lower still.

Exactness (ties aside): a row holding only ``F`` words scores less than ``rest <= θ``, and ``k``
filtered rows score at least ``θ`` (a partial score is a lower bound); a row left unscored in
step 2 scores at most its bound, which is below the ``k``-th exact score (which only grows).
Either way ``k`` filtered rows beat it. Rows tied with the ``k``-th are all returned, so the
caller can break ties by record id as FTS5's ranking query does.

The scores are FTS5's to the last bit: ``E``'s words are matched in query order, so a row
without an ``F`` word gets the very sum the whole query's ``bm25()`` computes (the absent words
add ``0.0``), and a row with one is scored here from its counted terms, summed in query order
with FTS5's constants and order of operations (``bm25.term_score``). Every statement runs in one
read transaction, so the statistics, the postings and the rows are one snapshot.
"""

from __future__ import annotations

import heapq
import math
import sqlite3
from collections.abc import Callable, Collection, Iterator, Sequence
from dataclasses import dataclass

from workers.memory.stores.sqlite.bm25 import K1, Statistics, row_lengths, term_score
from workers.memory.stores.sqlite.recount import count_again
from workers.memory.stores.sqlite.sql import match_expression

__all__ = ("PAYS", "top_k")

_HOLDING_AT_ONCE = 256
"""Up to this many rows holding both an essential and a frequent word are counted again all at
once (about 6 µs a row), which spares the scan their bounds; more are counted as it meets them."""

_RECOUNT_COST = 12
"""Counting a row again costs about this many postings scored by FTS5 (~6 µs against ~1): the
rows holding both kinds of words are counted again instead of scoring the next word's postings
when they are fewer than its postings over this."""

PAYS = 0.5
"""The share of a query's postings pruning may score before FTS5's own ranking of every match
is the cheaper plan: both score a posting in C at about the same cost, and pruning adds a few
statements (the AND query, the filter, the recount) on top."""


@dataclass(frozen=True, slots=True)
class _Query:
    """A query's words with what pruning needs of them in this snapshot."""

    words: Sequence[str]
    terms: Sequence[str]
    statistics: Statistics
    idf: dict[str, float]
    bound: dict[str, float]
    """A term's largest contribution to any row: ``idf (k1 + 1)``, once per word holding it."""
    order: list[str]
    """The terms the index holds, rarest first."""

    @classmethod
    def of(cls, words: Sequence[str], terms: Sequence[str], statistics: Statistics) -> _Query:
        frequency = statistics.frequency
        idf = {term: statistics.idf(term) for term in terms}
        # A term two query words stem to is two FTS5 phrases: it counts once per word.
        bound = {term: terms.count(term) * idf[term] * (K1 + 1.0) for term in idf}
        order = sorted((term for term in idf if frequency[term]), key=lambda t: (frequency[t], t))
        return cls(words, terms, statistics, idf, bound, order)

    def postings(self, terms: Sequence[str]) -> int:
        """How many rows hold each of ``terms``, summed: the postings scoring them reads."""
        return sum(self.statistics.frequency[term] for term in terms)

    def rest(self, essential: int) -> float:
        """The bound sum of the words outside the ``essential`` rarest."""
        return sum(self.bound[term] for term in self.order[essential:])

    def fewest_essential(self) -> int:
        """The fewest rarest words whose bounds reach the others' (no row's partial score over
        fewer could reach ``rest``, so step 1 could never stop there)."""
        reached = 0.0
        for count, term in enumerate(self.order, start=1):
            reached += self.bound[term]
            if reached >= self.rest(count):
                return count
        return len(self.order)

    def spelled(self, terms: Collection[str]) -> list[str]:
        """The query's words whose terms are ``terms``, in query order: FTS5 stems a MATCH
        phrase again, and a stem is not always its own stem, so phrases are the words."""
        return [word for word, term in zip(self.words, self.terms, strict=True) if term in terms]

    def score(self, counts: dict[str, int], length: int) -> float:
        """A row's score from its term frequencies, summed in query order as FTS5 sums its
        phrases."""
        score = 0.0
        average = self.statistics.average
        for term in self.terms:
            tf = counts.get(term, 0)
            if tf:
                score += term_score(self.idf[term], tf, length, average)
        return score


def top_k(
    connection: sqlite3.Connection,
    words: Sequence[str],
    terms: Sequence[str],
    statistics: Statistics,
    limit: int,
    keep: Callable[[list[int]], list[int]],
    pays: float = PAYS,
) -> list[tuple[int, float]] | None:
    """The exact BM25 top ``limit`` over every row holding any of ``terms`` that ``keep``
    keeps: ``(rowid, score)`` best first, ties by rowid. Scores are FTS5's ``-bm25()``.

    ``None`` when pruning does not pay for this query: the essential words' postings exceed
    ``pays`` of all the query's postings; the caller ranks with FTS5 then.

    Args:
        connection: Inside a read transaction (one snapshot for every statement).
        words: The query's words, in query order.
        terms: Their index terms (what FTS5's tokenizer makes of each word), one per word.
        statistics: From ``bm25.read_statistics`` in the same transaction.
        limit: ``k``.
        keep: The filter: of the given rowids, those whose records the search may return.
        pays: The share of the query's postings worth scoring here (1: always prune).
    """
    query = _Query.of(words, terms, statistics)
    order = query.order
    if not order:
        return []
    everything = query.postings(order)
    allowed = _Filter(keep)
    essential = query.fewest_essential()
    while True:
        if essential > 1 and query.postings(order[:essential]) > pays * everything:
            return None
        ranking = _Ranking(connection, query.spelled(set(order[:essential])))
        holding: set[int] | None = None
        counted: _Counted | None = None
        if essential == len(order):
            break
        rest = query.rest(essential)
        threshold = _kth_passing(ranking, allowed, limit)
        if threshold is not None and threshold >= rest:
            break
        # The partial scores fall short of the frequent words' bounds. The exact ones may not,
        # and the rows they need counted again can cost far less than the next word's postings.
        holding = _holding(connection, query, essential)
        if len(holding) * _RECOUNT_COST <= query.postings(order[essential : essential + 1]):
            counted = _Counted.of(connection, query, holding, allowed)
            threshold = _kth_exact(ranking, allowed, counted, limit)
            if threshold is not None and threshold >= rest:
                break
        ranking.close()
        essential += 1
    if holding is None:
        holding = _holding(connection, query, essential)
    try:
        return _scan(connection, query, ranking, allowed, essential, limit, holding, counted)
    finally:
        ranking.close()


@dataclass(frozen=True, slots=True)
class _Counted:
    """The rows holding an essential word and a frequent one, counted again: the exact scores
    of those the filter keeps (every other row's partial score is its score)."""

    holding: set[int]
    scores: dict[int, float]

    @classmethod
    def of(
        cls, connection: sqlite3.Connection, query: _Query, holding: set[int], allowed: _Filter
    ) -> _Counted:
        passing = allowed.passing(sorted(holding))
        return cls(holding, dict(_recounted(connection, query, passing)))


def _kth_exact(ranking: _Ranking, allowed: _Filter, counted: _Counted, limit: int) -> float | None:
    """The ``limit``-th best exact score among the rows holding an essential word that the
    filter keeps, or ``None`` while fewer pass: the counted rows' scores, and the best rows
    of the ranking that hold no frequent word (their partial score is exact; the ranking is
    read until one falls below the ``limit``-th so far)."""
    best = heapq.nlargest(limit, counted.scores.values())
    heapq.heapify(best)
    for chunk in ranking.chunks(limit):
        if len(best) >= limit and chunk[0][1] < best[0]:
            break
        partial = {doc: value for doc, value in chunk if doc not in counted.holding}
        for doc in allowed.passing(list(partial)):
            if len(best) < limit:
                heapq.heappush(best, partial[doc])
            elif partial[doc] > best[0]:
                heapq.heapreplace(best, partial[doc])
    return best[0] if len(best) >= limit else None


def _scan(
    connection: sqlite3.Connection,
    query: _Query,
    ranking: _Ranking,
    allowed: _Filter,
    essential: int,
    limit: int,
    holding: set[int],
    counted: _Counted | None,
) -> list[tuple[int, float]]:
    """Step 2: the exact scores of the rows whose bound reaches the ``k``-th exact score, the
    best ``limit`` of them best first (and any tied with the last). ``holding``: the rows
    holding an essential word and a frequent one; ``counted``: those counted again already
    (when step 1 did)."""
    rest = query.rest(essential)
    if counted is None and len(holding) <= _HOLDING_AT_ONCE:
        counted = _Counted.of(connection, query, holding, allowed)
    exact: dict[int, float] = {}
    best: list[float] = []  # a min-heap of the best `limit` exact scores so far

    def score(docs: list[int], partial: dict[int, float]) -> None:
        recount = [doc for doc in docs if doc in holding]
        exact.update(_recounted(connection, query, recount))
        for doc in docs:
            value = exact.setdefault(doc, partial.get(doc, 0.0))
            if len(best) < limit:
                heapq.heappush(best, value)
            elif value > best[0]:
                heapq.heapreplace(best, value)

    if counted is not None:
        # Few rows hold both kinds of words: they are scored already. The scan then only
        # meets rows whose partial score is their score, and stops at the first below the k-th.
        for doc, value in counted.scores.items():
            exact[doc] = value
            if len(best) < limit:
                heapq.heappush(best, value)
            elif value > best[0]:
                heapq.heapreplace(best, value)
        rest = 0.0
    for chunk in ranking.chunks(limit):
        # Strictly below: a row tied with the k-th is kept (ties go by record id).
        if len(best) >= limit and chunk[0][1] + rest < best[0]:
            break
        floor = best[0] if len(best) >= limit else -math.inf
        partial = {doc: value for doc, value in chunk if doc not in exact}
        score(
            [
                doc
                for doc in allowed.passing(list(partial))
                if partial[doc] + (rest if doc in holding else 0.0) >= floor
            ],
            partial,
        )
    final = sorted(exact.items(), key=lambda pair: (-pair[1], pair[0]))
    cut = min(limit, len(final))
    while 0 < cut < len(final) and final[cut][1] == final[cut - 1][1]:
        cut += 1
    return final[:cut]


def _recounted(
    connection: sqlite3.Connection, query: _Query, docs: list[int]
) -> Iterator[tuple[int, float]]:
    """The exact scores of ``docs`` from their terms counted again and their lengths."""
    if not docs:
        return
    counts = count_again(connection, docs, sorted(set(query.terms)))
    for doc, length in row_lengths(connection, docs):
        yield doc, query.score(counts[doc], length)


class _Ranking:
    """FTS5's ranking of the rows holding any of ``words`` by their ``bm25()`` over those words
    alone (best first, ties by rowid), pulled from the statement only as far as it is read."""

    def __init__(self, connection: sqlite3.Connection, words: Sequence[str]) -> None:
        self._cursor = connection.execute(
            "SELECT rowid, -bm25(memory_fts) FROM memory_fts WHERE memory_fts MATCH ? "
            "ORDER BY bm25(memory_fts), rowid",
            (match_expression(words),),
        )
        self._rows: list[tuple[int, float]] = []
        self._done = False

    def chunks(self, limit: int) -> Iterator[list[tuple[int, float]]]:
        """The ranking in slices: a little more than ``limit`` first (most searches stop
        there), then doubling, so a long scan costs few statements."""
        start, step = 0, 2 * limit + 16
        while True:
            while len(self._rows) < start + step and not self._done:
                pulled = self._cursor.fetchmany(start + step - len(self._rows))
                self._done = not pulled
                self._rows += pulled
            chunk = self._rows[start : start + step]
            if not chunk:
                return
            yield chunk
            start += step
            step *= 2

    def close(self) -> None:
        self._cursor.close()


def _kth_passing(ranking: _Ranking, allowed: _Filter, limit: int) -> float | None:
    """The ``limit``-th best partial score among the rows the filter keeps (a lower bound of
    the ``limit``-th best score), or ``None`` while fewer pass."""
    kept = 0
    for chunk in ranking.chunks(limit):
        partial = dict(chunk)
        for doc in allowed.passing(list(partial)):
            kept += 1
            if kept == limit:
                return partial[doc]
    return None


def _holding(connection: sqlite3.Connection, query: _Query, essential: int) -> set[int]:
    """The rows holding a frequent word and an essential one, in one AND query (FTS5 seeks the
    frequent doclists from the rare ones'): every other row's partial score is its score."""
    frequent = query.order[essential:]
    if not frequent:
        return set()
    expression = (
        f"({match_expression(query.spelled(set(frequent)))}) AND "
        f"({match_expression(query.spelled(set(query.order[:essential])))})"
    )
    return {
        doc
        for (doc,) in connection.execute(
            "SELECT rowid FROM memory_fts WHERE memory_fts MATCH ?", (expression,)
        )
    }


class _Filter:
    """The filter, asked only about the rows that matter, each at most once."""

    def __init__(self, keep: Callable[[list[int]], list[int]]) -> None:
        self._keep = keep
        self._known: dict[int, bool] = {}

    def passing(self, docs: list[int]) -> list[int]:
        """Those of ``docs`` the filter keeps, in order."""
        unknown = [doc for doc in docs if doc not in self._known]
        if unknown:
            kept = set(self._keep(unknown))
            self._known.update((doc, doc in kept) for doc in unknown)
        return [doc for doc in docs if self._known[doc]]
