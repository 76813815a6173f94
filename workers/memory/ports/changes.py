"""Capability: which records changed, without reading them — what keeps the write policy's
dedupe index in step with every writer of a store at the cost of a few columns per change."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import NamedTuple

from workers.memory.ports.store import QueryPosition

__all__ = ("ChangeFeed", "ChangedRecord")


class ChangedRecord(NamedTuple):
    """One record as its last change left it: enough to tell whether a reader already holds
    that version, and where the feed continues after it."""

    id: str
    namespace: str
    version: int
    updated_micros: int
    """``updated_at`` in microseconds since the epoch (``records.to_micros``)."""


class ChangeFeed(ABC):
    """Capability: the records changed after a point, oldest change first.

    A record appears once, at its latest change (a record changed twice since the point is
    listed at the second change only); a deleted record does not appear (readers find out
    when they read it). The order is the ``updated_at`` index every store keeps, so a page
    is one index range however large the store is.
    """

    @abstractmethod
    async def changes_after(self, after: QueryPosition, limit: int) -> list[ChangedRecord]:
        """At most ``limit`` records whose ``(updated_at, id)`` comes after ``after``.

        Args:
            after: ``(updated_micros, id)``; ``(micros, "")`` starts at that microsecond
                (ids are never empty).
            limit: Most records returned; a full page means more may follow (continue after
                the last one).

        Returns:
            Ordered by ``updated_at`` then ``id``.
        """
