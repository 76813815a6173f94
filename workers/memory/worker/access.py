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

import functools
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

import msgspec

from ditto.errors import DittoError, ErrorCode, InvalidInputError
from ditto.runtime.context import NodeContext
from workers.memory.model.contracts import (
    DEFAULT_NAMESPACE,
    DeleteInput,
    GetInput,
    MemoryDraft,
    MemoryFilter,
    MemoryItem,
    MemoryPatch,
    QueryInput,
    SearchInput,
    UpdateInput,
    Visibility,
    WriteInput,
)
from workers.memory.model.errors import MemoryStoreError, forbidden
from workers.memory.model.filters import is_visible
from workers.memory.model.records import Clock, now_from
from workers.memory.model.reviews import ReviewInput
from workers.memory.ports import AuditEvent, AuditLog, MemoryStore

T = TypeVar("T")

__all__ = ("HIDDEN", "OWNER_ONLY", "AccessControl", "AccessGuard", "AccessPolicy", "AclMode")

logger = logging.getLogger("ditto.workers.memory.access")

AclMode = Literal["off", "observe", "enforce"]
Decision = Literal["allow", "deny", "would-deny", "failed"]


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
    """The worker's decisions, all of them: who is calling, what they may see and touch, and
    the audit trail. The worker calls one method per node step; the store re-checks writes
    inside its transaction with the :class:`AccessGuard` that :meth:`guard` hands it.

    Raises:
        InvalidInputError: ``audit`` on a store without an audit log.
    """

    def __init__(
        self, policy: AccessPolicy, store: MemoryStore, *, audit: bool, clock: Clock
    ) -> None:
        if audit and not isinstance(store, AuditLog):
            raise InvalidInputError(
                f"audit needs a store with an audit log; {type(store).__name__} has none"
            )
        self.policy, self.store, self.clock = policy, store, clock
        self.log: AuditLog | None = store if audit and isinstance(store, AuditLog) else None
        self.checks = policy.mode != "off"
        self.enforcing = policy.mode == "enforce"
        self.silent = not self.checks and self.log is None
        """Neither checks nor audits: reads pass through untouched (callers may skip them)."""

    def principal(self, ctx: NodeContext) -> str | None:
        """The caller.

        Raises:
            MemoryStoreError: ``FORBIDDEN`` when enforcing and the call names no principal.
        """
        if self.enforcing and ctx.principal is None:
            raise forbidden("memory access control is enforced: invoke with a principal")
        return ctx.principal

    def guard(self, ctx: NodeContext) -> AccessGuard | None:
        """The guard a store write runs inside its transaction (when enforcing)."""
        return AccessGuard(ctx.principal) if self.enforcing else None

    def visible_filter(self, filter: MemoryFilter, principal: str | None) -> MemoryFilter:
        """``filter`` narrowed to what the caller may see (enforcing), applied inside the
        store and so before the limit.

        Raises:
            MemoryStoreError: ``FORBIDDEN`` when ``visible_to`` names another principal.
        """
        if not self.enforcing:
            return filter
        if filter.visible_to not in (None, principal):
            raise forbidden("visible_to can only name the calling principal")
        return msgspec.structs.replace(filter, visible_to=principal)

    async def reads(
        self, ctx: NodeContext, items: list[MemoryItem], principal: str | None
    ) -> list[MemoryItem]:
        """Apply (enforce) or report (observe) access control to the records a read returns,
        and audit what is returned."""
        if self.checks:
            hidden = [item.id for item in items if not _may_see(item, principal)]
            if hidden:
                await self.refuse(ctx, hidden, HIDDEN, read=True)
                if self.enforcing:
                    refused = set(hidden)
                    items = [item for item in items if item.id not in refused]
        await self.record_items(ctx, items)
        return items

    async def stamp(self, ctx: NodeContext, drafts: list[MemoryDraft]) -> list[MemoryDraft]:
        """Drafts with the caller as owner and the default visibility for new records (when
        access control is on); a draft naming another owner, or landing on a record the
        caller may not write, is refused."""
        if not self.checks:
            return drafts
        principal = self.principal(ctx)
        if any(d.owner is not None and d.owner != principal for d in drafts):
            await self.refuse(ctx, [], "a draft names another principal as its owner")
        by_namespace: dict[str, list[str]] = {}
        for draft in drafts:
            if draft.key is not None:
                by_namespace.setdefault(draft.namespace, []).append(draft.key)
        existing: dict[tuple[str, str | None], MemoryItem] = {}
        for namespace, keys in by_namespace.items():
            stored = await self.store.get([], keys, namespace)
            existing.update(((item.namespace, item.key), item) for item in stored)
        rules = AccessGuard(principal)
        await self.screen(
            ctx,
            [
                (held.id, rules.write_refusal(held, draft))
                for draft in drafts
                if (held := existing.get((draft.namespace, draft.key))) is not None
            ],
        )
        default = self.policy.default_visibility
        return [
            msgspec.structs.replace(
                draft,
                owner=draft.owner or principal,
                visibility=draft.visibility
                or (None if (draft.namespace, draft.key) in existing else default),
            )
            for draft in drafts
        ]

    async def screen_updates(self, ctx: NodeContext, patches: Sequence[MemoryPatch]) -> None:
        """Refuse (enforce) or report (observe) patches the caller may not apply."""
        if not self.checks:
            return
        rules = AccessGuard(self.principal(ctx))
        found = await self.store.get([patch.id for patch in patches], [], DEFAULT_NAMESPACE)
        stored = {item.id: item for item in found}
        await self.screen(
            ctx,
            [
                (patch.id, rules.update_refusal(stored[patch.id], patch))
                for patch in patches
                if patch.id in stored
            ],
        )

    def may_see(self, item: MemoryItem, principal: str | None) -> bool:
        """Whether ``principal`` may see ``item`` (always unless access control is enforced:
        observing, the call goes on and the screens report what enforcing would refuse)."""
        return not self.enforcing or _may_see(item, principal)

    async def screen_deletes(self, ctx: NodeContext, ids: Sequence[str]) -> None:
        """Refuse (enforce) or report (observe) deletes the caller may not make."""
        if not self.checks:
            return
        rules = AccessGuard(self.principal(ctx))
        found = await self.store.get(ids, [], DEFAULT_NAMESPACE)
        await self.screen(ctx, [(item.id, rules.delete_refusal(item)) for item in found])

    async def audited(self, ctx: NodeContext, writing: Awaitable[T], ids: Sequence[str]) -> T:
        """Await a store write; a refusal from inside its transaction is audited too."""
        try:
            return await writing
        except MemoryStoreError as exc:
            if exc.code == ErrorCode.FORBIDDEN:
                await self.record(ctx, ids, "deny", exc.message)
            raise

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
        decision: Decision = "allow",
        detail: str | None = None,
        *,
        keys: Sequence[str] = (),
        categories: Sequence[str] = (),
    ) -> None:
        """Append one audit entry (when the audit trail is on)."""
        if self.log is not None:
            event = AuditEvent(
                now_from(self.clock),
                ctx.principal,
                ctx.node,
                list(ids),
                decision,
                detail,
                list(dict.fromkeys(keys)),
                list(dict.fromkeys(categories)),
            )
            await self.log.append_audit([event])

    async def record_items(self, ctx: NodeContext, items: Sequence[MemoryItem]) -> None:
        """``allow`` for what a call read or wrote: ids, keys and categories."""
        if self.log is not None:
            await self.record(
                ctx,
                [item.id for item in items],
                keys=[item.key for item in items if item.key is not None],
                categories=[item.category for item in items],
            )

    def audit_failures(self, handler: Handler[T]) -> Handler[T]:
        """``handler`` whose failures are audited too (``failed``, with the code, and the ids,
        keys and categories the request named). Refusals are audited where they are made."""
        if self.log is None:
            return handler

        @functools.wraps(handler)
        async def run(request: Any, ctx: NodeContext) -> T:
            try:
                return await handler(request, ctx)
            except DittoError as exc:
                if exc.code != ErrorCode.FORBIDDEN:
                    await self._record_failure(ctx, request, exc)
                elif self.enforcing and ctx.principal is None:  # refused before any check
                    await self._record_failure(ctx, request, exc, "deny")
                raise

        return run

    async def _record_failure(
        self, ctx: NodeContext, request: Any, exc: DittoError, decision: Decision = "failed"
    ) -> None:
        ids, keys, categories = _named(request)
        try:
            detail = f"{exc.code}: {exc.message}"
            await self.record(ctx, ids, decision, detail, keys=keys, categories=categories)
        except Exception:  # the call's own error is what the caller must see
            logger.exception("auditing a failed %s call failed", ctx.node)


