"""UPDATE planning every store shares: how a patch applies to a stored record, and the history
change it records. Stores do the I/O inside their transaction and call these to decide."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import msgspec

from ditto.errors import ErrorCode
from workers.memory.model.contracts import HistoryEntry, MemoryItem, MemoryPatch
from workers.memory.model.errors import MemoryStoreError, not_found
from workers.memory.model.planning import Change, WriteGuard, history_entry

__all__ = ("UpdateStep", "apply_patch", "change_of_patch", "changes_text", "plan_updates")


@dataclass(frozen=True, slots=True)
class UpdateStep:
    """One patch of an UPDATE: the record as it leaves it, and the history entry it records."""

    item: MemoryItem
    entry: HistoryEntry


def plan_updates(
    patches: Sequence[MemoryPatch],
    stored: Mapping[str, MemoryItem],
    now: datetime,
    guard: WriteGuard | None = None,
) -> list[UpdateStep]:
    """Decide every patch of an UPDATE against the records as stored (looked up by id).

    Args:
        patches: The patches, ids unique.
        stored: The stored records by id (those the patches name that exist).
        now: The update's time.
        guard: Checked on each stored record before its patch applies.

    Raises:
        MemoryStoreError: ``NOT_FOUND`` for the first id not in ``stored``; what
            :func:`apply_patch` raises. Either way nothing is planned.
    """
    missing = [patch.id for patch in patches if patch.id not in stored]
    if missing:
        raise not_found(f"no record with id {missing[0]!r}")
    steps = []
    for patch in patches:
        item = apply_patch(stored[patch.id], patch, now, guard)
        steps.append(UpdateStep(item, history_entry(item, change_of_patch(patch), now)))
    return steps


_PATCH_FIELDS = ("content", "summary", "metadata", "tags", "category", "pinned", "visibility")


def changes_text(patch: MemoryPatch) -> bool:
    """Whether ``patch`` changes what is embedded for a record (its summary or content)."""
    return patch.content is not msgspec.UNSET or patch.summary is not msgspec.UNSET


def change_of_patch(patch: MemoryPatch) -> Change:
    """The history change a patch records: ``archive`` when it archives, else ``update``."""
    return "archive" if patch.archived is True else "update"


def apply_patch(
    item: MemoryItem, patch: MemoryPatch, now: datetime, guard: WriteGuard | None = None
) -> MemoryItem:
    """The record after ``patch``; supplied fields replace, others keep their value.

    ``archived`` alone does not touch ``updated_at``: archiving is not an edit, and retention
    measures inactivity from the last edit or use. Archiving an archived record keeps its first
    ``archived_at``; any other change revives it (unless the patch archives it too).

    Raises:
        MemoryStoreError: ``CONFLICT`` when ``expected_version`` is stale; what ``guard``
            raises.
    """
    if guard is not None:
        guard.check_update(item, patch)
    if patch.expected_version is not None and patch.expected_version != item.version:
        raise MemoryStoreError(
            f"record {item.id} is at version {item.version}, not {patch.expected_version}",
            code=ErrorCode.CONFLICT,
        )
    changes: dict[str, Any] = {"version": item.version + 1}
    for name in _PATCH_FIELDS:
        value = getattr(patch, name)
        if value is not msgspec.UNSET:
            changes[name] = value
    if patch.ttl is not msgspec.UNSET:
        if patch.expires_at is not msgspec.UNSET:
            raise MemoryStoreError(f"record {item.id}: give expires_at or ttl, not both")
        changes["expires_at"] = now + timedelta(seconds=patch.ttl)
    elif patch.expires_at is not msgspec.UNSET:
        changes["expires_at"] = patch.expires_at
    if changes.keys() - {"version"}:
        changes["updated_at"] = now
    if patch.archived is True:
        changes["archived_at"] = item.archived_at or now
    elif patch.archived is False or "updated_at" in changes:
        changes["archived_at"] = None  # an edit revives an archived record, as an upsert does
    return msgspec.structs.replace(item, **changes)
