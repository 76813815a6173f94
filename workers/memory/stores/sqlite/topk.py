"""Exact BM25 top-k over every FTS5 match, with MaxScore pruning of frequent words' postings.

FTS5's own ``ORDER BY bm25()`` is exact but scores every posting of every query word (~0.6 µs
each), and ``bm25()`` cannot score a chosen set of rows cheaply: it recounts each word's
matching rows once per row it scores. So the scores are computed here, with FTS5's formula and
FTS5's own statistics, from what the index stores:

* ``N`` and the total token count from the index's averages record (``memory_fts_data`` row 1),
* a term's document frequency from ``memory_fts_vocab``,
* a row's length from ``memory_fts_docsize``,
* a term's frequency in each row from an ``fts5vocab`` ``instance`` table, for the rare words,
  or by tokenizing the few candidate rows again with the same tokenizer, for the frequent ones.

**MaxScore.** A word contributes ``idf * tf (k1 + 1) / (tf + k1 (1 - b + b D / avgdl))`` to a
row, which is less than its bound ``idf (k1 + 1)`` for every ``tf`` and ``D``. Words are taken
rarest first into the *essential* set ``E``; the others, ``F``, have a bound sum ``rest``.

1. Every row holding a word of ``E`` is a candidate. Its partial score over ``E`` is known
   exactly once its length is read; until then it is bounded by its value at length 0 (a
   contribution falls as the row grows), and lengths are read, best bound first, only for
   candidates whose bound could still matter. Let ``θ`` be the ``k``-th best exact partial
   score among the candidates the filter keeps (the filter is asked about candidates best
   first, only until ``k`` pass). While fewer than ``k`` pass or ``θ < rest``, the next rarest
   word moves into ``E``.
2. One FTS5 query (``F`` AND ``E``) names the candidates holding a word of ``F``: a
   candidate's bound is its partial score (or its bound), plus ``rest`` if it holds one. The
   candidates are taken best bound first, filtered, measured, and those holding a word of ``F``
   are counted again (tokenized with the index's tokenizer); the scan stops when the next
   bound falls below the ``k``-th exact score so far.

Exactness (ties aside): a row holding only ``F`` words scores less than ``rest <= θ``, and ``k``
filtered candidates score at least ``θ`` (a partial score is a lower bound); a candidate left
unscored in step 2 scores at most its bound, which is below the ``k``-th exact score (which
only grows). Either way ``k`` filtered rows beat it. Candidates tied with the ``k``-th are all
returned, so the caller can break ties by record id as FTS5's ranking query does. Every
statement runs in one read transaction, so the statistics, the postings and the rows are one
snapshot, as FTS5's ``bm25()`` sees within one statement.
"""

from __future__ import annotations

import heapq
import json
import math
import sqlite3
from collections.abc import Callable, Iterator, Sequence

from workers.memory.stores.sqlite.bm25 import K1, Statistics, row_lengths, term_score
from workers.memory.stores.sqlite.sql import match_expression

__all__ = ("prepare_topk", "top_k")


def prepare_topk(connection: sqlite3.Connection) -> None:
    """Create the per-connection TEMP tables top-k reads postings and re-tokenizes rows with."""
    connection.execute(
        "CREATE VIRTUAL TABLE IF NOT EXISTS temp.memory_fts_instance "
        "USING fts5vocab(main, memory_fts, 'instance')"
    )
    connection.execute(
        "CREATE VIRTUAL TABLE IF NOT EXISTS temp.candidate_text "
        "USING fts5(key, summary, body, content='', tokenize='porter unicode61')"
    )
    connection.execute(
        "CREATE VIRTUAL TABLE IF NOT EXISTS temp.candidate_terms "
        "USING fts5vocab(temp, candidate_text, 'instance')"
    )


