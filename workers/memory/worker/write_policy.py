"""The write policy as the WRITE node runs it: each draft's stage modes, its trust checked
against the scale, its category's expiry, the safety stage (redact, reject or quarantine what
it finds), dedupe (a draft stating a fact the namespace holds is not written again), the
store's rules for the drafts it writes — and, once the store has committed, what the write did
with each draft."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import msgspec

from workers.memory.model.contracts import MemoryDraft, MemoryItem, PolicyOverride
from workers.memory.model.errors import MemoryStoreError
from workers.memory.model.outcomes import Outcome, WriteOutcome
from workers.memory.model.planning import Action, WriteRules
from workers.memory.policy.config import StageModes, WritePolicy
from workers.memory.policy.safety import UnsafeContentError, decide, redact_json
from workers.memory.policy.safety_rules import SafetyAction
from workers.memory.policy.similarity import Signature
from workers.memory.ports import MemoryStore
from workers.memory.worker.dedupe import Duplicates
from workers.memory.worker.safety_stage import SafetyStage
from workers.memory.worker.write_order import settle_in_order

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
"""The draft fields the safety stage reads and may redact."""


@dataclass(slots=True)
class PreparedWrite:
    """One WRITE call's drafts as the store should write them, its rules, and what the stages
    found (reported with the outcomes). Positions are the call's draft positions."""

    drafts: list[MemoryDraft]
    """Every draft of the call, as the stages left it."""
    rules: WriteRules
    """The store's rules, over :attr:`to_write` (the drafts the store is handed)."""
    written: list[int] = field(default_factory=list)
    """The positions of the drafts the store writes, in order."""
    duplicates: dict[int, MemoryItem] = field(default_factory=dict)
    """Position -> the stored record an enforcing dedupe stage found it repeats."""
    repeats: dict[int, int] = field(default_factory=dict)
    """Position -> the earlier position of the same call whose text it repeats (or nearly)."""
    contradicts: dict[int, MemoryItem] = field(default_factory=dict)
    """Position -> the keyless record a keyless draft contradicts (found by content)."""
    also: dict[int, list[MemoryItem]] = field(default_factory=dict)
    """Position -> other keyless records the draft contradicts (see ``Matches.also``)."""
    follows: dict[int, list[int]] = field(default_factory=dict)
    """Position -> the earlier positions of the call whose drafts a keyless draft
    contradicts, latest first."""
    prints: dict[int, tuple[str, Signature]] = field(default_factory=dict)
    found: dict[int, dict[str, int]] = field(default_factory=dict)
    """Position -> kinds found and their counts (never the values)."""
    redacted: set[int] = field(default_factory=set)
    observed: dict[int, list[Outcome]] = field(default_factory=dict)
    """Position -> what observing stages would have done."""

    @property
    def to_write(self) -> list[MemoryDraft]:
        return [self.drafts[position] for position in self.written]


