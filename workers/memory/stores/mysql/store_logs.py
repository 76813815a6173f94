"""The MySQL store's ``HistoryLog`` and ``AuditLog`` capabilities: each method one call into
``logs``."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from workers.memory.model.contracts import AuditEntry, HistoryEntry
from workers.memory.model.records import to_micros
from workers.memory.ports import AuditEvent
from workers.memory.stores.mysql import logs
from workers.memory.stores.mysql.errors import mysql_errors
from workers.memory.stores.mysql.store_base import MysqlStoreBase

__all__ = ("MysqlLogs",)


class MysqlLogs(MysqlStoreBase):
    """History and audit of :class:`~workers.memory.stores.mysql.store.MysqlMemoryStore`."""

    async def history(self, id: str) -> list[HistoryEntry]:
        driver = await self._ready()
        async with mysql_errors():
            return await logs.history_of(driver, id)

    async def history_page(
        self, after: int, limit: int, *, namespace: str | None = None, key: str | None = None
    ) -> tuple[list[HistoryEntry], int]:
        driver = await self._ready()
        async with mysql_errors():
            return await logs.history_page(driver, after, limit, namespace, key)

    async def restore_history(self, entries: Sequence[HistoryEntry]) -> int:
        return await self._transaction(lambda db: logs.restore_history(db, entries))

    async def append_audit(self, events: Sequence[AuditEvent]) -> None:
        driver = await self._ready()
        async with mysql_errors():
            await logs.append_audit(driver, events)

    async def audit_log(
        self, *, after: int = 0, limit: int = 100, principal: str | None = None
    ) -> list[AuditEntry]:
        driver = await self._ready()
        async with mysql_errors():
            return await logs.read_audit(driver, after, limit, principal)

    async def purge_audit(self, before: datetime, *, dry_run: bool = False) -> int:
        driver = await self._ready()
        async with mysql_errors():
            return await logs.purge_audit(driver, to_micros(before), dry_run)
