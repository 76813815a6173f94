"""Term frequencies of chosen rows, counted again with the keyword index's own tokenizer.

Top-k (:mod:`.topk`) needs how often a frequent word occurs in a few hundred rows. Reading the
word's postings would cost its whole doclist; instead the rows' indexed text is copied into a
per-connection TEMP contentless FTS5 table with the same tokenizer, and its ``fts5vocab``
instance table lists their terms (about 6 µs a row).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence

__all__ = ("count_again", "prepare_recount")


def prepare_recount(connection: sqlite3.Connection) -> None:
    """Create the per-connection TEMP tables rows are re-tokenized with."""
    connection.execute(
        "CREATE VIRTUAL TABLE IF NOT EXISTS temp.candidate_text "
        "USING fts5(key, summary, body, content='', tokenize='porter unicode61')"
    )
    connection.execute(
        "CREATE VIRTUAL TABLE IF NOT EXISTS temp.candidate_terms "
        "USING fts5vocab(temp, candidate_text, 'instance')"
    )


def count_again(
    connection: sqlite3.Connection, docs: list[int], terms: Sequence[str]
) -> dict[int, dict[str, int]]:
    """Each of ``docs``' frequency of each of ``terms`` (absent: 0), by tokenizing their
    indexed text again with the index's tokenizer (:func:`prepare_recount` first)."""
    # A contentless table: 'delete-all' empties it at once.
    connection.execute("INSERT INTO temp.candidate_text(candidate_text) VALUES ('delete-all')")
    connection.execute(
        "INSERT INTO temp.candidate_text(rowid, key, summary, body) "
        "SELECT f.rowid, f.key, f.summary, f.body FROM json_each(?) j "
        "CROSS JOIN main.memory_fts f ON f.rowid = j.value",
        (json.dumps(docs),),
    )
    counts: dict[int, dict[str, int]] = {doc: {} for doc in docs}
    marks = ", ".join("?" * len(terms))
    for term, doc, tf in connection.execute(
        f"SELECT term, doc, count(*) FROM temp.candidate_terms WHERE term IN ({marks}) "
        "GROUP BY term, doc",
        list(terms),
    ):
        counts[doc][term] = tf
    return counts
