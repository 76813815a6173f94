"""Capability: an append-only audit log of access decisions."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal

from workers.memory.model.contracts import AuditEntry

__all__ = ("AuditEvent", "AuditLog")


@dataclass(frozen=True, slots=True)
class AuditEvent:
    """An audit entry before the store numbers it (see :class:`AuditEntry`)."""

    at: datetime
    principal: str | None
    node: str
    ids: Sequence[str]
    decision: Literal["allow", "deny", "would-deny", "failed"]
    detail: str | None = field(default=None)
    keys: Sequence[str] = ()
    categories: Sequence[str] = ()


class AuditLog(ABC):
    """Append-only, numbered entries: who read or wrote what, or was refused it."""

    @abstractmethod
    async def append_audit(self, events: Sequence[AuditEvent]) -> None:
        """Append ``events`` in order; each gets the next ``seq``."""

    @abstractmethod
    async def audit_log(
        self, *, after: int = 0, limit: int = 100, principal: str | None = None
    ) -> list[AuditEntry]:
        """Entries with ``seq > after``, oldest first.

        Args:
            after: The last ``seq`` already seen.
            limit: Most entries returned.
            principal: Only this principal's entries.

        Returns:
            Every decision appended before the call, in order.
        """

    @abstractmethod
    async def purge_audit(self, before: datetime, *, dry_run: bool = False) -> int:
        """Delete entries older than ``before`` (the audit retention rule).

        Returns:
            How many were (or, with ``dry_run``, would be) deleted.
        """
