"""The SQLite store's write transactions. Each runs on the writer thread inside one
``BEGIN IMMEDIATE`` transaction (see ``threads``): records, keyword index, history and vectors
change together or not at all."""

from __future__ import annotations

import sqlite3
from datetime import datetime
from typing import Any

from workers.memory.model.contracts import (
    HistoryEntry,
    MemoryDraft,
    MemoryItem,
    MemoryPatch,
    WriteMode,
)
from workers.memory.model.errors import key_taken
from workers.memory.model.merges import plan_merges
from workers.memory.model.patches import changes_text, plan_updates
from workers.memory.model.planning import (
    NEW_RECORD,
    WriteGuard,
    WriteRules,
    history_entry,
    history_of,
    plan_writes,
)
from workers.memory.model.review_plan import (
    ReviewGuard,
    contested_to_review,
    keys_to_review,
    plan_reviews,
    review_history,
)
from workers.memory.model.reviews import ReviewDecision
from workers.memory.retrieval.vectors import Vectors
from workers.memory.stores.rows import ROW_FIELDS, row_to_item
from workers.memory.stores.sqlite import logs
from workers.memory.stores.sqlite import vectors as sqlite_vectors
from workers.memory.stores.sqlite.sql import (
    COLUMNS,
    INSERT_COLUMNS,
    RETURNING_COLUMNS,
    fts_row,
    item_row,
    rows_for_ids,
)

__all__ = (
    "BY_ID",
    "BY_KEY",
    "delete_batch",
    "restore_batch",
    "review_batch",
    "update_batch",
    "write_batch",
)

BY_ID = f"SELECT {COLUMNS} FROM memories m WHERE m.id IN ({{marks}})"
BY_KEY = f"SELECT {COLUMNS} FROM memories m WHERE m.key IN ({{marks}}) AND m.namespace = ?"
_INSERT = f"INSERT INTO memories ({INSERT_COLUMNS}) VALUES ({', '.join('?' * len(ROW_FIELDS))})"
_INSERT_FTS = "INSERT INTO memory_fts(rowid, key, summary, body) VALUES (?, ?, ?, ?)"
# No RETURNING: it makes each UPDATE open a statement savepoint, and FTS5, once written in
# the transaction, flushes the index data it holds back at every savepoint.
_REPLACE = (
    "UPDATE memories SET content = ?, summary = ?, category = ?, tags = ?, metadata = ?, "
    "source = ?, updated_at = ?, version = ?, pinned = ?, archived_at = ?, owner = ?, "
    "visibility = ?, trust = ?, principal = ?, status = ?, valid_from = ?, valid_to = ?, "
    "expires_at = ?, supersedes = ?, contests = ?, sources = ? WHERE id = ?"
)
_SEQS = "SELECT id, seq FROM memories WHERE id IN ({marks})"
_DELETE_FTS = "DELETE FROM memory_fts WHERE rowid = ?"


