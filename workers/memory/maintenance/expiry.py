"""Hygiene of expired records. A record past its ``expires_at`` is hidden from every read at
once; hygiene deletes it once it has stayed expired for the retention's ``purge_grace_days``
(time to notice, and to read it with ``include: ["expired"]`` or export it), whatever its
category. Pinned records are never deleted. A record renewed meanwhile (a write to its key
gives it a new expiry) is left alone: the delete re-checks each record in its transaction."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from workers.memory.model.contracts import (
    HIDDEN_ALL,
    MemoryDraft,
    MemoryFilter,
    MemoryItem,
    MemoryPatch,
)
from workers.memory.ports import MemoryStore

__all__ = ("StillExpired", "delete_expired", "expired_before")

_PAGE = 1000


async def expired_before(store: MemoryStore, moment: datetime) -> list[MemoryItem]:
    """Every unpinned record that expired before ``moment`` (any status, archived or not)."""
    due = MemoryFilter(expires_before=moment, archived="include", include=list(HIDDEN_ALL))
    return [item async for page in store.pages(due, _PAGE) for item in page if not item.pinned]


class StillExpired:
    """The delete's guard: only records still expired before ``moment`` and unpinned."""

    def __init__(self, moment: datetime) -> None:
        self.moment = moment

    def check_write(self, stored: MemoryItem, draft: MemoryDraft) -> None:
        """Hygiene only deletes."""

    def check_update(self, stored: MemoryItem, patch: MemoryPatch) -> None:
        """Hygiene only deletes."""

    def check_delete(self, stored: MemoryItem) -> bool:
        return (
            stored.expires_at is not None and stored.expires_at < self.moment and not stored.pinned
        )


async def delete_expired(
    store: MemoryStore, items: Sequence[MemoryItem], moment: datetime, batch: int
) -> tuple[list[str], list[str]]:
    """Delete ``items`` still expired before ``moment``: the ids deleted, and those left
    alone (renewed, pinned or deleted meanwhile)."""
    guard = StillExpired(moment)
    deleted: list[str] = []
    for start in range(0, len(items), batch):
        ids = [item.id for item in items[start : start + batch]]
        deleted += await store.delete(ids, guard=guard)
    gone = set(deleted)
    return deleted, [item.id for item in items if item.id not in gone]
