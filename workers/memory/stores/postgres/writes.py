"""The PostgreSQL store's write transactions: each runs inside the caller's transaction, so
records, history and vectors change together or not at all."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING

import asyncpg

from workers.memory.model.contracts import MemoryDraft, MemoryItem, MemoryPatch, WriteMode
from workers.memory.model.errors import conflict
from workers.memory.model.merges import plan_merges
from workers.memory.model.patches import plan_updates
from workers.memory.model.planning import (
    NEW_RECORD,
    WriteGuard,
    WriteRules,
    history_entry,
    history_of,
    plan_writes,
)
from workers.memory.model.records import to_micros
from workers.memory.model.review_plan import (
    ReviewGuard,
    contested_to_review,
    locked_for_review,
    plan_reviews,
    review_history,
)
from workers.memory.model.reviews import ReviewDecision
from workers.memory.stores.postgres import logs
from workers.memory.stores.postgres.schema import lock_id
from workers.memory.stores.postgres.sql import STORED_COLUMNS, columns, item_values, records
from workers.memory.stores.rows import row_to_item

if TYPE_CHECKING:
    from workers.memory.stores.postgres.pool import Connection

__all__ = ("delete_batch", "restore_batch", "review_batch", "update_batch", "write_batch")


async def write_batch(
    connection: Connection,
    schema: str,
    s: str,
    drafts: Sequence[MemoryDraft],
    mode: WriteMode,
    now: datetime,
    guard: WriteGuard | None,
    rules: WriteRules | None = None,
) -> list[MemoryItem]:
    """WRITE: lock each key (sorted, so no deadlock), read what the keys hold, then insert,
    replace or replay as :func:`~workers.memory.model.planning.plan_writes` decides."""
    keyed = sorted({(d.namespace, d.key) for d in drafts if d.key is not None})
    existing: dict[tuple[str, str], list[MemoryItem]] = {}
    if keyed:
        # Concurrent writers of one key serialise here instead of failing on the unique index.
        await _lock_keys(connection, schema, keyed)
        # FOR UPDATE: a concurrent MEMORY.UPDATE of the same record must wait, not be
        # overwritten by the upsert that read the record before it.
        rows = await connection.fetch(
            f"SELECT {columns()} FROM {records(s)} JOIN unnest($1::text[], $2::text[]) "
            "AS wanted(namespace, key) ON m.namespace = wanted.namespace "
            "AND m.key = wanted.key FOR UPDATE OF m",
            [namespace for namespace, _ in keyed],
            [key for _, key in keyed],
        )
        for row in rows:
            item = row_to_item(row)
            existing.setdefault((item.namespace, item.key or ""), []).append(item)
    # The records drafts contradict or repeat, locked after the keys (whose records a
    # concurrent writer of the same keys locks first too).
    targets = (
        await _locked(connection, s, rules.targets) if rules is not None and rules.targets else {}
    )
    steps = plan_writes(drafts, mode, existing, now, guard, rules, targets)
    merges = plan_merges(targets, rules, steps, now, guard) if rules is not None else []
    for step in steps:
        if step.retired is not None:  # before the insert: it gives the key up
            await _replace(connection, s, step.retired)
    inserts = [item_values(step.item) for step in steps if step.action in NEW_RECORD]
    if inserts:
        await connection.copy_records_to_table(
            "memories", schema_name=schema, columns=list(STORED_COLUMNS), records=inserts
        )
    for step in [*steps, *merges]:
        if step.action in ("replace", "merge"):
            await _replace(connection, s, step.item)
    await logs.append_history(connection, s, history_of([*steps, *merges]))
    return [step.item for step in steps]


async def update_batch(
    connection: Connection,
    s: str,
    patches: Sequence[MemoryPatch],
    now: datetime,
    guard: WriteGuard | None,
) -> list[MemoryItem]:
    """UPDATE: lock the records, then patch them."""
    stored = await _locked(connection, s, [patch.id for patch in patches])
    steps = plan_updates(patches, stored, now, guard)
    for step in steps:
        await _replace(connection, s, step.item)
    await logs.append_history(connection, s, [step.entry for step in steps])
    return [step.item for step in steps]


async def delete_batch(
    connection: Connection,
    s: str,
    ids: Sequence[str],
    now: datetime,
    guard: WriteGuard | None,
) -> list[str]:
    """DELETE: lock the records, let ``guard`` decide each, delete the rest."""
    found = await _locked(connection, s, ids)
    if guard is not None:  # every check before any change: all or nothing
        found = {key: item for key, item in found.items() if guard.check_delete(item)}
    deleted = [item_id for item_id in ids if item_id in found]
    await connection.execute(f"DELETE FROM {s}.memories WHERE id = ANY($1::text[])", deleted)
    await logs.append_history(
        connection, s, [history_entry(found[item_id], "delete", now) for item_id in deleted]
    )
    return deleted


async def review_batch(
    connection: Connection,
    schema: str,
    s: str,
    decisions: Sequence[ReviewDecision],
    reviewer: str | None,
    now: datetime,
    guard: ReviewGuard | None,
) -> list[MemoryItem]:
    """REVIEW: lock the keys of the records reviewed (sorted, as writers lock them, so a write
    of the same key waits instead of deadlocking), lock the records and their keys' holders,
    then apply :func:`~workers.memory.model.review_plan.plan_reviews`: holders retired first
    (the partial unique index never sees two active records of one key), then records
    accepted or rejected (deleted)."""
    ids = [decision.id for decision in decisions]
    # A record's key never changes: read unlocked, it names the key locks to take first.
    rows = await connection.fetch(
        f"SELECT namespace, key FROM {s}.memories WHERE id = ANY($1::text[]) AND key IS NOT NULL",
        ids,
    )
    keyed = sorted({(row["namespace"], row["key"]) for row in rows})
    if keyed:
        await _lock_keys(connection, schema, keyed)
    rows = await connection.fetch(
        f"SELECT {columns()} FROM {records(s)} WHERE m.id = ANY($1::text[]) OR "
        "(m.status = 'active' AND (m.namespace, m.key) IN "
        "(SELECT * FROM unnest($2::text[], $3::text[]))) ORDER BY m.id FOR UPDATE OF m",
        ids,
        [namespace for namespace, _ in keyed],
        [key for _, key in keyed],
    )
    stored, holders = locked_for_review(map(row_to_item, rows), decisions, ids)
    wanted = contested_to_review(decisions, stored)
    contested: dict[str, MemoryItem] = {}
    if wanted:  # the records keyless claims contest: an accept supersedes them
        rows = await connection.fetch(
            f"SELECT {columns()} FROM {records(s)} WHERE m.id = ANY($1::text[]) "
            "ORDER BY m.id FOR UPDATE OF m",
            wanted,
        )
        contested = {item.id: item for item in map(row_to_item, rows)}
    steps = plan_reviews(decisions, stored, holders, now, reviewer, guard, contested)
    for step in steps:
        if step.retired is not None:
            await _replace(connection, s, step.retired)
    for step in steps:
        if step.decision == "accept":
            await _replace(connection, s, step.item)
    rejected = [step.item.id for step in steps if step.decision == "reject"]
    await connection.execute(f"DELETE FROM {s}.memories WHERE id = ANY($1::text[])", rejected)
    await logs.append_history(connection, s, review_history(steps))
    return [step.item for step in steps]


async def restore_batch(connection: Connection, s: str, items: Sequence[MemoryItem]) -> None:
    """Import: records exactly as given (same id replaced), their usage counters too."""
    names = ", ".join(STORED_COLUMNS)
    updates = ", ".join(f"{name} = excluded.{name}" for name in STORED_COLUMNS)
    # One statement for the batch (COPY into a scratch table, then one upsert): the keyword
    # statistics' triggers run once, not once a record. The last copy of an id wins. Rows of
    # the scratch table go at commit, or with the rollback of a failed import.
    scratch = f"memory_import_{s.strip(chr(34))}"[:63]
    latest = {item.id: item for item in items}
    await connection.execute(
        f'CREATE TEMP TABLE IF NOT EXISTS "{scratch}" (LIKE {s}.memories) ON COMMIT DELETE ROWS'
    )
    await connection.copy_records_to_table(
        scratch, columns=list(STORED_COLUMNS), records=[item_values(i) for i in latest.values()]
    )
    try:
        await connection.execute(
            f'INSERT INTO {s}.memories ({names}) SELECT {names} FROM "{scratch}" '
            f"ON CONFLICT (id) DO UPDATE SET {updates}"
        )
    except asyncpg.exceptions.UniqueViolationError as exc:
        raise conflict("a key in the import belongs to another record") from exc
    ids = [item.id for item in items]
    await connection.execute(f"DELETE FROM {s}.memory_usage WHERE id = ANY($1::text[])", ids)
    used = [item for item in latest.values() if item.usage_count or item.last_used_at is not None]
    if used:
        await connection.executemany(
            f"INSERT INTO {s}.memory_usage (id, usage_count, last_used_at) VALUES ($1, $2, $3)",
            [
                (item.id, item.usage_count, to_micros(item.last_used_at or item.created_at))
                for item in used
            ],
        )


async def _lock_keys(connection: Connection, schema: str, keyed: Sequence[tuple[str, str]]) -> None:
    """Take the transaction's advisory locks of ``(namespace, key)`` places, in the order
    given (callers sort them, so two transactions never wait on each other's)."""
    await connection.execute(
        "SELECT pg_advisory_xact_lock(lock) FROM unnest($1::bigint[]) AS lock",
        [lock_id(schema, namespace, key) for namespace, key in keyed],
    )


async def _replace(connection: Connection, s: str, item: MemoryItem) -> None:
    """Overwrite a stored record's fields (same id)."""
    values = item_values(item)
    changed = STORED_COLUMNS[3:]  # everything but id, key and namespace
    assignments = ", ".join(f"{name} = ${n}" for n, name in enumerate(changed, start=2))
    await connection.execute(
        f"UPDATE {s}.memories SET {assignments} WHERE id = $1", item.id, *values[3:]
    )


async def _locked(connection: Connection, s: str, ids: Sequence[str]) -> dict[str, MemoryItem]:
    """The stored records with ``ids``, by id, row-locked until commit (in id order, so two
    writers never deadlock)."""
    rows = await connection.fetch(
        f"SELECT {columns()} FROM {records(s)} WHERE m.id = ANY($1::text[]) "
        "ORDER BY m.id FOR UPDATE OF m",
        list(ids),
    )
    return {row["id"]: row_to_item(row) for row in rows}
