"""Write planning every store shares: what a WRITE does to each key (insert, replace, replay),
how a patch applies, and the history each change records. Stores do the I/O inside their
transaction and call these to decide, so every backend behaves the same."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Literal, Protocol

import msgspec

from ditto.errors import ErrorCode
from workers.memory.model.contracts import (
    HistoryEntry,
    MemoryDraft,
    MemoryItem,
    MemoryPatch,
    WriteMode,
)
from workers.memory.model.errors import MemoryStoreError, conflict, not_found
from workers.memory.model.records import canonical_json, new_id

__all__ = (
    "Change",
    "UpdateStep",
    "WriteGuard",
    "WriteStep",
    "apply_patch",
    "change_of_patch",
    "changes_text",
    "expiry_of",
    "history_entry",
    "new_item",
    "plan_updates",
    "plan_writes",
)


def _draft_fields(draft: MemoryDraft | MemoryItem) -> bytes:
    return canonical_json(
        [
            draft.content,
            draft.summary,
            draft.category,
            draft.tags,
            draft.metadata,
            draft.source,
        ]
    )


def _replays(draft: MemoryDraft, stored: MemoryItem) -> bool:
    """Whether writing ``draft`` over ``stored`` would change nothing (``None`` flags keep the
    stored value, so they never differ). A ``ttl`` does not count: the same draft written again
    replays its record rather than conflicting (or refreshing its expiry); the writing
    principal is provenance, not a field a rerun changes."""
    return (
        _draft_fields(draft) == _draft_fields(stored)
        and draft.pinned in (None, stored.pinned)
        and draft.visibility in (None, stored.visibility)
        and draft.trust in (None, stored.trust)
        and draft.expires_at in (None, stored.expires_at)
        and draft.valid_from in (None, stored.valid_from)
    )


def expiry_of(draft: MemoryDraft, now: datetime) -> datetime | None:
    """When a record written from ``draft`` at ``now`` expires: its ``expires_at``, or ``now``
    plus its ``ttl``; ``None`` when it gives neither.

    Raises:
        MemoryStoreError: ``INVALID_INPUT`` when it gives both.
    """
    if draft.ttl is None:
        return draft.expires_at
    if draft.expires_at is not None:
        raise MemoryStoreError("give a record expires_at or ttl, not both")
    return now + timedelta(seconds=draft.ttl)


def new_item(draft: MemoryDraft, now: datetime, item_id: str | None = None) -> MemoryItem:
    return MemoryItem(
        id=item_id or new_id(),
        key=draft.key,
        namespace=draft.namespace,
        content=draft.content,
        summary=draft.summary,
        category=draft.category,
        tags=list(draft.tags),
        metadata=dict(draft.metadata),
        source=draft.source,
        created_at=now,
        updated_at=now,
        version=1,
        usage_count=0,
        last_used_at=None,
        pinned=bool(draft.pinned),
        archived_at=None,
        owner=draft.owner,
        visibility=draft.visibility or "shared",
        trust=draft.trust,
        principal=draft.principal,
        status="active",
        valid_from=draft.valid_from,
        valid_to=None,
        expires_at=expiry_of(draft, now),
    )


@dataclass(frozen=True, slots=True)
class WriteStep:
    """What one draft of a WRITE does: insert a new record, replace a stored one (upsert), or
    keep a stored one unchanged (an idempotent replay)."""

    action: Literal["insert", "replace", "keep"]
    item: MemoryItem
    entry: HistoryEntry | None
    """The history entry the step records (``None`` for a replay, which changes nothing)."""


class WriteGuard(Protocol):
    """Checks a store makes inside its write transaction, on the records as stored there, so
    nothing can change between a check and the write it allows (access control enforcing,
    retention). Each raises a coded :class:`MemoryStoreError` to refuse the whole call."""

    def check_write(self, stored: MemoryItem, draft: MemoryDraft) -> None:
        """A WRITE draft lands on ``stored`` (same key)."""

    def check_update(self, stored: MemoryItem, patch: MemoryPatch) -> None:
        """A patch applies to ``stored``."""

    def check_delete(self, stored: MemoryItem) -> bool:
        """Whether ``stored`` is deleted (``False``: left alone, not reported as deleted)."""


def plan_writes(
    drafts: Iterable[MemoryDraft],
    mode: WriteMode,
    existing: Mapping[tuple[str, str], MemoryItem],
    now: datetime,
    guard: WriteGuard | None = None,
) -> list[WriteStep]:
    """Decide every draft of a batch against the records already stored under its key.

    ``create``: a key with identical fields replays the stored record; any difference is
    ``CONFLICT`` (and the caller rolls the whole batch back). ``upsert``: a key replaces the
    stored record's fields, keeping ``id``, ``created_at`` and usage statistics and bumping
    ``version`` (an identical draft is a replay, not a new version). An upsert keeps the owner
    (ownership never moves with a write), keeps ``pinned``, ``visibility``, ``trust``,
    ``valid_from`` and the expiry unless the draft sets them, and revives an archived record.
    A key whose record has expired takes a new one in either mode (the expired record is
    replaced, as by an upsert). ``existing`` holds the *active* record of each key.

    Raises:
        MemoryStoreError: ``CONFLICT`` for a changed record under an existing key in create mode.
    """
    steps = []
    for draft in drafts:
        stored = existing.get((draft.namespace, draft.key)) if draft.key is not None else None
        if stored is not None and guard is not None:
            guard.check_write(stored, draft)  # replays too: they return the stored record
        expired = stored is not None and stored.expires_at is not None and stored.expires_at <= now
        if stored is None:
            item = new_item(draft, now)
            steps.append(WriteStep("insert", item, history_entry(item, "create", now)))
        elif not expired and _replays(draft, stored):
            steps.append(WriteStep("keep", stored, None))
        elif mode == "create" and not expired:
            raise conflict(
                f"key {draft.key!r} in namespace {draft.namespace!r} already holds a different "
                "record; use mode='upsert' to replace it or MEMORY.UPDATE to change it"
            )
        else:
            replaced = msgspec.structs.replace(
                stored,
                content=draft.content,
                summary=draft.summary,
                category=draft.category,
                tags=list(draft.tags),
                metadata=dict(draft.metadata),
                source=draft.source,
                updated_at=now,
                version=stored.version + 1,
                pinned=stored.pinned if draft.pinned is None else draft.pinned,
                visibility=draft.visibility or stored.visibility,
                archived_at=None,
                trust=stored.trust if draft.trust is None else draft.trust,
                principal=stored.principal if draft.principal is None else draft.principal,
                valid_from=stored.valid_from if draft.valid_from is None else draft.valid_from,
                # An expired record's expiry is over: the new one has the draft's, if any.
                expires_at=stored.expires_at
                if not expired and draft.ttl is None and draft.expires_at is None
                else expiry_of(draft, now),
            )
            steps.append(WriteStep("replace", replaced, history_entry(replaced, "upsert", now)))
    return steps


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


Change = Literal["create", "upsert", "update", "archive", "delete"]


def history_entry(item: MemoryItem, change: Change, at: datetime) -> HistoryEntry:
    return HistoryEntry(item.id, item.version, change, at, item)


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
    ``archived_at``.

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
    if changes.keys() - {"version"}:
        changes["updated_at"] = now
    if patch.archived is True:
        changes["archived_at"] = item.archived_at or now
    elif patch.archived is False:
        changes["archived_at"] = None
    return msgspec.structs.replace(item, **changes)
