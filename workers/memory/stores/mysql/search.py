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
* the score is ``1 - exp(-bm25 / ideal)``, ``ideal`` the summed IDF of every query term.

Every candidate is scored (exact top-k); a query holding a very frequent word reads many
records (the PostgreSQL store's budgeted plan is not ported: see the README's table).
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
from workers.memory.stores.mysql.sql import Params, columns, records, term_token, where_clause
from workers.memory.stores.sql_driver import SqlDriver, fetch

__all__ = ("keyword_search",)

_K1 = 1.2
_B = 0.75
_MATCH = "MATCH(m.`search_terms`) AGAINST (? IN BOOLEAN MODE)"


async def keyword_search(
    db: SqlDriver,
    words: Sequence[str],
    filter: MemoryFilter,
    limit: int,
    now: datetime,
) -> list[tuple[Any, float]]:
    """Ranked ``(row, score)`` pairs: rows in ``columns()`` order, scores BM25 on the
    calibrated scale, best first, ties by id."""
    tokens = {term_token(light_stem(word)) for word in words}
    if not tokens:
        return []
    params = Params([" ".join(sorted(tokens))])  # bare words: OR semantics
    where = where_clause(filter, params, now)
    rows = await fetch(
        db,
        f"SELECT {columns()}, m.`search_terms`, m.`search_length` FROM {records()} "
        f"WHERE {_MATCH} AND {where}",
        params.values,
    )
    if not rows:
        return []
    ordered = sorted(tokens)
    # One round trip for N, the total length and every term's count, all through the index.
    counts = " UNION ALL ".join(
        f"SELECT {n + 1}, COUNT(*), 0 FROM memories m WHERE {_MATCH}" for n in range(len(ordered))
    )
    stats = await fetch(
        db,
        "SELECT 0, COUNT(*), COALESCE(SUM(`search_length`), 0) FROM memories UNION ALL " + counts,
        ordered,
    )
    by_position = {int(position): (int(count), int(length)) for position, count, length in stats}
    documents, total_length = by_position[0]
    weights = {token: idf(documents, by_position[n + 1][0]) for n, token in enumerate(ordered)}
    ideal = math.fsum(weights.values())
    average = total_length / max(documents, 1) or 1.0
    scored = []
    for row in rows:
        found = Counter(row[-2].split())
        norm = _K1 * (1 - _B + _B * int(row[-1]) / average)
        bm25 = 0.0
        for token in tokens & found.keys():
            tf = found[token]
            bm25 += weights[token] * tf * (_K1 + 1) / (tf + norm)
        scored.append((row, calibrated(bm25, ideal)))
    scored.sort(key=lambda pair: (-pair[1], pair[0][0]))
    return scored[:limit]
