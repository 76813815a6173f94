"""Keeping the dedupe stage's namespace indexes in step with the store, whoever writes to it.

A namespace is read in full on the first write there that matches; before each such write,
every change since the last sync is applied to the namespaces loaded — any writer's: a record
superseded, expired, archived or rewritten elsewhere leaves the index. A store with a
:class:`~workers.memory.ports.changes.ChangeFeed` lists the changes by id and version, and
only records the index does not already hold at that version are read (this worker's own
writes are learned as they commit, so its next write reads none of them); any other store is
asked for the changed records themselves, by one store-wide query ordered by ``updated_at``
(an index every store keeps; filtered by namespace, a store without an index on both would
read the whole namespace on every write).

The caveat: a change committed after a later one was read (its ``updated_at`` older than the
newest seen) is not seen.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable, Sequence
from datetime import datetime

import anyio
import msgspec

from workers.memory.model.contracts import HIDDEN_ALL, MemoryFilter, MemoryItem, OrderBy
from workers.memory.model.records import from_micros, order_key, to_micros
from workers.memory.ports import ChangeFeed, MemoryStore, QueryPosition
from workers.memory.worker.dedupe_index import NamespaceIndex

__all__ = ("IndexSync",)

_PAGE = 1000
_FEED_PAGE = 256
"""Changes listed per page of a change feed (a page a store can read on its calling thread)."""
_ORDER = OrderBy("updated_at")
_NEWEST = OrderBy("updated_at", "desc")
_EVERYTHING = MemoryFilter(archived="include", include=list(HIDDEN_ALL))
"""Every record, whatever its status (a change may take one out of the index)."""


class IndexSync:
    """The namespace indexes of one worker's dedupe stage, and where the store's changes were
    last read.

    Args:
        store: The worker's store (read only).
    """

    def __init__(self, store: MemoryStore) -> None:
        self._store = store
        self._feed = store if isinstance(store, ChangeFeed) else None
        self.spaces: dict[str, NamespaceIndex] = {}
        """The namespaces loaded (read in full once, then kept up to date)."""
        self._cursor: int | None = None
        """The latest ``updated_at`` read from the store, in microseconds (``None``: the
        store held nothing)."""
        self._started = False
        """Whether :attr:`_cursor` was taken (before the first namespace was loaded)."""
        # Taken on every write the policy matches: a free lock is taken without yielding to
        # the event loop (a yield costs about as much as the empty feed read it guards).
        self._lock = anyio.Lock(fast_acquire=True)

    async def synced(self, namespaces: Iterable[str], now: datetime) -> dict[str, NamespaceIndex]:
        """The namespaces' indexes, brought up to date with every change since the last sync."""
        async with self._lock:
            if not self._started:
                # Where the changes to read start, taken before any namespace is read: a change
                # committed after that read has a later ``updated_at`` (the caveat aside).
                newest = await self._store.query(_EVERYTHING, _NEWEST, 1, None)
                self._cursor = to_micros(newest[0].updated_at) if newest else None
                self._started = True
            elif self.spaces:
                if self._feed is not None:
                    await self._follow(self._feed, now)
                else:
                    await self._read_changes(now)
            wanted: dict[str, NamespaceIndex] = {}
            for namespace in namespaces:
                space = self.spaces.get(namespace)
                if space is None:
                    space = await self._load(namespace, now)
                    self.spaces[namespace] = space
                wanted[namespace] = space
        return wanted

    async def _follow(self, feed: ChangeFeed, now: datetime) -> None:
        """Apply the feed's changes since the last sync, reading only the records the
        indexes do not hold at their listed version."""
        # From the cursor's microsecond on: a change committed in the same microsecond as the
        # last one read is listed again (an index holding it reads nothing for it).
        after: QueryPosition = (-(1 << 62) if self._cursor is None else self._cursor, "")
        while True:
            page = await feed.changes_after(after, _FEED_PAGE)
            unknown = [
                change.id
                for change in page
                if (space := self.spaces.get(change.namespace)) is not None
                and not space.knows(change.id, change.version)
            ]
            if unknown:
                found = await self._store.get(unknown, [], "")
                self._apply(found, now)
                for record_id in set(unknown).difference(item.id for item in found):
                    for space in self.spaces.values():  # deleted since it was listed
                        space.forget(record_id)
            if page:
                self._advance(page[-1].updated_micros)
            if len(page) < _FEED_PAGE:
                return
            after = (page[-1].updated_micros, page[-1].id)

    async def _read_changes(self, now: datetime) -> None:
        """Apply every change since the last sync, read as records (a store without a feed)."""
        # A microsecond back: a change committed in the same microsecond as the last one read
        # is read again (learning a record twice changes nothing).
        since = None if self._cursor is None else from_micros(self._cursor - 1)
        changed = msgspec.structs.replace(_EVERYTHING, updated_after=since)
        async for page in self._pages(changed):
            self._apply(page, now)
            for item in page:
                self._advance(to_micros(item.updated_at))

    def _apply(self, items: Sequence[MemoryItem], now: datetime) -> None:
        by_space: dict[str, list[MemoryItem]] = {}
        for item in items:
            if item.namespace in self.spaces:
                by_space.setdefault(item.namespace, []).append(item)
        for namespace, changed in by_space.items():
            self.spaces[namespace].read(changed, now)

    def _advance(self, micros: int) -> None:
        if self._cursor is None or micros > self._cursor:
            self._cursor = micros

    async def _load(self, namespace: str, now: datetime) -> NamespaceIndex:
        """A namespace's index, read in full."""
        space = NamespaceIndex()
        async for page in self._pages(msgspec.structs.replace(_EVERYTHING, namespace=namespace)):
            space.read(page, now)
        return space

    async def _pages(self, changed: MemoryFilter) -> AsyncIterator[list[MemoryItem]]:
        after: QueryPosition | None = None
        while True:
            page = await self._store.query(changed, _ORDER, _PAGE, after)
            yield page
            if len(page) < _PAGE:
                return
            after = (order_key(page[-1], "updated_at"), page[-1].id)