Handler = Callable[[Any, NodeContext], Awaitable[T]]


def _named(request: Any) -> tuple[list[str], list[str], list[str]]:
    """The record ids, keys and categories a node input names."""
    if isinstance(request, GetInput):
        return list(request.ids), list(request.keys), []
    if isinstance(request, WriteInput):
        drafts = request.memories
        return [], [d.key for d in drafts if d.key is not None], [d.category for d in drafts]
    if isinstance(request, UpdateInput):
        categories = [p.category for p in request.updates if isinstance(p.category, str)]
        return [patch.id for patch in request.updates], [], categories
    if isinstance(request, DeleteInput):
        return list(request.ids), [], []
    if isinstance(request, ReviewInput):
        return [decision.id for decision in request.decisions], [], []
    if isinstance(request, QueryInput | SearchInput):
        found = request.filter
        return [], [found.key] if found.key else [], [found.category] if found.category else []
    return [], [], []


OWNER_ONLY = "only the record's owner may change its visibility"


class AccessGuard:
    """The enforcement rules, in one place. The worker screens with the ``*_refusal`` methods
    before writing (to log and audit, also when observing); the store runs the ``check_*``
    methods inside its write transaction (a :class:`~workers.memory.model.planning.WriteGuard`), on
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

    review_refusal = delete_refusal
    """A review changes a record it sees (and the key's holder an accept supersedes)."""

    def check_write(self, stored: MemoryItem, draft: MemoryDraft) -> None:
        _raise(self.write_refusal(stored, draft))

    def check_update(self, stored: MemoryItem, patch: MemoryPatch) -> None:
        _raise(self.update_refusal(stored, patch))

    def check_delete(self, stored: MemoryItem) -> bool:
        _raise(self.delete_refusal(stored))
        return True

    def check_review(self, stored: MemoryItem) -> None:
        _raise(self.review_refusal(stored))


HIDDEN = "private records of another principal"


def _raise(reason: str | None) -> None:
    if reason is not None:
        raise forbidden(reason)


def _may_see(item: MemoryItem, principal: str | None) -> bool:
    if principal is None:  # an anonymous caller sees shared records only
        return item.visibility == "shared"
    return is_visible(item, principal)
