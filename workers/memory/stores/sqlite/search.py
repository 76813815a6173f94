"""Keyword search for the SQLite store: FTS5 BM25 with OR semantics, planned by term frequency.

Natural-language questions need OR semantics for recall, but on FTS5 an OR of frequent words
scores almost every row (measured: ~24 ms p50 at 100k rows) and an AND of two frequent words has
a long tail. The plan keeps OR recall without that cost:

1. Stop words are dropped (``search.text.query_words``).
2. Each remaining word is tokenized by FTS5 itself (a per-connection TEMP FTS5 table with the
   same tokenizer), so its stemmed terms can be looked up in the index vocabulary.
3. Words whose terms are not in the index are dropped (they match nothing). The rest are added
   rarest first while their summed document frequencies stay within ``budget`` postings (the
   rarest word is always kept): the frequent words left out carry little IDF, and scoring their
   postings is what makes OR slow.
4. Phase 1 ranks the matches of the kept words by BM25 inside FTS5 (its fast path: only the
   top rows are joined to their records). A filter is applied to the best ``4 × limit + 20``
   of them; only when that leaves fewer than ``limit`` is the filter joined before ranking
   (exact for any filter, but it joins every match). When even the rarest word alone exceeds
   the budget, phase 1 ranks only the newest slice of the index that holds about ``budget`` of
   its postings (rowids grow with time).
5. If phase 1 found fewer than ``limit`` records and something was left out, phase 2 fills the
   rest with the newest records matching any query word (postings are read newest first, so
   this costs ``limit`` rows, not whole doclists), scored by BM25 and ranked after phase 1.

Phase 1 therefore never ranks much more than ``budget`` postings, whatever the query.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from time import monotonic
from typing import Any

from workers.memory.model.contracts import MemoryFilter
from workers.memory.retrieval.keyword import calibrated, idf
from workers.memory.stores.sqlite.sql import COLUMNS, match_expression, where_clause

__all__ = ("DEFAULT_BUDGET", "KeywordPlanner", "keyword_search", "prepare_connection")

DEFAULT_BUDGET = 4_000
"""Postings phase 1 may rank; bounds the cost of one search (~1-2 µs per posting here)."""

_FILTER_OVERFETCH = 4
_FILTER_SLACK = 20
"""A filtered search first ranks ``limit × 4 + 20`` matches inside FTS5 and filters those."""

_CACHE_ENTRIES = 50_000
_FREQUENCY_TTL = 10.0


def prepare_connection(connection: sqlite3.Connection) -> None:
    """Create the TEMP tables the planner tokenizes query words with (once per connection)."""
    connection.execute(
        "CREATE VIRTUAL TABLE IF NOT EXISTS temp.query_words "
        "USING fts5(word, tokenize='porter unicode61')"
    )
    connection.execute(
        "CREATE VIRTUAL TABLE IF NOT EXISTS temp.query_words_terms "
        "USING fts5vocab(temp, query_words, 'instance')"
    )


@dataclass(slots=True)
class _Statistics:
    """BM25's statistics as one snapshot of the index saw them (every count within ``N``)."""

    documents: int
    """``N``: the records in the index."""
    frequency: dict[str, int]
    """Documents containing each term, for terms the index holds (absent ones are looked up
    again: a term may be written any moment)."""
    taken: float
    """When ``documents`` was counted (``monotonic``)."""

    def keep(self, counts: dict[str, int]) -> None:
        """Add the terms' counts (each at most ``documents``) that are not 0."""
        self.frequency.update((term, count) for term, count in counts.items() if count)


