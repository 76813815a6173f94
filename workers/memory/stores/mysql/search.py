"""Keyword search for the MySQL store: InnoDB FULLTEXT finds the candidates, Okapi BM25 scores
them on the calibrated scale every keyword search shares (``search.keyword.calibrated``).

InnoDB's own ranking is not BM25 (and differs between MySQL and MariaDB), so the index only
answers "which records hold any of these terms" and "how many records hold this term". The
terms are the in-process store's (``retrieval.text``: folded words, a light stem), each stored
as one opaque FULLTEXT word (``sql.term_token``), so InnoDB's tokenizer, stop words and
minimum word length never change what matches; scores therefore equal the in-process store's
on the same records:

* ``N`` is every record in the table, ``n`` a term's FULLTEXT count, IDF
  ``log((N - n + 0.5) / (n + 0.5))`` floored just above 0 (``search.keyword.idf``);
* a record's length is its number of words (stored at write time), a term's frequency its
  occurrences in the record (counted from the stored words);
* the score is ``1 - exp(-bm25 / ideal)``, ``ideal`` the summed IDF of every query term;
* ``N``, the total length and the counts are cached briefly (``search_stats``).

**The plan** bounds the rows one search reads, as on PostgreSQL: the query's terms that match
something are taken rarest first while their summed counts stay within the budget (the rarest
always); phase 1 scores every record holding a kept term — or, when even the rarest holds more
than the budget, its ``budget`` newest holders. If phase 1 left something out and found fewer
than ``limit``, phase 2 fills with the newest records holding any term, ranked after phase 1.
Every record is scored against every query term: the plan chooses which records are scored,
never how, so below the budget the ranking is exact BM25.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from workers.memory.model.contracts import MemoryFilter
from workers.memory.retrieval.keyword import calibrated, idf
from workers.memory.retrieval.text import light_stem
from workers.memory.stores.mysql.search_stats import MATCH, SearchStatistics
from workers.memory.stores.mysql.sql import (
    Params,
    columns,
    marks,
    records,
    term_token,
    where_clause,
)
from workers.memory.stores.sql_driver import SqlDriver, fetch

__all__ = ("DEFAULT_BUDGET", "keyword_search")

DEFAULT_BUDGET = 1_500
"""Records phase 1 may score (as on PostgreSQL): bounds the rows one search reads."""

_K1 = 1.2
_B = 0.75


async def keyword_search(
    db: SqlDriver,
    statistics: SearchStatistics,
    words: Sequence[str],
    filter: MemoryFilter,
    limit: int,
    now: datetime,
    budget: int = DEFAULT_BUDGET,
) -> list[tuple[Any, float]]:
    """Ranked ``(row, score)`` pairs: rows in ``columns()`` order, scores BM25 on the
    calibrated scale, best first, ties by id (phase 2's fillers after phase 1's hits)."""
    tokens = sorted({term_token(light_stem(word)) for word in words})
    if not tokens:
        return []
    documents, total_length, frequency = await statistics.read(db, tokens)
    scorer = _Scorer(
        {token: idf(documents, count) for token, count in frequency.items()},
        total_length / max(documents, 1) or 1.0,
    )
    matched = sorted((count, token) for token, count in frequency.items() if count)
    if not matched:
        return []
    kept: list[str] = []
    spent = 0
    for count, token in matched:  # rarest first, within the budget (the rarest always)
        if not kept or spent + count <= budget:
            kept.append(token)
            spent += count
    newest = (
        f" ORDER BY m.`created_at` DESC, m.`id` DESC LIMIT {budget:d}" if spent > budget else ""
    )
    hits = scorer.ranked(await _candidates(db, kept, filter, now, [], newest))[:limit]
    if len(hits) < limit and (newest or len(kept) < len(matched)):
        found = [row[0] for row, _ in hits]
        wanted = f" ORDER BY m.`created_at` DESC, m.`id` DESC LIMIT {limit - len(hits):d}"
        every = [token for _, token in matched]
        hits += scorer.ranked(await _candidates(db, every, filter, now, found, wanted))
    return hits


async def _candidates(
    db: SqlDriver,
    tokens: Sequence[str],
    filter: MemoryFilter,
    now: datetime,
    excluded: Sequence[str],
    tail: str,
) -> list[tuple[Any, ...]]:
    """Records holding any of ``tokens`` that ``filter`` keeps, but ``excluded``, with their
    stored terms and length last."""
    params = Params([" ".join(tokens)])  # bare words: OR semantics
    where = where_clause(filter, params, now)
    if excluded:
        where += f" AND m.`id` NOT IN ({marks(len(excluded))})"
        params.values.extend(excluded)
    return await fetch(
        db,
        f"SELECT {columns()}, m.`search_terms`, m.`search_length` FROM {records()} "
        f"WHERE {MATCH} AND {where}{tail}",
        params.values,
    )


class _Scorer:
    """BM25 of rows for the query's terms (``weights``: each term's IDF), calibrated."""

    def __init__(self, weights: dict[str, float], average: float) -> None:
        self.weights = weights
        self.average = average
        self.ideal = math.fsum(weights.values())

    def ranked(self, rows: Sequence[tuple[Any, ...]]) -> list[tuple[Any, float]]:
        scored = []
        for row in rows:
            found = Counter(row[-2].split())
            norm = _K1 * (1 - _B + _B * int(row[-1]) / self.average)
            bm25 = 0.0
            for token in self.weights.keys() & found.keys():
                tf = found[token]
                bm25 += self.weights[token] * tf * (_K1 + 1) / (tf + norm)
            scored.append((row, calibrated(bm25, self.ideal)))
        scored.sort(key=lambda pair: (-pair[1], pair[0][0]))
        return scored
