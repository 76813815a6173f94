"""The MEMORY review node: ``REVIEW``, a person's decisions on the records the write policy
held back (contested and quarantined), screened by access control and audited."""

from __future__ import annotations

from ditto.runtime.context import NodeContext
from workers.memory.model.contracts import DEFAULT_NAMESPACE
from workers.memory.model.errors import MemoryStoreError, not_found
from workers.memory.model.review_plan import keys_to_review
from workers.memory.model.reviews import ReviewInput, ReviewOutcome, ReviewOutput
from workers.memory.model.validation import check_input
from workers.memory.worker.access import AccessGuard
from workers.memory.worker.boundary import check_items, off_contract
from workers.memory.worker.node_base import NodeBase

__all__ = ("ReviewNodes",)


class ReviewNodes(NodeBase):
    """The handler of ``MEMORY.REVIEW``."""

    async def review(self, request: ReviewInput, ctx: NodeContext) -> ReviewOutput:
        """Accept or reject contested and quarantined records, all or none, as
        :meth:`~workers.memory.ports.MemoryStore.review` does; the calling principal is the
        reviewer its history entries name. Under access control the reviewer must see every
        record the review changes (``FORBIDDEN``); the audit trail gets one ``allow`` entry per
        kind of decision, naming the records (and the holders an accept superseded)."""
        self._start_hygiene()
        check_input(request)
        ids = [decision.id for decision in request.decisions]
        if len(set(ids)) != len(ids):
            raise MemoryStoreError("an id appears twice in one REVIEW")
        if not ids:
            return ReviewOutput([])
        principal = self.access.principal(ctx)
        if request.namespace is not None or self.access.checks:
            await self._screen(ctx, request, ids, principal)
        reviewing = self.store.review(request.decisions, principal, self.access.guard(ctx))
        items = check_items(await self.access.audited(ctx, reviewing, ids), "REVIEW output")
        if [item.id for item in items] != ids or any(
            decision.decision == "accept" and item.status != "active"
            for decision, item in zip(request.decisions, items, strict=True)
        ):
            raise off_contract("REVIEW must return each reviewed record once, in order")
        outcomes = [
            ReviewOutcome(decision.id, decision.decision, item)
            for decision, item in zip(request.decisions, items, strict=True)
        ]
        await self._audit(ctx, outcomes)
        return ReviewOutput(outcomes)

    async def _screen(
        self, ctx: NodeContext, request: ReviewInput, ids: list[str], principal: str | None
    ) -> None:
        """Refuse ids outside the request's namespace (``NOT_FOUND``, as a missing one: never
        a hint that the record exists elsewhere), then what access control refuses (or, in
        observe mode, reports) of the records the review changes: those it decides, and the
        holders accepted records supersede. A record's namespace never changes, so this read is
        safe to make before the store's transaction, whose guard checks again."""
        found = check_items(
            await self.store.get(ids, [], DEFAULT_NAMESPACE), "GET output", unique=False
        )
        stored = {item.id: item for item in found}
        if request.namespace is not None:
            for item_id in ids:
                held = stored.get(item_id)
                if held is None or held.namespace != request.namespace:
                    raise not_found(
                        f"no record with id {item_id!r} in namespace {request.namespace!r}"
                    )
        if self.access.checks:
            changed = [stored[item_id] for item_id in ids if item_id in stored]
            # An accept also changes its key's holder (it supersedes it).
            for namespace, key in keys_to_review(request.decisions, stored):
                holders = await self.store.get([], [key], namespace)
                changed += [
                    item
                    for item in check_items(holders, "GET output", unique=False)
                    if item.status == "active" and (item.namespace, item.key) == (namespace, key)
                ]
            rules = AccessGuard(principal)
            await self.access.screen(
                ctx, [(item.id, rules.review_refusal(item)) for item in changed]
            )

    async def _audit(self, ctx: NodeContext, outcomes: list[ReviewOutcome]) -> None:
        """One ``allow`` entry per kind of decision: what was accepted (and the holders it
        superseded), what was rejected."""
        for verdict in ("accept", "reject"):
            decided = [outcome.record for outcome in outcomes if outcome.decision == verdict]
            if not decided:
                continue
            superseded = [
                item.supersedes for item in decided if verdict == "accept" and item.supersedes
            ]
            detail = verdict if not superseded else f"{verdict}; superseded {', '.join(superseded)}"
            await self.access.record(
                ctx,
                [*(item.id for item in decided), *superseded],
                "allow",
                detail,
                keys=[item.key for item in decided if item.key is not None],
                categories=[item.category for item in decided],
            )
