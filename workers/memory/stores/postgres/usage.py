"""Usage counters of the PostgreSQL store, coalesced in memory and applied in one statement.

Updating a record's row recomputes its ``tsvector`` and touches the GIN index, so the counters
live in their own table and many searches' uses are applied together: when the previous apply
is older than :data:`USAGE_INTERVAL`, first thing in the next write, on flush and on close.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import datetime
from time import monotonic
from typing import TYPE_CHECKING

import asyncpg

from workers.memory.model.records import to_micros

if TYPE_CHECKING:
    from workers.memory.stores.postgres.pool import Connection

__all__ = ("USAGE_INTERVAL", "UsageCounters")

logger = logging.getLogger(__name__)

USAGE_INTERVAL = 0.05
"""Seconds between two applies of pending counters on a busy search path."""


class UsageCounters:
    """Pending uses per record id: ``(count, latest use in microseconds)``."""

    def __init__(self, s: str) -> None:
        self._s = s
        self.pending: dict[str, tuple[int, int]] = {}
        self._applied_at = 0.0

    def add(self, ids: Sequence[str], at: datetime) -> bool:
        """Count a use of each id; whether it is time to apply the counters."""
        micros = to_micros(at)
        for item_id in ids:
            count, last = self.pending.get(item_id, (0, micros))
            self.pending[item_id] = (count + 1, max(last, micros))
        return monotonic() - self._applied_at >= USAGE_INTERVAL

    async def apply(self, connection: Connection) -> None:
        """Store the pending counters in one statement (outside any caller's transaction, so
        a failing batch after it does not lose them); on failure they stay pending.

        Rows are locked in id order, so two stores applying counters of the same records wait
        for each other instead of deadlocking. Should PostgreSQL still end the statement as a
        deadlock or a serialization failure (another writer holding a usage row the other way
        round), the counters stay pending for the next apply and the caller's write goes on: a
        use counted a moment later must never fail a write."""
        usage, self.pending = self.pending, {}
        self._applied_at = monotonic()
        if not usage:
            return
        try:
            # Only for records that still exist (a deleted one may have been found a moment ago).
            await connection.execute(
                f"INSERT INTO {self._s}.memory_usage AS usage (id, usage_count, last_used_at) "
                "SELECT u.id, u.uses, u.at "
                "FROM unnest($1::text[], $2::int[], $3::bigint[]) AS u(id, uses, at) "
                f"JOIN {self._s}.memories m ON m.id = u.id ORDER BY u.id "
                "ON CONFLICT (id) DO UPDATE SET "
                "usage_count = usage.usage_count + excluded.usage_count, "
                "last_used_at = greatest(usage.last_used_at, excluded.last_used_at)",
                list(usage),
                [count for count, _ in usage.values()],
                [at for _, at in usage.values()],
            )
        except BaseException as exc:
            for item_id, (count, at) in usage.items():
                pending = self.pending.get(item_id, (0, at))
                self.pending[item_id] = (pending[0] + count, max(pending[1], at))
            if not isinstance(exc, asyncpg.TransactionRollbackError):
                raise
            logger.info("usage counters kept for the next apply: %s", type(exc).__name__)
