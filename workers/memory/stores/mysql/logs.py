"""The MySQL store's two logs: record history and the audit trail."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import msgspec

from workers.memory.model.contracts import AuditEntry, HistoryEntry, MemoryItem
from workers.memory.model.records import from_micros, to_micros
from workers.memory.ports import AuditEvent
from workers.memory.stores.mysql.sql import quoted
from workers.memory.stores.rows import AUDIT_COLUMNS, audit_entry, audit_values
from workers.memory.stores.sql_driver import SqlDriver, fetch, run

__all__ = (
    "append_audit",
    "append_history",
    "history_of",
    "history_page",
    "purge_audit",
    "read_audit",
    "restore_history",
)

_encode = msgspec.json.encode
_decode_item = msgspec.json.Decoder(MemoryItem).decode


async def append_history(db: SqlDriver, entries: Sequence[HistoryEntry]) -> None:
    """Append history entries inside the caller's transaction."""
    if entries:
        await run(
            db,
            "INSERT INTO memory_history (`id`, `version`, `change`, `at`, `record`, `reviewer`) "
            "VALUES " + ", ".join("(?, ?, ?, ?, ?, ?)" for _ in entries),
            [
                value
                for e in entries
                for value in (
                    e.id,
                    e.version,
                    e.change,
                    to_micros(e.at),
                    _encode(e.record).decode(),
                    e.reviewer,
                )
            ],
        )


def _entry(record: str, change: Any, at: int, reviewer: str | None) -> HistoryEntry:
    item = _decode_item(record)
    return HistoryEntry(item.id, item.version, change, from_micros(at), item, reviewer)


def _equals(column: str, field: str) -> str:
    # Bytes on both sides: a function's result compares in the connection's collation,
    # which may fold case.
    return f"CAST(JSON_VALUE({column}, '$.{field}') AS BINARY) = CAST(? AS BINARY)"


async def history_of(db: SqlDriver, item_id: str) -> list[HistoryEntry]:
    rows = await fetch(
        db,
        "SELECT `record`, `change`, `at`, `reviewer` FROM memory_history WHERE `id` = ? "
        "ORDER BY `seq`",
        (item_id,),
    )
    return [_entry(*row) for row in rows]


async def history_page(
    db: SqlDriver, after: int, limit: int, namespace: str | None, key: str | None
) -> tuple[list[HistoryEntry], int]:
    """Entries after ``seq`` ``after`` in append order, and the last ``seq`` read. No index
    serves the namespace or key: this is an administrative read (export, ``memory history``)
    that scans the log once per page, never a node's path."""
    conditions = ["`seq` > ?"]
    params: list[object] = [after]
    if namespace is not None:
        conditions.append(_equals("`record`", "namespace"))
        params.append(namespace)
    if key is not None:
        inner = _equals("h.`record`", "key")
        params.append(key)
        if namespace is not None:
            inner += " AND " + _equals("h.`record`", "namespace")
            params.append(namespace)
        # A derived table: MySQL refuses a subquery on the table the outer query reads.
        conditions.append(
            f"`id` IN (SELECT k.`id` FROM (SELECT DISTINCT h.`id` FROM memory_history h "
            f"WHERE {inner}) k)"
        )
    params.append(limit)
    rows = await fetch(
        db,
        "SELECT `seq`, `record`, `change`, `at`, `reviewer` FROM memory_history WHERE "
        + " AND ".join(conditions)
        + " ORDER BY `seq` LIMIT ?",
        params,
    )
    entries = []
    for seq, *row in rows:
        entries.append(_entry(*row))
        after = int(seq)
    return entries, after


async def restore_history(db: SqlDriver, entries: Sequence[HistoryEntry]) -> int:
    """Append the entries not already held (same id, version and change); how many were.
    One query per 500 record ids finds what is held, one insert per 500 entries appends the
    rest (a statement per entry cost two round trips each: most of a copy's time)."""
    held: set[tuple[str, int, str]] = set()
    ids = list(dict.fromkeys(entry.id for entry in entries))
    for start in range(0, len(ids), _CHUNK):
        chunk = ids[start : start + _CHUNK]
        rows = await fetch(
            db,
            "SELECT `id`, `version`, `change` FROM memory_history WHERE `id` IN ("
            + ", ".join("?" * len(chunk))
            + ")",
            chunk,
        )
        held.update((str(row[0]), int(row[1]), str(row[2])) for row in rows)
    added = []
    for entry in entries:
        if (entry.id, entry.version, entry.change) not in held:
            held.add((entry.id, entry.version, entry.change))
            added.append(entry)
    for start in range(0, len(added), _CHUNK):
        await append_history(db, added[start : start + _CHUNK])
    return len(added)


_CHUNK = 500


_AUDIT_COLUMNS = ", ".join(quoted(name) for name in AUDIT_COLUMNS)


async def append_audit(db: SqlDriver, events: Sequence[AuditEvent]) -> None:
    if events:
        row = "(" + ", ".join("?" * len(AUDIT_COLUMNS)) + ")"
        await run(
            db,
            f"INSERT INTO memory_audit ({_AUDIT_COLUMNS}) VALUES " + ", ".join(row for _ in events),
            [value for event in events for value in audit_values(event)],
        )


async def read_audit(
    db: SqlDriver, after: int, limit: int, principal: str | None
) -> list[AuditEntry]:
    sql = f"SELECT `seq`, {_AUDIT_COLUMNS} FROM memory_audit WHERE `seq` > ?"
    params: list[object] = [after]
    if principal is not None:
        sql += " AND `principal` = ?"
        params.append(principal)
    rows = await fetch(db, sql + " ORDER BY `seq` LIMIT ?", [*params, limit])
    return [audit_entry(row) for row in rows]


async def purge_audit(db: SqlDriver, before: int, dry_run: bool) -> int:
    if dry_run:
        rows = await fetch(db, "SELECT COUNT(*) FROM memory_audit WHERE `at` < ?", (before,))
        return int(rows[0][0])
    return await run(db, "DELETE FROM memory_audit WHERE `at` < ?", (before,))
