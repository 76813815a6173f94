"""Exact Okapi BM25 over a PostgreSQL store's whole table, computed in Python from what
PostgreSQL's own analysis makes of each record, independently of the store's statistics
tables and its pruning: the reference the store's keyword search must equal."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

import asyncpg

from tests.services import PostgresSpace
from workers.memory.retrieval.keyword import bm25
from workers.memory.retrieval.text import query_words, words

__all__ = ("STOP_WORDS", "exact_scores", "query_terms", "ranked", "table_terms")

STOP_WORDS = " stop words"
"""The key a record's stop-word positions are counted under (no lexeme has a space): a
record's length (``Counter.total()``) counts its stop words, as FTS5 counts them."""


async def table_terms(space: PostgresSpace) -> dict[str, Counter[str]]:
    """Every record's lexemes with their number of positions (``unnest(tsv)``), and its
    stop words under ``STOP_WORDS`` (its words, as the shared tokenizer counts them in its
    indexed text, less its lexemes' positions)."""
    connection = await asyncpg.connect(space.url)
    try:
        rows = await connection.fetch(
            "SELECT m.id, u.lexeme, cardinality(u.positions), m.search_text "
            f'FROM "{space.schema}".memories m LEFT JOIN LATERAL unnest(m.tsv) u ON TRUE'
        )
    finally:
        await connection.close()
    documents: dict[str, Counter[str]] = {}
    length: dict[str, int] = {}
    for id, lexeme, count, text in rows:
        documents.setdefault(id, Counter())
        length[id] = len(words(text))
        if lexeme is not None:
            documents[id][lexeme] = count
    for id, counts in documents.items():
        if length[id] > counts.total():
            counts[STOP_WORDS] = length[id] - counts.total()
    return documents


async def query_terms(space: PostgresSpace, query: str) -> set[str]:
    """The lexemes PostgreSQL derives from the query's words."""
    connection = await asyncpg.connect(space.url)
    try:
        rows = await connection.fetch(
            "SELECT DISTINCT l FROM unnest($1::text[]) w, "
            "unnest(tsvector_to_array(to_tsvector('english', w))) l",
            query_words(query),
        )
    finally:
        await connection.close()
    return {row[0] for row in rows}


async def exact_scores(space: PostgresSpace, query: str) -> dict[str, float]:
    """Every record's calibrated BM25 for ``query`` over the whole table (0: no match)."""
    documents = await table_terms(space)
    terms = await query_terms(space, query)
    everything = list(documents)
    scores = bm25(terms, [documents[id] for id in everything], documents.values())
    return dict(zip(everything, scores, strict=True))


def ranked(exact: dict[str, float], among: Sequence[str] | None = None) -> list[str]:
    """The matching records (of ``among``, default all) best first, ties by id."""
    ids = exact if among is None else among
    return sorted((id for id in ids if exact[id] > 0), key=lambda id: (-exact[id], id))
