"""Expiry renewed on read: a record of a category with a ttl stays as long as it is read
(``renew_on_read`` in the write policy), the way a cache entry that keeps being hit stays.

A record that GET or SEARCH returns, unexpired, with less than half of its category's ttl
left, gets ``expires_at = now + ttl`` through an ordinary UPDATE (a new version and an
``update`` history entry: the renewal is visible and auditable), and the read returns it as
renewed, so a caller's next ``expected_version`` is right. Half the ttl bounds the churn: a
record read constantly is renewed about twice per ttl, never on every read. Records whose
expiry was set per record (a draft's ``ttl``/``expires_at``) are renewed by their category's
ttl only; a category without one is never renewed.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta

from ditto.errors import ErrorCode
from workers.memory.model.contracts import MemoryItem, MemoryPatch
from workers.memory.model.errors import MemoryStoreError
from workers.memory.ports import MemoryStore

__all__ = ("Renewal",)

logger = logging.getLogger("ditto.memory.policy")

_LOST_RACE = frozenset({ErrorCode.CONFLICT, ErrorCode.NOT_FOUND})
"""A record changed or deleted between the read and its renewal: the change wins."""


class Renewal:
    """Renews what reads return (see the module).

    Args:
        store: The worker's store.
        category_ttl_s: Category -> its ttl in seconds (the write policy's ``category_ttl_s``).
    """

    def __init__(self, store: MemoryStore, category_ttl_s: Mapping[str, int]) -> None:
        self._store = store
        self._ttl = {category: timedelta(seconds=ttl) for category, ttl in category_ttl_s.items()}

    def _patch(self, item: MemoryItem, now: datetime) -> MemoryPatch | None:
        ttl = self._ttl.get(item.category)
        if (
            ttl is None
            or item.status != "active"
            or item.expires_at is None
            or not now < item.expires_at < now + ttl / 2
        ):
            return None
        return MemoryPatch(item.id, ttl=round(ttl.total_seconds()), expected_version=item.version)

    async def renew(self, items: Sequence[MemoryItem], now: datetime) -> list[MemoryItem]:
        """``items`` with those due renewed (each as the store left it)."""
        patches = [patch for item in items if (patch := self._patch(item, now)) is not None]
        if not patches:
            return list(items)
        try:
            renewed = await self._store.update(patches)
        except MemoryStoreError as exc:
            if exc.code not in _LOST_RACE:
                raise
            renewed = await self._one_by_one(patches)
        by_id = {item.id: item for item in renewed}
        return [by_id.get(item.id, item) for item in items]

    async def _one_by_one(self, patches: Sequence[MemoryPatch]) -> list[MemoryItem]:
        """Each patch alone, so one record changed meanwhile keeps no other from renewing."""
        renewed: list[MemoryItem] = []
        for patch in patches:
            try:
                renewed += await self._store.update([patch])
            except MemoryStoreError as exc:
                if exc.code not in _LOST_RACE:
                    raise
                logger.debug("record %s changed before its renewal; left as it is", patch.id)
        return renewed