class KeywordPlanner:
    """Plans keyword searches on one connection (so one thread), caching what it learns.

    Tokenizing a word never changes, so it is cached for good. ``N`` and the document
    frequencies change with writes, so they are cached together, as one snapshot, for
    ``_FREQUENCY_TTL`` seconds: a plan only needs them roughly right, and a stale one costs a
    little speed, never a result (terms not in the index are never cached, so a word written a
    moment ago is found at once). The snapshot keeps BM25's ``n <= N``: it is read in one
    statement, and a term counted later that more documents hold than its ``N`` (the store grew
    since) replaces it with a new one.
    """

    def __init__(self, connection: sqlite3.Connection) -> None:
        prepare_connection(connection)
        self.connection = connection
        self._terms: dict[str, tuple[str, ...]] = {}
        self._statistics: _Statistics | None = None

    def terms(self, words: Sequence[str]) -> list[tuple[str, ...]]:
        """The index terms (stemmed by FTS5 itself) of each word."""
        unknown = [word for word in words if word not in self._terms]
        if unknown:
            connection = self.connection
            connection.execute("DELETE FROM temp.query_words")
            connection.executemany(
                "INSERT INTO temp.query_words(rowid, word) VALUES (?, ?)", enumerate(unknown)
            )
            found: dict[int, list[str]] = {}
            for term, position in connection.execute(
                "SELECT term, doc FROM temp.query_words_terms ORDER BY doc, offset"
            ):
                found.setdefault(position, []).append(term)
            if len(self._terms) + len(unknown) > _CACHE_ENTRIES:
                self._terms.clear()
            for position, word in enumerate(unknown):
                self._terms[word] = tuple(found.get(position, ()))
        return [self._terms[word] for word in words]

    def statistics(self, terms: set[str]) -> tuple[int, dict[str, int]]:
        """``N`` (records in the index) and the documents containing each term (0 for terms
        not in the index), from one cached snapshot: no count exceeds ``N``."""
        now = monotonic()
        cached = self._statistics
        if (
            cached is None
            or now - cached.taken >= _FREQUENCY_TTL
            or len(cached.frequency) + len(terms) > _CACHE_ENTRIES
        ):
            cached = self._snapshot(terms, now)
        elif missing := sorted(terms - cached.frequency.keys()):
            counts = self._counts(missing)
            if max(counts.values(), default=0) > cached.documents:
                # Written since N was counted: N and these counts would disagree (n > N).
                cached = self._snapshot(terms, now)
            else:
                cached.keep(counts)
        return cached.documents, {term: cached.frequency.get(term, 0) for term in terms}

    def frequencies(self, terms: set[str]) -> dict[str, int]:
        """Documents containing each term (0 for terms not in the index)."""
        return self.statistics(terms)[1] if terms else {}

    def _counts(self, terms: Sequence[str]) -> dict[str, int]:
        """Documents containing each term, counted now."""
        marks = ", ".join("?" * len(terms))
        counts = dict.fromkeys(terms, 0)
        counts.update(
            self.connection.execute(
                f"SELECT term, doc FROM memory_fts_vocab WHERE term IN ({marks})", terms
            ).fetchall()
        )
        return counts

    def _snapshot(self, terms: set[str], now: float) -> _Statistics:
        """``N`` and the terms' counts read in one statement, so from one database snapshot
        (the records and their index entries are written in the same transaction)."""
        marks = ", ".join("?" * len(terms))
        rows = self.connection.execute(
            "SELECT NULL, count(*) FROM memories UNION ALL "
            f"SELECT term, doc FROM memory_fts_vocab WHERE term IN ({marks})",
            sorted(terms),
        ).fetchall()
        documents = next(int(count) for term, count in rows if term is None)
        statistics = _Statistics(documents, {}, now)
        statistics.keep({term: int(count) for term, count in rows if term is not None})
        self._statistics = statistics
        return statistics

    def ideal(self, words: Sequence[str]) -> float:
        """The sum of the words' IDFs (see ``search.keyword.calibrated``); a word whose terms
        are not in the index has the highest IDF there is."""
        terms_of = self.terms(words)
        total, frequency = self.statistics({term for terms in terms_of for term in terms})
        return sum(
            idf(total, min(frequency[term] for term in terms)) for terms in terms_of if terms
        )

    def postings(self, words: Sequence[str]) -> int:
        """Estimated postings an OR of ``words`` reads (from the cached frequencies)."""
        terms_of = self.terms(words)
        frequency = self.frequencies({term for terms in terms_of for term in terms})
        return sum(min(frequency[term] for term in terms) for terms in terms_of if terms)

    def plan(self, words: Sequence[str], budget: int) -> tuple[list[str], list[str]]:
        """Split ``words`` into those phase 1 ranks and the frequent ones left for phase 2."""
        terms_of = self.terms(words)
        frequency = self.frequencies({term for terms in terms_of for term in terms})
        sized = []
        for position, terms in enumerate(terms_of):
            counts = [frequency[term] for term in terms]
            if counts and min(counts) > 0:  # a word with an unindexed term cannot match
                sized.append((min(counts), position))
        sized.sort()
        kept: list[str] = []
        dropped: list[str] = []
        spent = 0
        for count, position in sized:
            if not kept or spent + count <= budget:
                kept.append(words[position])
                spent += count
            else:
                dropped.append(words[position])
        return kept, dropped


