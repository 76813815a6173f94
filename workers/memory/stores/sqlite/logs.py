"""The SQLite store's two logs: record history and the audit trail. Writers run inside the
caller's transaction (on the writer thread); readers on a reader's connection."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import Any

import msgspec

from workers.memory.model.contracts import AuditEntry, HistoryEntry, MemoryItem
from workers.memory.model.records import from_micros, to_micros
from workers.memory.ports import AuditEvent
from workers.memory.stores.rows import AUDIT_COLUMNS, audit_entry, audit_values

__all__ = (
    "append_audit",
    "append_history",
    "audit_rows",
    "history_of",
    "history_page",
    "purge_audit",
    "read_audit",
    "restore_history",
)

_encode = msgspec.json.Encoder()
_decode_item = msgspec.json.Decoder(MemoryItem).decode


def append_history(connection: sqlite3.Connection, entries: Sequence[HistoryEntry]) -> None:
    """Append history entries inside the caller's transaction."""
    if entries:
        connection.executemany(
            "INSERT INTO memory_history (id, version, change, at, record, reviewer) "
            "VALUES (?, ?, ?, ?, ?, ?)",
            [
                (
                    e.id,
                    e.version,
                    e.change,
                    to_micros(e.at),
                    _encode.encode(e.record).decode(),
                    e.reviewer,
                )
                for e in entries
            ],
        )


def history_of(connection: sqlite3.Connection, item_id: str) -> list[HistoryEntry]:
    rows = connection.execute(
        "SELECT record, change, at, reviewer FROM memory_history WHERE id = ? ORDER BY seq",
        (item_id,),
    )
    return [_entry(*row) for row in rows]


def _entry(record: str, change: Any, at: int, reviewer: str | None) -> HistoryEntry:
    item = _decode_item(record)
    return HistoryEntry(item.id, item.version, change, from_micros(at), item, reviewer)


def history_page(
    connection: sqlite3.Connection, after: int, limit: int, namespace: str | None, key: str | None
) -> tuple[list[HistoryEntry], int]:
    """Entries after ``seq`` ``after`` in append order, and the last ``seq`` read. No index
    serves the namespace or key: this is an administrative read (export, ``memory history``)
    that scans the log once per page, never a node's path."""
    sql = "SELECT seq, record, change, at, reviewer FROM memory_history WHERE seq > ?"
    params: list[Any] = [after]
    if namespace is not None:
        sql += " AND json_extract(record, '$.namespace') = ?"
        params.append(namespace)
    if key is not None:
        held = "json_extract(record, '$.key') = ?"
        params.append(key)
        if namespace is not None:
            held += " AND json_extract(record, '$.namespace') = ?"
            params.append(namespace)
        sql += f" AND id IN (SELECT id FROM memory_history WHERE {held})"
    entries = []
    for seq, *row in connection.execute(sql + " ORDER BY seq LIMIT ?", [*params, limit]):
        entries.append(_entry(*row))
        after = seq
    return entries, after


def restore_history(connection: sqlite3.Connection, entries: list[HistoryEntry]) -> int:
    """Append the entries not already held (same id, version and change); how many were."""
    added = 0
    for entry in entries:
        present = connection.execute(
            "SELECT 1 FROM memory_history WHERE id = ? AND version = ? AND change = ?",
            (entry.id, entry.version, entry.change),
        ).fetchone()
        if present is None:
            append_history(connection, [entry])
            added += 1
    return added


def audit_rows(events: Sequence[AuditEvent]) -> list[tuple[Any, ...]]:
    """Rows for :func:`append_audit` (built on the caller's thread: events are plain data)."""
    return [audit_values(event) for event in events]


_AUDIT_COLUMNS = ", ".join(AUDIT_COLUMNS)


def append_audit(connection: sqlite3.Connection, rows: list[tuple[Any, ...]]) -> None:
    marks = ", ".join("?" * len(AUDIT_COLUMNS))
    connection.executemany(f"INSERT INTO memory_audit ({_AUDIT_COLUMNS}) VALUES ({marks})", rows)


def read_audit(
    connection: sqlite3.Connection, after: int, limit: int, principal: str | None
) -> list[AuditEntry]:
    sql = f"SELECT seq, {_AUDIT_COLUMNS} FROM memory_audit WHERE seq > ?"
    params: list[Any] = [after]
    if principal is not None:
        sql += " AND principal = ?"
        params.append(principal)
    rows = connection.execute(sql + " ORDER BY seq LIMIT ?", [*params, limit])
    return [audit_entry(row) for row in rows]


def purge_audit(connection: sqlite3.Connection, before: int, dry_run: bool) -> int:
    if dry_run:
        (count,) = connection.execute(
            "SELECT count(*) FROM memory_audit WHERE at < ?", (before,)
        ).fetchone()
        return int(count)
    return connection.execute("DELETE FROM memory_audit WHERE at < ?", (before,)).rowcount