def top_k(
    connection: sqlite3.Connection,
    words: Sequence[str],
    terms: Sequence[str],
    statistics: Statistics,
    limit: int,
    keep: Callable[[list[int]], list[int]],
    pays: float = 1 / 3,
) -> list[tuple[int, float]] | None:
    """The exact BM25 top ``limit`` over every row holding any of ``terms`` that ``keep``
    keeps: ``(rowid, score)`` best first, ties by rowid. Scores are FTS5's ``-bm25()``.

    ``None`` when pruning does not pay for this query: the postings it would read here (about
    2 µs each) exceed ``pays`` (a third) of all the query's postings, which FTS5's own
    ``ORDER BY bm25()`` ranks at about 0.6 µs each; the caller ranks with FTS5 then.

    Args:
        connection: Inside a read transaction (one snapshot for every statement).
        words: The query's words, in query order.
        terms: Their index terms (what FTS5's tokenizer makes of each word), one per word.
        statistics: From ``bm25.read_statistics`` in the same transaction.
        limit: ``k``.
        keep: The filter: of the given rowids, those whose records the search may return.
        pays: The share of the query's postings worth reading here (1: always prune).
    """
    idf = {term: statistics.idf(term) for term in terms}
    # A term two query words stem to is two FTS5 phrases: it counts once per word.
    bound = {term: terms.count(term) * idf[term] * (K1 + 1.0) for term in idf}
    order = sorted(
        (term for term in idf if statistics.frequency[term]),
        key=lambda term: (statistics.frequency[term], term),
    )
    allowed = _Filter(keep)
    counts: dict[int, dict[str, int]] = {}
    """Term frequencies of every candidate, for the terms counted so far."""
    lengths: dict[int, int] = {}
    partial: dict[int, float] = {}
    """Exact partial scores of the candidates whose length has been read."""
    loose: dict[int, float] = {}
    """Upper bounds of the others' partial scores (the contribution at length 0)."""
    average = statistics.average

    def measure(docs: list[int]) -> None:
        """Read the lengths of ``docs`` and turn their loose bounds into exact partials."""
        lengths.update(row_lengths(connection, docs))
        for doc in docs:
            del loose[doc]
            partial[doc] = sum(
                term_score(idf[term] * terms.count(term), tf, lengths[doc], average)
                for term, tf in counts[doc].items()
            )

    everything = sum(statistics.frequency[term] for term in order)
    read = 0
    essential = 0
    while essential < len(order):
        term = order[essential]
        read += statistics.frequency[term]
        if essential and read > pays * everything:
            return None
        essential += 1
        weight = idf[term] * terms.count(term)
        for doc, tf in connection.execute(
            "SELECT doc, count(*) FROM temp.memory_fts_instance WHERE term = ? GROUP BY doc",
            (term,),
        ):
            counts.setdefault(doc, {})[term] = tf
            if doc in partial:
                partial[doc] += term_score(weight, tf, lengths[doc], average)
            else:
                loose[doc] = loose.get(doc, 0.0) + term_score(weight, tf, 0, average)
        rest = sum(bound[other] for other in order[essential:])
        if _enough(allowed, partial, loose, measure, limit, rest):
            break
    rest = sum(bound[term] for term in order[essential:])
    holding = _holding(connection, words, terms, order[:essential], order[essential:])

    def ceiling(doc: int) -> float:
        """An upper bound of the document's score."""
        known = partial[doc] if doc in partial else loose[doc]
        return known + rest if doc in holding else known

    ranked = sorted(counts, key=lambda doc: (-ceiling(doc), doc))
    best: list[float] = []  # a min-heap of the best `limit` exact scores so far
    scored: list[int] = []
    for start, end in _chunks(len(ranked), limit):
        # Strictly below: a candidate tied with the k-th is kept (ties go by record id).
        if len(best) >= limit and ceiling(ranked[start]) < best[0]:
            break
        passing = allowed.passing(ranked[start:end])
        measure([doc for doc in passing if doc in loose])
        floor = best[0] if len(best) >= limit else -math.inf
        reaching = [doc for doc in passing if ceiling(doc) >= floor]
        recount = [doc for doc in reaching if doc in holding]
        if recount:
            _count_again(connection, recount, order[essential:], counts)
        for doc in reaching:
            score = _score(counts[doc], terms, idf, lengths[doc], average)
            scored.append(doc)
            if len(best) < limit:
                heapq.heappush(best, score)
            elif score > best[0]:
                heapq.heapreplace(best, score)
    return _best(scored, counts, terms, idf, lengths, average, limit)


def _enough(
    allowed: _Filter,
    partial: dict[int, float],
    loose: dict[int, float],
    measure: Callable[[list[int]], None],
    limit: int,
    rest: float,
) -> bool:
    """Whether ``limit`` filtered candidates are known to score at least ``rest`` (so no row
    without an essential word can enter). Lengths are read only for the candidates whose loose
    bound could still raise the ``limit``-th partial score, best bound first."""
    if rest == 0.0:
        return True
    step = 2 * limit + 16
    while True:
        threshold = allowed.kth(partial, limit)
        if threshold is not None and threshold >= rest:
            return True
        floor = -math.inf if threshold is None else threshold
        promising = heapq.nlargest(
            step, (doc for doc in loose if loose[doc] > floor), key=loose.__getitem__
        )
        if not promising:
            return False
        measure(promising)
        step *= 2


