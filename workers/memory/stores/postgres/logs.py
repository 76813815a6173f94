"""The PostgreSQL store's two logs: record history and the audit trail."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import msgspec

from workers.memory.model.contracts import AuditEntry, HistoryEntry, MemoryItem
from workers.memory.model.records import from_micros, to_micros
from workers.memory.ports import AuditEvent
from workers.memory.stores.rows import AUDIT_COLUMNS, audit_entry, audit_values

if TYPE_CHECKING:
    import asyncpg

    from workers.memory.stores.postgres.pool import Connection

    Executor = Connection | asyncpg.Pool

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


async def append_history(connection: Connection, s: str, entries: Sequence[HistoryEntry]) -> None:
    """Append history entries inside the caller's transaction."""
    if entries:
        await connection.executemany(
            f"INSERT INTO {s}.memory_history (id, version, change, at, record, reviewer) "
            "VALUES ($1, $2, $3, $4, $5, $6)",
            [
                (e.id, e.version, e.change, to_micros(e.at), _encode(e.record).decode(), e.reviewer)
                for e in entries
            ],
        )


async def history_of(pool: Executor, s: str, item_id: str) -> list[HistoryEntry]:
    rows = await pool.fetch(
        f"SELECT record, change, at, reviewer FROM {s}.memory_history WHERE id = $1 ORDER BY seq",
        item_id,
    )
    return [_entry(row) for row in rows]


def _entry(row: asyncpg.Record) -> HistoryEntry:
    item = _decode_item(row["record"])
    at = from_micros(row["at"])
    return HistoryEntry(item.id, item.version, row["change"], at, item, row["reviewer"])


async def history_page(
    pool: Executor, s: str, after: int, limit: int, namespace: str | None, key: str | None
) -> tuple[list[HistoryEntry], int]:
    """Entries after ``seq`` ``after`` in append order, and the last ``seq`` read. No index
    serves the namespace or key: this is an administrative read (export, ``memory history``)
    that scans the log once per page, never a node's path."""
    rows = await pool.fetch(
        f"SELECT seq, record, change, at, reviewer FROM {s}.memory_history WHERE seq > $1 "
        "AND ($2::text IS NULL OR record::json ->> 'namespace' = $2) "
        f"AND ($3::text IS NULL OR id IN (SELECT id FROM {s}.memory_history "
        "WHERE record::json ->> 'key' = $3 "
        "AND ($2::text IS NULL OR record::json ->> 'namespace' = $2))) "
        "ORDER BY seq LIMIT $4",
        after,
        namespace,
        key,
        limit,
    )
    entries = []
    for row in rows:
        entries.append(_entry(row))
        after = row["seq"]
    return entries, after


async def restore_history(connection: Connection, s: str, entries: Sequence[HistoryEntry]) -> int:
    """Append the entries not already held (same id, version and change); how many were.
    One query finds what is held (a query per entry was most of a copy's time)."""
    rows = await connection.fetch(
        f"SELECT id, version, change FROM {s}.memory_history WHERE id = ANY($1::text[])",
        list(dict.fromkeys(entry.id for entry in entries)),
    )
    held = {(row["id"], row["version"], row["change"]) for row in rows}
    added = []
    for entry in entries:
        if (entry.id, entry.version, entry.change) not in held:
            held.add((entry.id, entry.version, entry.change))
            added.append(entry)
    await append_history(connection, s, added)
    return len(added)


_AUDIT_COLUMNS = ", ".join(AUDIT_COLUMNS)


async def append_audit(pool: Executor, s: str, events: Sequence[AuditEvent]) -> None:
    marks = ", ".join(f"${n}" for n in range(1, len(AUDIT_COLUMNS) + 1))
    await pool.executemany(
        f"INSERT INTO {s}.memory_audit ({_AUDIT_COLUMNS}) VALUES ({marks})",
        [audit_values(event) for event in events],
    )


async def read_audit(
    pool: Executor, s: str, after: int, limit: int, principal: str | None
) -> list[AuditEntry]:
    rows = await pool.fetch(
        f"SELECT seq, {_AUDIT_COLUMNS} FROM {s}.memory_audit WHERE seq > $1 "
        "AND ($2::text IS NULL OR principal = $2) ORDER BY seq LIMIT $3",
        after,
        principal,
        limit,
    )
    return [audit_entry(row) for row in rows]


async def purge_audit(pool: Executor, s: str, before: int, dry_run: bool) -> int:
    sql = (
        f"SELECT count(*) FROM {s}.memory_audit WHERE at < $1"
        if dry_run
        else f"WITH gone AS (DELETE FROM {s}.memory_audit WHERE at < $1 RETURNING 1) "
        "SELECT count(*) FROM gone"
    )
    return int(await pool.fetchval(sql, before))
