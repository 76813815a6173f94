"""The write policy as the WRITE node runs it: each draft's stage modes, its trust checked
against the scale, its category's expiry, the store's rules for the call — and, once the
store has committed, what the write did with each draft."""

from __future__ import annotations

import logging
from collections.abc import Sequence

import msgspec

from workers.memory.model.contracts import MemoryDraft, MemoryItem, PolicyOverride
from workers.memory.model.errors import MemoryStoreError
from workers.memory.model.outcomes import Outcome, WriteOutcome
from workers.memory.model.planning import Action, WriteRules
from workers.memory.policy.config import StageModes, WritePolicy

__all__ = ("WritePipeline",)

logger = logging.getLogger("ditto.memory.policy")

_OUTCOME: dict[Action, Outcome] = {
    "insert": "created",
    "replace": "updated",
    "keep": "deduplicated",
    "supersede": "superseded",
    "contest": "contested",
    "quarantine": "quarantined",
}


class WritePipeline:
    """Runs one worker's :class:`~workers.memory.policy.config.WritePolicy` around its writes.

    Args:
        policy: The policy (all stages ``off`` by default: writes behave as without it, and
            still report their outcomes).
    """

    def __init__(self, policy: WritePolicy) -> None:
        self.policy = policy
        self._levels = frozenset(policy.trust_levels)
        self._ranks = policy.ranks

    def prepare(
        self, drafts: Sequence[MemoryDraft], call: PolicyOverride | None
    ) -> tuple[list[MemoryDraft], WriteRules]:
        """The drafts as the store should write them, and the rules it plans them with.

        Raises:
            MemoryStoreError: ``INVALID_INPUT`` for a trust level off the scale (naming the
                draft and the scale).
        """
        policy = self.policy
        overrides = (
            None if call is None else StageModes(call.safety, call.dedupe, call.contradiction)
        )
        prepared: list[MemoryDraft] = []
        supersede: set[int] = set()
        observe: set[int] = set()
        for position, draft in enumerate(drafts):
            changes: dict[str, object] = {}
            if draft.trust is None:
                if policy.default_trust is not None:
                    changes["trust"] = policy.default_trust
            elif draft.trust not in self._levels:
                raise MemoryStoreError(
                    f"memories[{position}].trust must be one of: {', '.join(policy.trust_levels)}"
                )
            if draft.ttl is None and draft.expires_at is None:
                ttl = policy.category_ttl_s.get(draft.category)
                if ttl is not None:
                    changes["ttl"] = ttl
            prepared.append(msgspec.structs.replace(draft, **changes) if changes else draft)
            mode = policy.modes(draft.namespace, draft.category, overrides).contradiction
            if mode == "enforce":
                supersede.add(position)
            elif mode == "observe":
                observe.add(position)
        rules = WriteRules(
            supersede=frozenset(supersede),
            observe=frozenset(observe),
            ranks=self._ranks,
            default_trust=policy.default_trust,
        )
        return prepared, rules

    @staticmethod
    def outcomes(items: Sequence[MemoryItem], rules: WriteRules) -> list[WriteOutcome]:
        """What the write did with each draft (``rules`` as the store's plan left them)."""
        reported: list[WriteOutcome] = []
        for position, item in enumerate(items):
            action, related = rules.decided.get(position, ("insert", None))
            observed: list[Outcome] = []
            would = rules.observed.get(position)
            if would is not None:
                observed.append(_OUTCOME[would])
                logger.info(
                    "write policy (observe): record %s would have %s %s",
                    item.id,
                    "superseded" if would == "supersede" else "contested",
                    related,
                )
            reported.append(
                WriteOutcome(
                    [_OUTCOME[action]],
                    duplicate_of=related if action == "keep" else None,
                    supersedes=related if action == "supersede" else None,
                    contests=related if action == "contest" else None,
                    observed=observed,
                )
            )
        return reported
