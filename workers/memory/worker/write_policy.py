"""The write policy as the WRITE node runs it: each draft's stage modes, its trust checked
against the scale, its category's expiry, the safety stage (redact, reject or quarantine what
it finds), the store's rules for the call — and, once the store has committed, what the write
did with each draft."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import msgspec

from workers.memory.model.contracts import MemoryDraft, MemoryItem, PolicyOverride
from workers.memory.model.errors import MemoryStoreError
from workers.memory.model.outcomes import Outcome, WriteOutcome
from workers.memory.model.planning import Action, WriteRules
from workers.memory.policy.config import StageModes, WritePolicy
from workers.memory.policy.safety import SafetyScanner, UnsafeContentError, decide, redact_json
from workers.memory.policy.safety_rules import SafetyAction

__all__ = ("PreparedWrite", "WritePipeline")

logger = logging.getLogger("ditto.memory.policy")

_OUTCOME: dict[Action, Outcome] = {
    "insert": "created",
    "replace": "updated",
    "keep": "deduplicated",
    "supersede": "superseded",
    "contest": "contested",
    "quarantine": "quarantined",
}
_SCANNED = ("content", "summary", "tags", "metadata", "source")
"""The draft fields the safety stage reads (not ``key``: an identifier a caller chooses)."""


@dataclass(slots=True)
class PreparedWrite:
    """One WRITE call's drafts as the store should write them, its rules, and what the safety
    stage found (reported with the outcomes)."""

    drafts: list[MemoryDraft]
    rules: WriteRules
    found: dict[int, dict[str, int]] = field(default_factory=dict)
    """Position -> kinds found and their counts (never the values)."""
    redacted: set[int] = field(default_factory=set)
    observed: dict[int, list[Outcome]] = field(default_factory=dict)
    """Position -> what an observing safety stage would have done."""


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
        self._scanner: SafetyScanner | None = None
        """Compiled on the first write the safety stage reads (compiling costs milliseconds)."""

    def prepare(self, drafts: Sequence[MemoryDraft], call: PolicyOverride | None) -> PreparedWrite:
        """The drafts as the store should write them, and the rules it plans them with.

        Raises:
            MemoryStoreError: ``INVALID_INPUT`` for a trust level off the scale (naming the
                draft and the scale).
            UnsafeContentError: ``UNSAFE_CONTENT``: the enforcing safety stage found a kind
                whose action is ``reject`` (naming kinds, never values); nothing is written.
        """
        policy = self.policy
        overrides = (
            None if call is None else StageModes(call.safety, call.dedupe, call.contradiction)
        )
        rules = WriteRules(ranks=self._ranks, default_trust=policy.default_trust)
        prepared = PreparedWrite([], rules)
        supersede: set[int] = set()
        observe: set[int] = set()
        quarantined: set[int] = set()
        for position, draft in enumerate(drafts):
            changes: dict[str, Any] = {}
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
            modes = policy.modes(draft.namespace, draft.category, overrides)
            if modes.safety != "off":
                hold = self._screen(position, draft, modes.safety == "enforce", changes, prepared)
                if hold:
                    quarantined.add(position)
            prepared.drafts.append(msgspec.structs.replace(draft, **changes) if changes else draft)
            if modes.contradiction == "enforce":
                supersede.add(position)
            elif modes.contradiction == "observe":
                observe.add(position)
        rules.supersede = frozenset(supersede)
        rules.observe = frozenset(observe)
        rules.quarantined = frozenset(quarantined)
        return prepared

    def _screen(
        self,
        position: int,
        draft: MemoryDraft,
        enforcing: bool,
        changes: dict[str, Any],
        prepared: PreparedWrite,
    ) -> bool:
        """Run the safety stage on one draft: record what it found, and when enforcing put the
        redacted fields in ``changes`` (or refuse the write). Whether to quarantine it."""
        rules = self.policy.safety
        if self._scanner is None:
            self._scanner = SafetyScanner(rules)
        fields = {name: getattr(draft, name) for name in _SCANNED}
        found = self._scanner.scan_json(fields)
        if not found:
            return False
        verdict = decide([finding for _, finding in found], rules)
        prepared.found[position] = dict(verdict.counts)
        # A quarantined draft keeps its injection as written (a person reviews it), but not a
        # secret beside it: every finding whose kind redacts is redacted either way.
        redactable = [
            (path, finding)
            for path, finding in found
            if rules.action_for(finding.kind) is SafetyAction.REDACT
        ]
        if not enforcing:
            would: list[Outcome] = []
            if verdict.action is SafetyAction.QUARANTINE:
                would.append("quarantined")
            if redactable:
                would.append("redacted")
            prepared.observed[position] = would
            logger.info(
                "write policy (observe): memories[%d] holds %s (would %s)",
                position,
                ", ".join(f"{kind} x{count}" for kind, count in sorted(verdict.counts.items())),
                verdict.action.value,
            )
            return False
        if verdict.action is SafetyAction.REJECT:
            raise UnsafeContentError(verdict.kinds, verdict.counts)
        if redactable:
            clean = redact_json(fields, redactable)
            changes.update({name: clean[name] for name in _SCANNED if clean[name] != fields[name]})
            prepared.redacted.add(position)
        return verdict.action is SafetyAction.QUARANTINE

    @staticmethod
    def outcomes(items: Sequence[MemoryItem], prepared: PreparedWrite) -> list[WriteOutcome]:
        """What the write did with each draft (``prepared.rules`` as the store left them)."""
        rules = prepared.rules
        reported: list[WriteOutcome] = []
        for position, item in enumerate(items):
            action, related = rules.decided.get(position, ("insert", None))
            outcome: list[Outcome] = [_OUTCOME[action]]
            if position in prepared.redacted:
                outcome.append("redacted")
            observed = list(prepared.observed.get(position, ()))
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
                    outcome,
                    duplicate_of=related if action == "keep" else None,
                    supersedes=related if action == "supersede" else None,
                    contests=related if action == "contest" else None,
                    safety=prepared.found.get(position, {}),
                    observed=observed,
                )
            )
        return reported
