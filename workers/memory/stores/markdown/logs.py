"""The Markdown store's ``HistoryLog`` and ``AuditLog``: ``.ditto/history.jsonl`` and
``.ditto/audit.jsonl``, one JSON entry a line, appended only (a purge of the audit log rewrites
it at once), so they read well in ``git log -p``."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

import msgspec

from workers.memory.model.contracts import AuditEntry, HistoryEntry
from workers.memory.ports import AuditEvent, AuditLog, HistoryLog
from workers.memory.stores.markdown.base import MarkdownBase
from workers.memory.stores.markdown.files import append_lines, atomic_write
from workers.memory.stores.markdown.state import clone_entry

__all__ = ("MarkdownLogs",)

_encode = msgspec.json.Encoder()


class MarkdownLogs(MarkdownBase, HistoryLog, AuditLog):
    """History and audit of :class:`~workers.memory.stores.markdown.MarkdownMemoryStore`."""

    async def history(self, id: str) -> list[HistoryEntry]:
        return await self._run(
            lambda: [clone_entry(e) for e in self._folder.history.entries if e.id == id]
        )

    async def history_page(
        self, after: int, limit: int, *, namespace: str | None = None, key: str | None = None
    ) -> tuple[list[HistoryEntry], int]:
        def page() -> tuple[list[HistoryEntry], int]:
            # Positions are line numbers of the log: append order, as in the SQL stores.
            log = self._folder.history.entries
            held = None
            if key is not None:
                held = {
                    entry.id
                    for entry in log
                    if entry.record.key == key and namespace in (None, entry.record.namespace)
                }
            chosen: list[HistoryEntry] = []
            position = after
            for position in range(after, len(log)):
                entry = log[position]
                if held is not None and entry.id not in held:
                    continue
                if namespace is None or entry.record.namespace == namespace:
                    chosen.append(clone_entry(entry))
                    if len(chosen) == limit:
                        return chosen, position + 1
            return chosen, max(after, len(log))

        return await self._run(page)

    async def restore_history(self, entries: Sequence[HistoryEntry]) -> int:
        def restore() -> int:
            held = {(e.id, e.version, e.change) for e in self._folder.history.entries}
            added = []
            for entry in entries:
                if (entry.id, entry.version, entry.change) not in held:
                    held.add((entry.id, entry.version, entry.change))
                    added.append(entry)
            if added:
                self._folder.save([], added)
            return len(added)

        return await self._run(restore, writes=True)

    async def append_audit(self, events: Sequence[AuditEvent]) -> None:
        def append() -> None:
            log = self._folder.audit
            log.refresh()
            seq = log.entries[-1].seq if log.entries else 0
            entries = [
                AuditEntry(
                    seq + number,
                    event.at,
                    event.principal,
                    event.node,
                    list(event.ids),
                    event.decision,
                    event.detail,
                    list(event.keys),
                    list(event.categories),
                )
                for number, event in enumerate(events, start=1)
            ]
            log.path.parent.mkdir(parents=True, exist_ok=True)
            append_lines(log.path, [_encode.encode(entry) + b"\n" for entry in entries])
            log.mark_appended(entries, log.path.stat().st_size)

        await self._run(append, writes=True)

    async def audit_log(
        self, *, after: int = 0, limit: int = 100, principal: str | None = None
    ) -> list[AuditEntry]:
        def read() -> list[AuditEntry]:
            self._folder.audit.refresh()
            chosen = []
            for entry in self._folder.audit.entries:
                if entry.seq > after and principal in (None, entry.principal):
                    chosen.append(entry)
                    if len(chosen) == limit:
                        break
            return chosen

        return await self._run(read)

    async def purge_audit(self, before: datetime, *, dry_run: bool = False) -> int:
        def purge() -> int:
            log = self._folder.audit
            log.refresh()
            kept = [entry for entry in log.entries if entry.at >= before]
            purged = len(log.entries) - len(kept)
            if purged and not dry_run:
                atomic_write(log.path, b"".join(_encode.encode(e) + b"\n" for e in kept))
                log.reset()
            return purged

        return await self._run(purge, writes=True)
