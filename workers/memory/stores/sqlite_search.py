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
4. Phase 1 ranks the matches of the kept words by BM25, filter applied before the limit.
5. If phase 1 found fewer than ``limit`` records and words were left out, phase 2 fills the
   rest with the newest records matching those words (their postings are read newest first, so
   this costs ``limit`` rows, not the whole doclist), scored by BM25 and ranked after phase 1.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import Any

from workers.memory.contracts import MemoryFilter
from workers.memory.stores.sqlite_sql import COLUMNS, match_expression, where_clause

__all__ = ("DEFAULT_BUDGET", "keyword_search", "prepare_connection")

DEFAULT_BUDGET = 20_000
"""Postings phase 1 may score; bounds the cost of one search."""


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


def plan_words(
    connection: sqlite3.Connection, words: Sequence[str], budget: int
) -> tuple[list[str], list[str]]:
    """Split ``words`` into those phase 1 ranks and the frequent ones left for phase 2."""
    connection.execute("DELETE FROM temp.query_words")
    connection.executemany(
        "INSERT INTO temp.query_words(rowid, word) VALUES (?, ?)", enumerate(words)
    )
    terms_of: dict[int, list[str]] = {}
    for term, position in connection.execute("SELECT term, doc FROM temp.query_words_terms"):
        terms_of.setdefault(position, []).append(term)
    all_terms = sorted({term for terms in terms_of.values() for term in terms})
    if not all_terms:
        return [], []
    marks = ", ".join("?" * len(all_terms))
    frequency = dict(
        connection.execute(
            f"SELECT term, doc FROM memory_fts_vocab WHERE term IN ({marks})", all_terms
        ).fetchall()
    )
    sized = []
    for position, terms in terms_of.items():
        counts = [frequency.get(term, 0) for term in terms]
        if min(counts) > 0:  # a word with an unindexed term cannot match
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
    connection: sqlite3.Connection,
    words: Sequence[str],
    filter: MemoryFilter,
    limit: int,
    budget: int,
) -> list[tuple[tuple[Any, ...], float]]:
    """Ranked ``(row, score)`` pairs (rows in ``COLUMNS`` order; higher score is better)."""
    kept, dropped = plan_words(connection, words, budget)
    if not kept:
        return []
    where, params = where_clause(filter)
    ranked = connection.execute(
        f"SELECT {COLUMNS}, -bm25(memory_fts) AS score FROM memory_fts "
        "JOIN memories m ON m.seq = memory_fts.rowid "
        f"WHERE memory_fts MATCH ? AND {where} ORDER BY bm25(memory_fts), m.id LIMIT ?",
        [match_expression(kept), *params, limit],
    ).fetchall()
    hits = [(row[:-1], float(row[-1])) for row in ranked]
    if len(hits) < limit and dropped:
        found = [row[0] for row, _ in hits]
        exclude = f"AND m.id NOT IN ({', '.join('?' * len(found))})" if found else ""
        filler = connection.execute(
            f"SELECT {COLUMNS}, -bm25(memory_fts) AS score FROM memory_fts "
            "JOIN memories m ON m.seq = memory_fts.rowid "
            f"WHERE memory_fts MATCH ? AND {where} {exclude} "
            "ORDER BY memory_fts.rowid DESC LIMIT ?",
            [match_expression(dropped), *params, *found, limit - len(hits)],
        ).fetchall()
        filler.sort(key=lambda row: (-row[-1], row[0]))
        hits.extend((row[:-1], float(row[-1])) for row in filler)
    return hits
