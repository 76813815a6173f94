"""Keyword search for the SQLite store: the exact BM25 top-k over every FTS5 match, OR semantics.

Stop words are dropped (``retrieval.text.query_words``); each remaining word is tokenized by
FTS5 itself (a per-connection TEMP FTS5 table with the index's tokenizer) into the term the
index holds. ``topk`` then finds the exact top-k with MaxScore pruning, applying the filter to
candidates before the limit. Scores are FTS5's ``-bm25()`` on the calibrated scale
(``retrieval.keyword.calibrated``), as the PostgreSQL store reports them.

FTS5's own ``ORDER BY bm25()`` over every match ranks the rest, exactly too: queries where
pruning would score half of the postings anyway (``topk.PAYS``; ``topk.top_k`` says when), and
queries with a word FTS5 splits into several terms (unicode61 and the query splitter disagree on
a few characters), a phrase whose frequency only FTS5 counts.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from workers.memory.model.contracts import MemoryFilter
from workers.memory.retrieval.keyword import calibrated
from workers.memory.stores.sqlite.bm25 import read_statistics
from workers.memory.stores.sqlite.recount import prepare_recount
from workers.memory.stores.sqlite.sql import COLUMNS, match_expression, where_clause
from workers.memory.stores.sqlite.topk import top_k

__all__ = ("KeywordPlanner", "keyword_search", "prepare_connection")

_CACHE_ENTRIES = 50_000


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


class KeywordPlanner:
    """Keyword searches on one connection (so one thread), with its query words' terms cached:
    tokenizing a word never changes. Statistics are never cached: exact BM25 needs the ones
    of the search's own snapshot (``bm25.read_statistics``)."""

    def __init__(self, connection: sqlite3.Connection) -> None:
        prepare_connection(connection)
        prepare_recount(connection)
        self.connection = connection
        self._terms: dict[str, tuple[str, ...]] = {}

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


def keyword_search(
    planner: KeywordPlanner,
    words: Sequence[str],
    filter: MemoryFilter,
    limit: int,
    now: datetime,
) -> list[tuple[tuple[Any, ...], float]]:
    """The exact BM25 top ``limit`` of the records ``filter`` keeps at ``now`` that hold any of
    ``words``: ``(row, score)`` pairs best first, ties by id, rows in ``COLUMNS`` order,
    scores on the calibrated scale (``retrieval.keyword.calibrated``)."""
    terms_of = planner.terms(words)
    connection = planner.connection
    where, params = where_clause(filter, now)
    # One read transaction: statistics, postings and rows from one snapshot, as FTS5's bm25()
    # sees them within one statement; a concurrent write commits beside it (WAL).
    owned = not connection.in_transaction
    if owned:
        connection.execute("BEGIN")
    try:
        everything = sorted({term for terms in terms_of for term in terms})
        statistics = read_statistics(connection, everything) if everything else None
        if statistics is None:
            return []
        # The ideal record holds each word once (see calibrated); a phrase's IDF is estimated
        # by its rarest term.
        ideal = sum(
            statistics.idf(min(terms, key=lambda term: statistics.frequency[term]))
            for terms in terms_of
            if terms
        )
        if all(len(terms) <= 1 for terms in terms_of):
            matched = [
                (word, terms[0]) for word, terms in zip(words, terms_of, strict=True) if terms
            ]

            def keep(docs: list[int]) -> list[int]:
                if where == "1":
                    return docs
                return [
                    seq
                    for (seq,) in connection.execute(
                        "SELECT m.seq FROM json_each(?) j CROSS JOIN memories m "
                        f"ON m.seq = j.value WHERE {where}",
                        [json.dumps(docs), *params],
                    )
                ]

            best = top_k(
                connection,
                [word for word, _ in matched],
                [term for _, term in matched],
                statistics,
                limit,
                keep,
            )
            if best is not None:
                found = {
                    row[-1]: row[:-1]
                    for row in connection.execute(
                        f"SELECT {COLUMNS}, m.seq FROM json_each(?) j "
                        "CROSS JOIN memories m ON m.seq = j.value",
                        (json.dumps([doc for doc, _ in best]),),
                    )
                }
                hits = [(found[doc], score) for doc, score in best if doc in found]
                hits.sort(key=lambda hit: (-hit[1], hit[0][0]))
                del hits[limit:]
                return [(row, calibrated(score, ideal)) for row, score in hits]
        # A word the tokenizer makes nothing of matches nothing: it is left out of the MATCH.
        indexed = [word for word, terms in zip(words, terms_of, strict=True) if terms]
        hits = _ranked_by_fts5(connection, match_expression(indexed), where, params, limit)
    finally:
        # A read ends with COMMIT; an I/O error may already have rolled it back.
        if owned and connection.in_transaction:
            connection.execute("COMMIT")
    return [(row, calibrated(score, ideal)) for row, score in hits]


_FILTER_OVERFETCH = 4
_FILTER_SLACK = 20


def _ranked_by_fts5(
    connection: sqlite3.Connection,
    expression: str,
    where: str,
    params: Sequence[Any],
    limit: int,
) -> list[tuple[tuple[Any, ...], float]]:
    """FTS5's own exact ranking of every match, ``-bm25()`` scores.

    A filter usually keeps most matches (the default one hides only inactive and expired
    records), so FTS5 ranks ``4 × limit + 20`` and only those are joined and filtered; when
    fewer than ``limit`` of a full window pass, the filter is joined before ranking instead
    (exact for any filter, but it joins every match)."""
    window = limit * _FILTER_OVERFETCH + _FILTER_SLACK
    ranked = connection.execute(
        f"SELECT {COLUMNS}, -f.score FROM (SELECT rowid, bm25(memory_fts) AS score "
        "FROM memory_fts WHERE memory_fts MATCH ? ORDER BY score LIMIT ?) f "
        f"JOIN memories m ON m.seq = f.rowid WHERE {where} ORDER BY f.score, m.id LIMIT ?",
        [expression, window, *params, limit],
    ).fetchall()
    if len(ranked) < limit:
        (matches,) = connection.execute(
            "SELECT count(*) FROM (SELECT 1 FROM memory_fts WHERE memory_fts MATCH ? LIMIT ?)",
            [expression, window],
        ).fetchone()
        if matches >= window:
            ranked = connection.execute(
                f"SELECT {COLUMNS}, -bm25(memory_fts) FROM memory_fts "
                "JOIN memories m ON m.seq = memory_fts.rowid "
                f"WHERE memory_fts MATCH ? AND {where} ORDER BY bm25(memory_fts), m.id LIMIT ?",
                [expression, *params, limit],
            ).fetchall()
    return [(row[:-1], float(row[-1])) for row in ranked]
