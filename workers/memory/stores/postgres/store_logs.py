"""The PostgreSQL store's ``HistoryLog`` and ``AuditLog`` capabilities: each method one call
into ``logs``."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from workers.memory.model.contracts import AuditEntry, HistoryEntry
from workers.memory.model.records import to_micros
from workers.memory.ports import AuditEvent
from workers.memory.stores.postgres import logs
from workers.memory.stores.postgres.errors import postgres_errors
from workers.memory.stores.postgres.store_base import PostgresStoreBase

__all__ = ("PostgresLogs",)


class PostgresLogs(PostgresStoreBase):
    """History and audit of :class:`~workers.memory.stores.postgres.store.PostgresMemoryStore`."""

    async def history(self, id: str) -> list[HistoryEntry]:
        pool = await self._ready()
        async with postgres_errors():
            return await logs.history_of(pool, self._s, id)

    async def history_page(
        self, after: int, limit: int, *, namespace: str | None = None, key: str | None = None
    ) -> tuple[list[HistoryEntry], int]:
        pool = await self._ready()
        async with postgres_errors():
            return await logs.history_page(pool, self._s, after, limit, namespace, key)

    async def restore_history(self, entries: Sequence[HistoryEntry]) -> int:
        async with self._connection(transaction=True) as connection:
            return await logs.restore_history(connection, self._s, entries)

    async def append_audit(self, events: Sequence[AuditEvent]) -> None:
        pool = await self._ready()
        async with postgres_errors():
            await logs.append_audit(pool, self._s, events)

    async def audit_log(
        self, *, after: int = 0, limit: int = 100, principal: str | None = None
    ) -> list[AuditEntry]:
        pool = await self._ready()
        async with postgres_errors():
            return await logs.read_audit(pool, self._s, after, limit, principal)

    async def purge_audit(self, before: datetime, *, dry_run: bool = False) -> int:
        pool = await self._ready()
        async with postgres_errors():
            return await logs.purge_audit(pool, self._s, to_micros(before), dry_run)
