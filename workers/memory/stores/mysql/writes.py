"""The MySQL store's write transactions: each runs on the caller's transaction-bound driver, so
records and history change together or not at all."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

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
from workers.memory.stores.mysql import logs
from workers.memory.stores.mysql.errors import DUPLICATE_KEY, error_number
from workers.memory.stores.mysql.sql import (
    STORED_COLUMNS,
    columns,
    item_values,
    key_hash,
    marks,
    quoted,
    records,
)
from workers.memory.stores.rows import row_to_item
from workers.memory.stores.sql_driver import SqlDriver, fetch, run

__all__ = ("delete_batch", "restore_batch", "review_batch", "update_batch", "write_batch")

_NAMES = ", ".join(quoted(name) for name in STORED_COLUMNS)
_ROW = "(" + ", ".join("?" * len(STORED_COLUMNS)) + ")"


async def write_batch(
    db: SqlDriver,
    drafts: Sequence[MemoryDraft],
    mode: WriteMode,
    now: datetime,
    guard: WriteGuard | None,
    rules: WriteRules | None = None,
) -> list[MemoryItem]:
    """WRITE: lock each key (sorted, so no deadlock), read EVERY record under it (any status),
    then insert, replace or replay as :func:`~workers.memory.model.planning.plan_writes`
    decides."""
    keyed = {(d.namespace, d.key) for d in drafts if d.key is not None}
    existing: dict[tuple[str, str], list[MemoryItem]] = {}
    if keyed:
        hashes = sorted(key_hash(namespace, key) for namespace, key in keyed)
        await _lock_keys(db, hashes)
        # FOR UPDATE: a concurrent MEMORY.UPDATE of the same record must wait, not be
        # overwritten by the upsert that read the record before it.
        rows = await fetch(
            db,
            f"SELECT {columns()} FROM {records()} WHERE m.`key_hash` IN ({marks(len(hashes))}) "
            "ORDER BY m.`id` FOR UPDATE",
            hashes,
        )
        for row in rows:
            item = row_to_item(row)
            if (item.namespace, item.key) in keyed:  # not a hash collision
                existing.setdefault((item.namespace, item.key or ""), []).append(item)
    # The records drafts contradict or repeat, locked after the keys (whose records a
    # concurrent writer of the same keys locks first too).
    targets = await _locked(db, rules.targets) if rules is not None and rules.targets else {}
    steps = plan_writes(drafts, mode, existing, now, guard, rules, targets)
    merges = plan_merges(targets, rules, steps, now, guard) if rules is not None else []
    for step in steps:
        if step.retired is not None:  # before the insert: it gives the key up
            await _replace(db, step.retired)
    inserts = [item_values(step.item) for step in steps if step.action in NEW_RECORD]
    if inserts:
        await run(
            db,
            f"INSERT INTO memories ({_NAMES}) VALUES " + ", ".join(_ROW for _ in inserts),
            [value for values in inserts for value in values],
        )
    for step in [*steps, *merges]:
        if step.action in ("replace", "merge"):
            await _replace(db, step.item)
    await logs.append_history(db, history_of([*steps, *merges]))
    return [step.item for step in steps]


async def update_batch(
    db: SqlDriver,
    patches: Sequence[MemoryPatch],
    now: datetime,
    guard: WriteGuard | None,
) -> list[MemoryItem]:
    """UPDATE: lock the records, then patch them."""
    stored = await _locked(db, [patch.id for patch in patches])
    steps = plan_updates(patches, stored, now, guard)
    for step in steps:
        await _replace(db, step.item)
    await logs.append_history(db, [step.entry for step in steps])
    return [step.item for step in steps]


async def delete_batch(
    db: SqlDriver, ids: Sequence[str], now: datetime, guard: WriteGuard | None
) -> list[str]:
    """DELETE: lock the records, let ``guard`` decide each, delete the rest."""
    found = await _locked(db, ids)
    if guard is not None:  # every check before any change: all or nothing
        found = {key: item for key, item in found.items() if guard.check_delete(item)}
    deleted = list(dict.fromkeys(item_id for item_id in ids if item_id in found))
    if deleted:
        await run(db, f"DELETE FROM memories WHERE `id` IN ({marks(len(deleted))})", deleted)
    await logs.append_history(
        db, [history_entry(found[item_id], "delete", now) for item_id in deleted]
    )
    return [item_id for item_id in ids if item_id in found]


async def review_batch(
    db: SqlDriver,
    decisions: Sequence[ReviewDecision],
    reviewer: str | None,
    now: datetime,
    guard: ReviewGuard | None,
) -> list[MemoryItem]:
    """REVIEW: lock the keys of the records reviewed (sorted, as writers lock them, so a write
    of the same key waits instead of deadlocking), lock the records and their keys' holders,
    then apply :func:`~workers.memory.model.review_plan.plan_reviews`: holders retired first
    (the unique ``active_key`` never sees two active records of one key), then records
    accepted or rejected (deleted)."""
    ids = list(dict.fromkeys(decision.id for decision in decisions))
    # A record's key never changes: read unlocked, it names the key locks to take first.
    rows = await fetch(
        db,
        f"SELECT `key_hash` FROM memories WHERE `id` IN ({marks(len(ids))}) AND `key` IS NOT NULL",
        ids,
    )
    hashes = sorted({bytes(row[0]) for row in rows})
    if hashes:
        await _lock_keys(db, hashes)
    rows = await fetch(
        db,
        f"SELECT {columns()} FROM {records()} WHERE m.`id` IN ({marks(len(ids))}) "
        f"OR m.`active_key` IN ({marks(len(hashes))}) ORDER BY m.`id` FOR UPDATE",
        [*ids, *hashes],
    )
    stored, holders = locked_for_review(map(row_to_item, rows), decisions, ids)
    wanted = contested_to_review(decisions, stored)
    contested: dict[str, MemoryItem] = {}
    if wanted:  # the records keyless claims contest: an accept supersedes them
        rows = await fetch(
            db,
            f"SELECT {columns()} FROM {records()} WHERE m.`id` IN ({marks(len(wanted))}) "
            "ORDER BY m.`id` FOR UPDATE",
            wanted,
        )
        contested = {item.id: item for item in map(row_to_item, rows)}
    steps = plan_reviews(decisions, stored, holders, now, reviewer, guard, contested)
    for step in steps:
        if step.retired is not None:
            await _replace(db, step.retired)
    for step in steps:
        if step.decision == "accept":
            await _replace(db, step.item)
    rejected = [step.item.id for step in steps if step.decision == "reject"]
    if rejected:
        await run(db, f"DELETE FROM memories WHERE `id` IN ({marks(len(rejected))})", rejected)
    await logs.append_history(db, review_history(steps))
    return [step.item for step in steps]


async def restore_batch(db: SqlDriver, items: Sequence[MemoryItem]) -> None:
    """Import: records exactly as given (same id replaced), their usage counters too."""
    if not items:
        return
    ids = [item.id for item in items]
    # Delete and insert, not ON DUPLICATE KEY UPDATE: that would also fire on another
    # record's key and overwrite it, where the import must refuse.
    await run(db, f"DELETE FROM memories WHERE `id` IN ({marks(len(ids))})", ids)
    try:
        await run(
            db,
            f"INSERT INTO memories ({_NAMES}) VALUES " + ", ".join(_ROW for _ in items),
            [value for item in items for value in item_values(item)],
        )
    except Exception as exc:
        if error_number(exc) == DUPLICATE_KEY:
            raise conflict("a key in the import belongs to another record") from exc
        raise
    used = [item for item in items if item.usage_count or item.last_used_at is not None]
    if used:
        await run(
            db,
            "INSERT INTO memory_usage (`id`, `usage_count`, `last_used_at`) VALUES "
            + ", ".join("(?, ?, ?)" for _ in used),
            [
                value
                for item in used
                for value in (
                    item.id,
                    item.usage_count,
                    to_micros(item.last_used_at or item.created_at),
                )
            ],
        )


_CHANGED = STORED_COLUMNS[3:]  # everything but id, key and namespace
_ASSIGNMENTS = ", ".join(f"{quoted(name)} = ?" for name in _CHANGED)


async def _lock_keys(db: SqlDriver, hashes: list[bytes]) -> None:
    """Take the key locks of ``hashes`` (sorted, so no deadlock) until commit: writers and
    reviews of one key serialise here instead of failing on the unique index. ON DUPLICATE KEY
    UPDATE takes the row's exclusive lock whether it is new or not (INSERT IGNORE would take a
    shared one, and two upgrading writers deadlock)."""
    await run(
        db,
        "INSERT INTO memory_key_locks (`key_hash`) VALUES "
        + ", ".join("(?)" for _ in hashes)
        + " ON DUPLICATE KEY UPDATE `key_hash` = `key_hash`",
        hashes,
    )


async def _replace(db: SqlDriver, item: MemoryItem) -> None:
    """Overwrite a stored record's fields (same id)."""
    values = item_values(item)
    await run(db, f"UPDATE memories SET {_ASSIGNMENTS} WHERE `id` = ?", [*values[3:], item.id])


async def _locked(db: SqlDriver, ids: Sequence[str]) -> dict[str, MemoryItem]:
    """The stored records with ``ids``, by id, row-locked until commit (in id order, so two
    writers never deadlock)."""
    wanted = list(dict.fromkeys(ids))
    rows = await fetch(
        db,
        f"SELECT {columns()} FROM {records()} WHERE m.`id` IN ({marks(len(wanted))}) "
        "ORDER BY m.`id` FOR UPDATE",
        wanted,
    )
    return {item.id: item for item in map(row_to_item, rows)}