def keyword_search(
    planner: KeywordPlanner,
    words: Sequence[str],
    filter: MemoryFilter,
    limit: int,
    budget: int,
    now: datetime,
) -> list[tuple[tuple[Any, ...], float]]:
    """Ranked ``(row, score)`` pairs: rows in ``COLUMNS`` order, scores BM25 on the calibrated
    scale (``search.keyword.calibrated``), higher is better."""
    kept, dropped = planner.plan(words, budget)
    if not kept:
        return []
    connection = planner.connection
    where, params = where_clause(filter, now)
    # If even the rarest word has more postings than the budget, phase 1 ranks the newest part
    # of the index only (rowids grow with time), sized so it holds about `budget` postings.
    spent = planner.postings(kept)
    newest = 0
    if spent > budget:
        (top,) = connection.execute("SELECT coalesce(max(seq), 0) FROM memories").fetchone()
        newest = int(top * (1 - budget / spent))
    expression = match_expression(kept)
    if where == "1":
        # No filter: rank inside FTS5 and join only the top `limit` rows.
        ranked = _rank_then_join(connection, expression, newest, limit, "1", [], limit)
    else:
        # A filter usually keeps most matches (the default one only hides archived records),
        # so rank a few more than `limit` inside FTS5 and filter those. Only when the filter
        # leaves fewer than `limit` of a full window is the join-before-limit plan needed: it
        # is exact for any filter, but joins every match before ranking.
        window = limit * _FILTER_OVERFETCH + _FILTER_SLACK
        ranked = _rank_then_join(connection, expression, newest, window, where, params, limit)
        if len(ranked) < limit and _window_full(connection, expression, newest, window):
            ranked = connection.execute(
                f"SELECT {COLUMNS}, -bm25(memory_fts) FROM memory_fts "
                "JOIN memories m ON m.seq = memory_fts.rowid "
                f"WHERE memory_fts MATCH ? AND memory_fts.rowid > ? AND {where} "
                "ORDER BY bm25(memory_fts), m.id LIMIT ?",
                [expression, newest, *params, limit],
            ).fetchall()
    hits = [(row[:-1], float(row[-1])) for row in ranked]
    if len(hits) < limit and (dropped or newest):
        found = [row[0] for row, _ in hits]
        exclude = f"AND m.id NOT IN ({', '.join('?' * len(found))})" if found else ""
        filler = connection.execute(
            f"SELECT {COLUMNS}, -bm25(memory_fts) FROM memory_fts "
            "JOIN memories m ON m.seq = memory_fts.rowid "
            f"WHERE memory_fts MATCH ? AND {where} {exclude} "
            "ORDER BY memory_fts.rowid DESC LIMIT ?",
            [match_expression([*kept, *dropped]), *params, *found, limit - len(hits)],
        ).fetchall()
        filler.sort(key=lambda row: (-row[-1], row[0]))
        hits.extend((row[:-1], float(row[-1])) for row in filler)
    ideal = planner.ideal(words)
    return [(row, calibrated(score, ideal)) for row, score in hits]


def _rank_then_join(
    connection: sqlite3.Connection,
    expression: str,
    newest: int,
    window: int,
    where: str,
    params: Sequence[Any],
    limit: int,
) -> list[tuple[Any, ...]]:
    """The best ``window`` matches ranked inside FTS5, joined to their records, filtered by
    ``where``; the best ``limit`` of those, ``-bm25`` last in each row."""
    return connection.execute(
        f"SELECT {COLUMNS}, -f.score FROM (SELECT rowid, bm25(memory_fts) AS score "
        "FROM memory_fts WHERE memory_fts MATCH ? AND rowid > ? ORDER BY score LIMIT ?) f "
        f"JOIN memories m ON m.seq = f.rowid WHERE {where} ORDER BY f.score, m.id LIMIT ?",
        [expression, newest, window, *params, limit],
    ).fetchall()


def _window_full(connection: sqlite3.Connection, expression: str, newest: int, window: int) -> bool:
    """Whether at least ``window`` records match (so the filter, not the matches, ran out)."""
    (count,) = connection.execute(
        "SELECT count(*) FROM (SELECT 1 FROM memory_fts WHERE memory_fts MATCH ? AND rowid > ? "
        "LIMIT ?)",
        [expression, newest, window],
    ).fetchone()
    return bool(count >= window)
