"""The records and history entries a change stores, as every store builds them: a new
record from a draft, its expiry, a history entry, and whether a record is live."""

from __future__ import annotations

from datetime import datetime, timedelta

from workers.memory.model.contracts import Change, HistoryEntry, MemoryDraft, MemoryItem
from workers.memory.model.errors import MemoryStoreError
from workers.memory.model.records import new_id

__all__ = ("ENDINGS", "Change", "expiry_of", "history_entry", "is_live", "new_item")


ENDINGS: frozenset[Change] = frozenset({"delete", "reject"})
"""The history changes after which a record no longer exists (a rejected claim is deleted)."""


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


def is_live(item: MemoryItem, now: datetime) -> bool:
    """Whether ``item`` is what reads return by default: active, not archived, not expired."""
    return (
        item.status == "active"
        and item.archived_at is None
        and (item.expires_at is None or item.expires_at > now)
    )


def history_entry(
    item: MemoryItem, change: Change, at: datetime, reviewer: str | None = None
) -> HistoryEntry:
    return HistoryEntry(item.id, item.version, change, at, item, reviewer)