def _holding(
    connection: sqlite3.Connection,
    words: Sequence[str],
    terms: Sequence[str],
    essential: Sequence[str],
    frequent: Sequence[str],
) -> set[int]:
    """The rows holding a frequent word and an essential one, in one AND query (FTS5 seeks the
    frequent doclists from the rare ones'): every other candidate's partial score is its score."""
    if not frequent:
        return set()
    # FTS5 stems a MATCH phrase again, and a stem is not always its own stem: match the words.
    spelled = {term: word for word, term in zip(words, terms, strict=True)}
    expression = (
        f"({match_expression([spelled[term] for term in frequent])}) AND "
        f"({match_expression([spelled[term] for term in essential])})"
    )
    return {
        doc
        for (doc,) in connection.execute(
            "SELECT rowid FROM memory_fts WHERE memory_fts MATCH ?", (expression,)
        )
    }


def _chunks(size: int, limit: int) -> Iterator[tuple[int, int]]:
    """``[start, end)`` slices of ``range(size)``: a little more than ``limit`` first (most
    searches stop there), then doubling, so a long scan costs few statements."""
    start, step = 0, 2 * limit + 16
    while start < size:
        yield start, min(start + step, size)
        start += step
        step *= 2


class _Filter:
    """The filter, asked only about the candidates that matter, each at most once."""

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

    def kth(self, partial: dict[int, float], limit: int) -> float | None:
        """The ``limit``-th best partial score among the candidates the filter keeps (a lower
        bound of the ``limit``-th best score), or ``None`` while fewer pass."""
        ranked = sorted(partial, key=lambda doc: (-partial[doc], doc))
        kept = 0
        for start, end in _chunks(len(ranked), limit):
            for doc in self.passing(ranked[start:end]):
                kept += 1
                if kept == limit:
                    return partial[doc]
        return None


def _best(
    docs: list[int],
    counts: dict[int, dict[str, int]],
    terms: Sequence[str],
    idf: dict[str, float],
    lengths: dict[int, int],
    average: float,
    limit: int,
) -> list[tuple[int, float]]:
    """The best ``limit`` of ``docs`` by exact score, best first, and any tied with the last
    (the caller breaks ties by record id, as FTS5's ranking query does)."""
    final = [(doc, _score(counts[doc], terms, idf, lengths[doc], average)) for doc in docs]
    final.sort(key=lambda pair: (-pair[1], pair[0]))
    cut = min(limit, len(final))
    while 0 < cut < len(final) and final[cut][1] == final[cut - 1][1]:
        cut += 1
    return final[:cut]


def _score(
    counts: dict[str, int],
    terms: Sequence[str],
    idf: dict[str, float],
    length: int,
    average: float,
) -> float:
    """A row's score, summed in query order as FTS5 sums its phrases."""
    score = 0.0
    for term in terms:
        tf = counts.get(term, 0)
        if tf:
            score += term_score(idf[term], tf, length, average)
    return score


def _count_again(
    connection: sqlite3.Connection,
    docs: list[int],
    terms: Sequence[str],
    counts: dict[int, dict[str, int]],
) -> None:
    """Count ``terms`` in ``docs`` by tokenizing their indexed text again with the index's
    tokenizer (reading a frequent term's postings would cost its whole doclist)."""
    # A contentless table: 'delete-all' empties it at once.
    connection.execute("INSERT INTO temp.candidate_text(candidate_text) VALUES ('delete-all')")
    connection.execute(
        "INSERT INTO temp.candidate_text(rowid, key, summary, body) "
        "SELECT f.rowid, f.key, f.summary, f.body FROM json_each(?) j "
        "CROSS JOIN main.memory_fts f ON f.rowid = j.value",
        (json.dumps(docs),),
    )
    marks = ", ".join("?" * len(terms))
    for term, doc, tf in connection.execute(
        f"SELECT term, doc, count(*) FROM temp.candidate_terms WHERE term IN ({marks}) "
        "GROUP BY term, doc",
        list(terms),
    ):
        counts[doc][term] = tf