def write_batch(
    connection: sqlite3.Connection,
    drafts: list[MemoryDraft],
    mode: WriteMode,
    now: datetime,
    vectors: Vectors | None,
    guard: WriteGuard | None,
    rules: WriteRules | None = None,
) -> list[MemoryItem]:
    sqlite_vectors.require_vectors(connection, vectors, needed=True)
    by_namespace: dict[str, list[str]] = {}
    for draft in drafts:
        if draft.key is not None:
            by_namespace.setdefault(draft.namespace, []).append(draft.key)
    existing: dict[tuple[str, str], list[MemoryItem]] = {}
    for namespace, keys in by_namespace.items():
        for row in rows_for_ids(connection, BY_KEY, keys, [namespace]):
            item = row_to_item(row)
            existing.setdefault((item.namespace, item.key or ""), []).append(item)
    targets: dict[str, MemoryItem] = {}
    if rules is not None and rules.targets:
        rows = rows_for_ids(connection, BY_ID, rules.targets, [])
        targets = {item.id: item for item in map(row_to_item, rows)}
    steps = plan_writes(drafts, mode, existing, now, guard, rules, targets)
    merges = plan_merges(targets, rules, steps, now, guard) if rules is not None else []
    stored = {item.id: item for records in existing.values() for item in records}
    stored.update(targets)
    # Retired records first: each gives its key up before an insert takes it.
    _store_over(connection, [step.retired for step in steps if step.retired is not None], stored)
    inserts = [step.item for step in steps if step.action in NEW_RECORD]
    if inserts:
        connection.executemany(_INSERT, [item_row(item) for item in inserts])
        first_seq = connection.execute("SELECT last_insert_rowid()").fetchone()[0]
        # executemany in one transaction assigns consecutive rowids to a table that only
        # this writer inserts into, so the batch's seqs end at last_insert_rowid().
        start = first_seq - len(inserts) + 1
        connection.executemany(
            _INSERT_FTS,
            [(start + offset, *fts_row(item)) for offset, item in enumerate(inserts)],
        )
    over = [step.item for step in [*steps, *merges] if step.action in ("replace", "merge")]
    _store_over(connection, over, stored)
    logs.append_history(connection, history_of([*steps, *merges]))
    if vectors is not None:
        sqlite_vectors.store_vectors(connection, vectors, [step.item for step in steps])
    return [step.item for step in steps]


def update_batch(
    connection: sqlite3.Connection,
    patches: list[MemoryPatch],
    now: datetime,
    vectors: Vectors | None,
    guard: WriteGuard | None,
) -> list[MemoryItem]:
    needed = any(map(changes_text, patches))
    sqlite_vectors.require_vectors(connection, vectors, needed=needed)
    rows = rows_for_ids(connection, BY_ID, [patch.id for patch in patches])
    stored = {row[0]: row_to_item(row) for row in rows}
    steps = plan_updates(patches, stored, now, guard)
    _store_over(connection, [step.item for step in steps], stored)
    logs.append_history(connection, [step.entry for step in steps])
    updated = [step.item for step in steps]
    if vectors is not None:
        sqlite_vectors.store_vectors(connection, vectors, updated)
    return updated


def delete_batch(
    connection: sqlite3.Connection,
    ids: list[str],
    now: datetime,
    guard: WriteGuard | None,
) -> list[str]:
    if guard is not None:  # every check before any change: all or nothing
        rows = rows_for_ids(connection, BY_ID, ids)
        allowed = {row[0] for row in rows if guard.check_delete(row_to_item(row))}
        ids = [item_id for item_id in ids if item_id in allowed]
    deleted: list[str] = []
    entries: list[HistoryEntry] = []
    for item_id in ids:
        row = connection.execute(
            f"DELETE FROM memories WHERE id = ? RETURNING seq, {RETURNING_COLUMNS}",
            (item_id,),
        ).fetchone()
        if row is not None:
            connection.execute("DELETE FROM memory_fts WHERE rowid = ?", (row[0],))
            entries.append(history_entry(row_to_item(row[1:]), "delete", now))
            deleted.append(item_id)
    logs.append_history(connection, entries)
    sqlite_vectors.forget_vectors(connection, deleted)
    return deleted


