"""Exact Okapi BM25 over a PostgreSQL store's whole table, computed in Python from what
PostgreSQL's own analysis makes of each record and from each record's words, independently of
the store's statistics tables, its length column and its pruning: the reference the store's
keyword search must equal."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import asyncpg

from tests.services import PostgresSpace
from workers.memory.retrieval.keyword import calibrated, idf
from workers.memory.retrieval.text import query_words, words

__all__ = ("Table", "exact_scores", "query_terms", "ranked", "read_table")


@dataclass(frozen=True)
class Table:
    """Every record's lexemes with their number of positions (``unnest(tsv)``) and its
    length: its words as the shared tokenizer counts them, stop words included."""

    terms: dict[str, Counter[str]]
    lengths: dict[str, int]


async def read_table(space: PostgresSpace) -> Table:
    connection = await asyncpg.connect(space.url)
    try:
        rows = await connection.fetch(
            "SELECT m.id, u.lexeme, cardinality(u.positions), m.search_text "
            f'FROM "{space.schema}".memories m LEFT JOIN LATERAL unnest(m.tsv) u ON TRUE'
        )
    finally:
        await connection.close()
    table = Table({}, {})
    for id, lexeme, count, text in rows:
        table.terms.setdefault(id, Counter())
        table.lengths[id] = len(words(text))
        if lexeme is not None:
            table.terms[id][lexeme] = count
    return table


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
    """Every record's calibrated BM25 (k1 1.2, b 0.75) for ``query`` over the whole table (0:
    no match)."""
    table = await read_table(space)
    terms = await query_terms(space, query)
    total = len(table.terms)
    average = sum(table.lengths.values()) / total if total else 1.0
    weights = {
        term: idf(total, sum(1 for counts in table.terms.values() if term in counts))
        for term in terms
    }
    scores = {}
    for id, counts in table.terms.items():
        norm = 1.2 * (1 - 0.75 + 0.75 * table.lengths[id] / (average or 1.0))
        score = math.fsum(
            weights[term] * counts[term] * 2.2 / (counts[term] + norm)
            for term in terms
            if term in counts
        )
        scores[id] = calibrated(score, math.fsum(weights.values()))
    return scores


def ranked(exact: dict[str, float], among: Sequence[str] | None = None) -> list[str]:
    """The matching records (of ``among``, default all) best first, ties by id."""
    ids = exact if among is None else among
    return sorted((id for id in ids if exact[id] > 0), key=lambda id: (-exact[id], id))