class WritePipeline:
    """Runs one worker's :class:`~workers.memory.policy.config.WritePolicy` around its writes.

    Args:
        policy: The policy (all stages ``off`` by default: writes behave as without it, and
            still report their outcomes).
    """

    def __init__(self, policy: WritePolicy, store: MemoryStore) -> None:
        self.policy = policy
        self.duplicates = Duplicates(store)
        self._levels = frozenset(policy.trust_levels)
        self._ranks = policy.ranks
        self.safety = SafetyStage(policy)
        self._plain = (
            not policy.active and policy.default_trust is None and not policy.category_ttl_s
        )
        """Nothing configured changes a draft: only a call's own modes or trust need a look."""

    async def prepare(
        self,
        drafts: Sequence[MemoryDraft],
        call: PolicyOverride | None,
        now: datetime,
        visible_to: str | None = None,
    ) -> PreparedWrite:
        """The drafts as the store should write them, and the rules it plans them with
        (``visible_to``: a duplicate must be visible to this principal, under access control).

        Raises:
            MemoryStoreError: ``INVALID_INPUT`` for a trust level off the scale (naming the
                draft and the scale).
            UnsafeContentError: ``UNSAFE_CONTENT``: the enforcing safety stage found a kind
                whose action is ``reject`` (naming kinds, never values); nothing is written.
        """
        policy = self.policy
        rules = WriteRules(ranks=self._ranks, default_trust=policy.default_trust)
        if self._plain and call is None:  # the common case, on every write: nothing to do
            for position, draft in enumerate(drafts):
                self._check_trust(position, draft)
            return PreparedWrite(list(drafts), rules, list(range(len(drafts))))
        overrides = (
            None if call is None else StageModes(call.safety, call.dedupe, call.contradiction)
        )
        prepared = PreparedWrite([], rules)
        supersede: set[int] = set()
        observe: set[int] = set()
        quarantined: set[int] = set()
        dedupe: dict[int, bool] = {}
        """Position -> whether dedupe enforces (absent: off) for keyless drafts."""
        contradict: set[int] = set()
        """Positions of keyless drafts a contradiction stage (enforcing or observing) reads."""
        for position, draft in enumerate(drafts):
            changes: dict[str, Any] = {}
            self._check_trust(position, draft)
            if draft.trust is None and policy.default_trust is not None:
                changes["trust"] = policy.default_trust
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
            # Keyed drafts are deduped and contradicted by their key already (an equal one
            # replays it, another value supersedes or contests it).
            if draft.key is None and position not in quarantined:
                if modes.dedupe != "off":
                    dedupe[position] = modes.dedupe == "enforce"
                if modes.contradiction != "off":
                    contradict.add(position)
        if dedupe or contradict:
            await self._match(dedupe, contradict, supersede, prepared, now, visible_to)
        skipped = prepared.duplicates.keys() | prepared.repeats.keys()
        prepared.written = [position for position in range(len(drafts)) if position not in skipped]
        place = {position: index for index, position in enumerate(prepared.written)}
        rules.supersede = frozenset(place[p] for p in supersede if p in place)
        rules.observe = frozenset(place[p] for p in observe if p in place)
        rules.quarantined = frozenset(place[p] for p in quarantined if p in place)
        rules.contradicts = {
            place[position]: (item.id, item.version)
            for position, item in prepared.contradicts.items()
            if position in place
        }
        rules.also = {
            place[position]: tuple((item.id, item.version) for item in items)
            for position, items in prepared.also.items()
            if position in place
        }
        rules.follows = {
            place[position]: tuple(place[earlier] for earlier in earlier_ones if earlier in place)
            for position, earlier_ones in prepared.follows.items()
            if position in place
        }
        rules.merges = self._merges(prepared, rules)
        rules.restated = self._restated(prepared, rules, place)
        return prepared

    def _check_trust(self, position: int, draft: MemoryDraft) -> None:
        """Raises ``INVALID_INPUT`` for a trust level off the scale, naming the scale."""
        if draft.trust is not None and draft.trust not in self._levels:
            raise MemoryStoreError(
                f"memories[{position}].trust must be one of: {', '.join(self.policy.trust_levels)}"
            )

    async def _match(
        self,
        dedupe: dict[int, bool],
        contradict: set[int],
        superseding: set[int],
        prepared: PreparedWrite,
        now: datetime,
        visible_to: str | None,
    ) -> None:
        """Match the keyless drafts to the records their namespace holds: duplicates at
        ``dedupe``'s positions (enforced ones are not written, observed ones are reported),
        and the record each draft at ``contradict``'s positions contradicts (``superseding``:
        those whose stage enforces), settled in the call's order."""
        checked = [(position, prepared.drafts[position]) for position in dedupe.keys() | contradict]
        found = await self.duplicates.find(sorted(checked), now, visible_to, contradict)
        prepared.prints = found.prints
        # A claim waiting for review stated again, no more trusted than it was: a repeat of
        # that claim (not a second one contesting the same record).
        matched = found.duplicates.keys() | found.repeats.keys()
        unmatched = [(p, d) for p, d in checked if p in dedupe and p not in matched]
        claims = await self.duplicates.claims(unmatched, found.prints, now, visible_to)
        rank = prepared.rules.rank
        for position, claim in claims.items():
            if rank(prepared.drafts[position].trust) <= rank(claim.trust):
                found.duplicates[position] = claim  # settle_in_order drops what it contests
        # Every draft contradicting a record is judged against it, in the call's order (the
        # store's planning sends a later one to the record an earlier one superseded it with).
        deduped = {position for position, enforced in dedupe.items() if enforced}
        settle_in_order(found, prepared.drafts, rank, deduped, superseding, now)
        prepared.contradicts = found.contradicts
        prepared.also = {p: found.also[p] for p in found.contradicts.keys() & found.also.keys()}
        prepared.follows = found.follows
        for position, item in found.duplicates.items():
            if dedupe.get(position):
                prepared.duplicates[position] = item
            elif position in dedupe:
                prepared.observed.setdefault(position, []).append("deduplicated")
        for position, earlier in found.repeats.items():
            if dedupe.get(position):
                prepared.repeats[position] = earlier
            elif position in dedupe:
                prepared.observed.setdefault(position, []).append("deduplicated")

    @staticmethod
    def _merges(prepared: PreparedWrite, rules: WriteRules) -> dict[str, tuple[int, list[str]]]:
        """Record id -> its version and the sources of the drafts that repeat it (directly,
        or by repeating a draft of the same write that does); the most trusted of those
        drafts that outranks the record goes in ``rules.confirmed``."""
        merges: dict[str, tuple[int, list[str]]] = {}
        repeated = [
            (position, prepared.duplicates.get(earlier))
            for position, earlier in prepared.repeats.items()
        ]
        for position, item in [*prepared.duplicates.items(), *repeated]:
            if item is None:
                continue
            draft = prepared.drafts[position]
            if draft.source is not None:
                merges.setdefault(item.id, (item.version, []))[1].append(draft.source)
            best = rules.confirmed.get(item.id, item.trust)
            if draft.trust is not None and rules.rank(draft.trust) > rules.rank(best):
                rules.confirmed[item.id] = draft.trust
                merges.setdefault(item.id, (item.version, []))
        return merges

    @staticmethod
    def _restated(
        prepared: PreparedWrite, rules: WriteRules, place: dict[int, int]
    ) -> dict[int, tuple[list[str], str | None]]:
        """Written position -> the sources and the most trusted level of the later drafts of
        the call that repeat that draft (a draft, not a stored record: those merge)."""
        restated: dict[int, tuple[list[str], str | None]] = {}
        for position, earlier in sorted(prepared.repeats.items()):
            if earlier in prepared.duplicates or earlier not in place:
                continue
            draft = prepared.drafts[position]
            first = prepared.drafts[earlier].trust
            sources, best = restated.get(place[earlier], ([], first))
            if draft.source is not None:
                sources.append(draft.source)
            if draft.trust is not None and rules.rank(draft.trust) > rules.rank(best):
                best = draft.trust
            restated[place[earlier]] = (sources, best)
        return restated

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
        scanner = self.safety.scanner()
        self.safety.screen_names(f"memories[{position}]", draft, enforcing)
        fields = {name: getattr(draft, name) for name in _SCANNED}
        found = scanner.scan_json(fields)
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

    def finish(
        self, written: Sequence[MemoryItem], prepared: PreparedWrite
    ) -> tuple[list[MemoryItem], list[WriteOutcome]]:
        """Every draft's record and outcome, in the call's order, from the records the store
        wrote (one per :attr:`PreparedWrite.written` position) and the duplicates found; the
        records written are added to the dedupe index."""
        rules = prepared.rules
        items = {
            position: rules.merged.get(item.id, item)
            for position, item in prepared.duplicates.items()
        }
        reported: dict[int, WriteOutcome] = {}
        learned: list[tuple[MemoryItem, tuple[str, Signature]]] = []
        settled: list[MemoryItem] = []
        for index, (position, item) in enumerate(zip(prepared.written, written, strict=True)):
            items[position] = item
            action, related = rules.decided.get(index, ("insert", None))
            outcome: list[Outcome] = [_OUTCOME[action]]
            if position in prepared.redacted:
                outcome.append("redacted")
            observed = list(prepared.observed.get(position, ()))
            would = rules.observed.get(index)
            if would is not None:
                observed.append(_OUTCOME[would])
                logger.info(
                    "write policy (observe): record %s would have %s %s",
                    item.id,
                    "superseded" if would == "supersede" else "contested",
                    related,
                )
            reported[position] = WriteOutcome(
                outcome,
                duplicate_of=related if action == "keep" else None,
                supersedes=related if action == "supersede" else None,
                contests=related if action == "contest" else None,
                safety=prepared.found.get(position, {}),
                observed=observed,
            )
            if action != "keep" and position in prepared.prints:
                learned.append((item, prepared.prints[position]))
            elif action != "keep":  # keyed or quarantined: the index holds it as it stands
                settled.append(item)
        self.duplicates.learn(learned)
        self.duplicates.settle([*settled, *rules.merged.values(), *rules.retired.values()])
        for position, item in prepared.duplicates.items():
            reported[position] = WriteOutcome(
                ["deduplicated"], duplicate_of=item.id, safety=prepared.found.get(position, {})
            )
        for position, earlier in sorted(prepared.repeats.items()):
            items[position] = items[earlier]
            reported[position] = WriteOutcome(
                ["deduplicated"],
                duplicate_of=items[earlier].id,
                safety=prepared.found.get(position, {}),
            )
        count = len(prepared.drafts)
        return [items[p] for p in range(count)], [reported[p] for p in range(count)]