def review_batch(
    connection: sqlite3.Connection,
    decisions: list[ReviewDecision],
    reviewer: str | None,
    now: datetime,
    guard: ReviewGuard | None,
) -> list[MemoryItem]:
    """REVIEW, as :func:`~workers.memory.model.review_plan.plan_reviews` decides: holders
    retired first (each gives its key up: the partial unique index never sees two active
    records of one key), then records accepted over their rows or rejected (deleted)."""
    rows = rows_for_ids(connection, BY_ID, [decision.id for decision in decisions])
    stored = {row[0]: row_to_item(row) for row in rows}
    holders: dict[tuple[str, str], MemoryItem] = {}
    for namespace, key in keys_to_review(decisions, stored):
        for row in rows_for_ids(connection, BY_KEY, [key], [namespace]):
            item = row_to_item(row)
            if item.status == "active":
                holders[(namespace, key)] = item
    contested = {
        row[0]: row_to_item(row)
        for row in rows_for_ids(connection, BY_ID, contested_to_review(decisions, stored))
    }
    steps = plan_reviews(decisions, stored, holders, now, reviewer, guard, contested)
    current = {**stored, **contested, **{holder.id: holder for holder in holders.values()}}
    _store_over(connection, [step.retired for step in steps if step.retired is not None], current)
    accepted = [step.item for step in steps if step.decision == "accept"]
    _store_over(connection, accepted, current)
    rejected: list[str] = []
    for step in steps:
        if step.decision == "accept":
            continue
        (seq,) = connection.execute(
            "DELETE FROM memories WHERE id = ? RETURNING seq", (step.item.id,)
        ).fetchone()
        connection.execute("DELETE FROM memory_fts WHERE rowid = ?", (seq,))
        rejected.append(step.item.id)
    logs.append_history(connection, review_history(steps))
    sqlite_vectors.forget_vectors(connection, rejected)
    return [step.item for step in steps]


def _store_over(
    connection: sqlite3.Connection, items: list[MemoryItem], stored: dict[str, MemoryItem]
) -> None:
    """Overwrite stored records' fields (same ids), in order, and rewrite the keyword index
    entry of each whose indexed text changed. ``stored`` holds the records as this transaction
    has them (their index entries match it): a retired, merged or reviewed record keeps its
    text, so it costs one UPDATE and no index work. ``stored`` is brought up to date."""
    if not items:
        return
    connection.executemany(_REPLACE, [_replace_values(item) for item in items])
    latest = {item.id: item for item in items}  # the last change of a record is what stays
    changed = [
        item
        for item in latest.values()
        if (before := stored.get(item.id)) is None or not _same_text(before, item)
    ]
    stored.update(latest)
    if not changed:
        return
    seqs = dict(rows_for_ids(connection, _SEQS, [item.id for item in changed]))
    connection.executemany(_DELETE_FTS, [(seqs[item.id],) for item in changed])
    connection.executemany(_INSERT_FTS, [(seqs[item.id], *fts_row(item)) for item in changed])


def _replace_values(item: MemoryItem) -> tuple[Any, ...]:
    """Parameters of ``_REPLACE``: every column but ``id``, ``namespace``, ``key``,
    ``created_at`` and the usage counters (which a record keeps), then the id."""
    row = item_row(item)
    return (*row[3:9], row[10], row[11], *row[14:], item.id)


def _same_text(before: MemoryItem, after: MemoryItem) -> bool:
    """Whether the keyword index entry of ``before`` is also that of ``after``."""
    if before.content is after.content:  # a retired or merged record: the same object
        return before.key == after.key and before.summary == after.summary
    return fts_row(before) == fts_row(after)


def restore_batch(connection: sqlite3.Connection, items: list[MemoryItem]) -> int:
    for item in items:
        row = connection.execute("SELECT seq FROM memories WHERE id = ?", (item.id,)).fetchone()
        if row is not None:  # replaced in place: drop the old row and its index entry
            connection.execute("DELETE FROM memories WHERE seq = ?", (row[0],))
            connection.execute("DELETE FROM memory_fts WHERE rowid = ?", (row[0],))
        try:
            connection.execute(_INSERT, item_row(item))
        except sqlite3.IntegrityError as exc:
            raise key_taken(item.namespace, item.key) from exc
        (seq,) = connection.execute("SELECT last_insert_rowid()").fetchone()
        connection.execute(_INSERT_FTS, (seq, *fts_row(item)))
    sqlite_vectors.forget_vectors(connection, [], keep=items)  # a changed text needs a new vector
    return len(items)
