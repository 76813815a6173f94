"""Access control and the audit trail of the MEMORY worker.

With ``mode="enforce"`` every call needs a principal (``runtime.invoke(..., principal=...)``);
new records are stamped with it as their owner and get a visibility (``private`` by default);
reads only see shared records and the principal's own, filtered inside the store before the
limit; writes to another principal's private record are ``FORBIDDEN``. ``mode="observe"``
stamps records the same way but refuses nothing: it logs (and audits as ``would-deny``) every
decision enforcement would have refused, so a deployment can see what turning it on would
break. ``mode="off"`` (the default) checks nothing.

The audit trail, when on, appends one entry per decision to the store's append-only log:
``allow`` for what a call read or wrote, ``deny`` or ``would-deny`` for what it was refused.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import msgspec

from ditto.errors import InvalidInputError
from ditto.runtime.context import NodeContext
from workers.memory.contracts import MemoryDraft, MemoryItem, MemoryPatch, Visibility
from workers.memory.errors import forbidden
from workers.memory.filters import is_visible
from workers.memory.ports import AuditEvent, MemoryStore
from workers.memory.records import Clock, now_from

__all__ = ("HIDDEN", "OWNER_ONLY", "AccessControl", "AccessGuard", "AccessPolicy", "AclMode")

logger = logging.getLogger("ditto.workers.memory.access")

AclMode = Literal["off", "observe", "enforce"]


@dataclass(frozen=True, slots=True)
class AccessPolicy:
    """How the MEMORY worker checks principals.

    Args:
        mode: ``off`` (default), ``observe`` (log what would be refused) or ``enforce``.
        default_visibility: Visibility of a new record whose draft gives none (under
            ``observe`` and ``enforce``; with ``off`` new records are ``shared``).
    """

    mode: AclMode = "off"
    default_visibility: Visibility = "private"

    def __post_init__(self) -> None:
        if self.mode not in ("off", "observe", "enforce"):
            raise InvalidInputError("acl mode must be off, observe or enforce")
        if self.default_visibility not in ("private", "shared"):
            raise InvalidInputError("default_visibility must be private or shared")


class AccessControl:
    """The worker's decisions: who is calling, what they may touch, and the audit trail."""

    def __init__(
        self, policy: AccessPolicy, store: MemoryStore, *, audit: bool, clock: Clock
    ) -> None:
        self.policy = policy
        self.store = store
        self.audit = audit
        self.clock = clock
        self.checks = policy.mode != "off"
        self.enforcing = policy.mode == "enforce"

    def principal(self, ctx: NodeContext) -> str | None:
        """The caller.

        Raises:
            MemoryStoreError: ``FORBIDDEN`` when enforcing and the call names no principal.
        """
        if self.enforcing and ctx.principal is None:
            raise forbidden("memory access control is enforced: invoke with a principal")
        return ctx.principal

    @staticmethod
    def hidden(items: Sequence[MemoryItem], principal: str | None) -> list[str]:
        """Ids of the records of ``items`` that ``principal`` may not see (another principal's
        private records)."""
        return [item.id for item in items if not _may_see(item, principal)]

    async def screen(self, ctx: NodeContext, refusals: Sequence[tuple[str, str | None]]) -> None:
        """Act on the ``(record id, reason or None)`` pairs of a write the worker is about to
        make: each refused group goes through :meth:`refuse` (raising when enforcing)."""
        by_reason: dict[str, list[str]] = {}
        for item_id, reason in refusals:
            if reason is not None:
                by_reason.setdefault(reason, []).append(item_id)
        for reason, ids in by_reason.items():
            await self.refuse(ctx, ids, reason)

    async def refuse(
        self, ctx: NodeContext, ids: Sequence[str], reason: str, *, read: bool = False
    ) -> None:
        """A decision enforcement refuses, audited either way. Enforcing, a write raises
        ``FORBIDDEN`` and a read just leaves the records out (the caller drops them); observing,
        it is logged and the call goes on.

        Raises:
            MemoryStoreError: ``FORBIDDEN`` (enforcing a write).
        """
        if self.enforcing:
            await self.record(ctx, ids, "deny", reason)
            if not read:
                raise forbidden(reason)
            return
        logger.warning(
            "memory access control (observe) would deny %s to %r on %d record(s): %s",
            ctx.node,
            ctx.principal,
            len(ids),
            reason,
        )
        await self.record(ctx, ids, "would-deny", reason)

    async def record(
        self,
        ctx: NodeContext,
        ids: Sequence[str],
        decision: Literal["allow", "deny", "would-deny"] = "allow",
        detail: str | None = None,
    ) -> None:
        """Append one audit entry (when the audit trail is on)."""
        if self.audit:
            event = AuditEvent(
                now_from(self.clock), ctx.principal, ctx.node, list(ids), decision, detail
            )
            await self.store.append_audit([event])


OWNER_ONLY = "only the record's owner may change its visibility"


class AccessGuard:
    """The enforcement rules, in one place. The worker screens with the ``*_refusal`` methods
    before writing (to log and audit, also when observing); the store runs the ``check_*``
    methods inside its write transaction (a :class:`~workers.memory.records.WriteGuard`), on
    the records as the transaction reads them, so a concurrent change — a record made private,
    a key taken — cannot slip between check and write."""

    __slots__ = ("principal",)

    def __init__(self, principal: str | None) -> None:
        self.principal = principal

    def write_refusal(self, stored: MemoryItem, draft: MemoryDraft) -> str | None:
        """Why a draft may not land on ``stored`` (same key), or ``None``."""
        if not _may_see(stored, self.principal):
            return HIDDEN
        if draft.visibility not in (None, stored.visibility) and stored.owner != self.principal:
            return OWNER_ONLY
        return None

    def update_refusal(self, stored: MemoryItem, patch: MemoryPatch) -> str | None:
        if not _may_see(stored, self.principal):
            return HIDDEN
        if patch.visibility is not msgspec.UNSET and stored.owner != self.principal:
            return OWNER_ONLY
        return None

    def delete_refusal(self, stored: MemoryItem) -> str | None:
        return None if _may_see(stored, self.principal) else HIDDEN

    def check_write(self, stored: MemoryItem, draft: MemoryDraft) -> None:
        _raise(self.write_refusal(stored, draft))

    def check_update(self, stored: MemoryItem, patch: MemoryPatch) -> None:
        _raise(self.update_refusal(stored, patch))

    def check_delete(self, stored: MemoryItem) -> bool:
        _raise(self.delete_refusal(stored))
        return True


HIDDEN = "private records of another principal"


def _raise(reason: str | None) -> None:
    if reason is not None:
        raise forbidden(reason)


def _may_see(item: MemoryItem, principal: str | None) -> bool:
    if principal is None:  # an anonymous caller sees shared records only
        return item.visibility == "shared"
    return is_visible(item, principal)
