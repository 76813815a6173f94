"""The in-process store's ``HistoryLog`` and ``AuditLog`` capabilities."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from itertools import islice

import msgspec

from workers.memory.model.contracts import AuditEntry, HistoryEntry
from workers.memory.ports import AuditEvent
from workers.memory.stores.inprocess.state import InProcessState, clone_entry

__all__ = ("InProcessLogs",)


class InProcessLogs(InProcessState):
    """History and audit of :class:`~workers.memory.stores.inprocess.InProcessMemoryStore`."""

    async def history(self, id: str) -> list[HistoryEntry]:
        return [clone_entry(entry) for entry in self._history.get(id, [])]

    async def history_page(
        self, after: int, limit: int, *, namespace: str | None = None, key: str | None = None
    ) -> tuple[list[HistoryEntry], int]:
        # No global log here: positions count entries record by record (first-seen order).
        held = {
            id
            for id, log in self._history.items()
            if key is not None
            and any(e.record.key == key and namespace in (None, e.record.namespace) for e in log)
        }
        page: list[HistoryEntry] = []
        position = 0
        for id, log in self._history.items():
            for entry in log:
                position += 1
                if position <= after or (key is not None and id not in held):
                    continue
                if namespace is None or entry.record.namespace == namespace:
                    page.append(clone_entry(entry))
                    if len(page) == limit:
                        return page, position
        return page, position

    async def restore_history(self, entries: Sequence[HistoryEntry]) -> int:
        added = 0
        for entry in entries:
            log = self._history.setdefault(entry.id, [])
            if not any((e.version, e.change) == (entry.version, entry.change) for e in log):
                log.append(clone_entry(entry))
                added += 1
        return added

    async def append_audit(self, events: Sequence[AuditEvent]) -> None:
        for event in events:
            self._audit_seq += 1
            self._audit.append(
                AuditEntry(
                    self._audit_seq,
                    event.at,
                    event.principal,
                    event.node,
                    list(event.ids),
                    event.decision,
                    event.detail,
                    list(event.keys),
                    list(event.categories),
                )
            )

    async def audit_log(
        self, *, after: int = 0, limit: int = 100, principal: str | None = None
    ) -> list[AuditEntry]:
        entries = (
            entry
            for entry in self._audit
            if entry.seq > after and (principal is None or entry.principal == principal)
        )
        return [
            msgspec.structs.replace(
                entry, ids=list(entry.ids), keys=list(entry.keys), categories=list(entry.categories)
            )
            for entry in islice(entries, limit)
        ]

    async def purge_audit(self, before: datetime, *, dry_run: bool = False) -> int:
        kept = [entry for entry in self._audit if entry.at >= before]
        purged = len(self._audit) - len(kept)
        if not dry_run:
            self._audit = kept
        return purged
