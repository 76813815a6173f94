"""The write policy's safety stage beyond a WRITE's content: the identifiers a caller chooses
(never redacted: a kind found there refuses the write) and the new text of an UPDATE (an update
is a write, screened by the stage of the record's namespace and category)."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence

import msgspec

from workers.memory.model.contracts import MemoryDraft, MemoryItem, MemoryPatch
from workers.memory.policy.config import WritePolicy, stricter
from workers.memory.policy.safety import SafetyScanner, UnsafeContentError, decide, redact_json
from workers.memory.policy.safety_rules import SafetyAction

__all__ = ("SafetyStage",)

logger = logging.getLogger("ditto.memory.policy")

_PATCHED = ("content", "summary", "tags", "metadata")
"""The fields of an UPDATE's patch the safety stage reads and may redact."""
_NAMES = ("key", "namespace", "category")
"""A draft's identifiers: read too, but never redacted (a redacted key would name another
record), so a kind found there that is not allowed refuses the write."""
_GUESSES = frozenset({"high_entropy"})
"""Kinds found by a guess, not a format: ids and hashes are what keys are made of
("user-3f2a9c1e-8b7d-…", "session/2026-12-03/turn-17"), so they do not refuse an identifier."""
_CLEAN_KEPT = 4096
"""Identifiers found clean that are not scanned again (namespaces and categories repeat)."""


class SafetyStage:
    """One worker's safety stage: its scanner (compiled on first use) and the screening of
    identifiers and updates.

    Args:
        policy: The worker's write policy (its modes and safety rules).
    """

    def __init__(self, policy: WritePolicy) -> None:
        self.policy = policy
        self._scanner: SafetyScanner | None = None
        self._clean: set[str] = set()

    def scanner(self) -> SafetyScanner:
        """The scanner, compiled on first use (compiling costs milliseconds)."""
        if self._scanner is None:
            self._scanner = SafetyScanner(self.policy.safety)
        return self._scanner

    def screen_names(
        self, label: str, draft: MemoryDraft | None, enforcing: bool, category: str | None = None
    ) -> None:
        """Refuse a write whose identifiers (a draft's ``key``, ``namespace`` and ``category``,
        or a patch's new ``category``) hold a kind whose action is not ``allow``: they cannot
        be redacted, and must not be stored as given. Observing, it logs what it found."""
        rules = self.policy.safety
        names = [category] if draft is None else [getattr(draft, name) for name in _NAMES]
        found = []
        for name in names:
            if not name or name in self._clean:
                continue
            held = [
                finding
                for finding in self.scanner().scan(name)
                if finding.kind not in _GUESSES
                and rules.action_for(finding.kind) is not SafetyAction.ALLOW
            ]
            if held:
                found += held
            else:
                if len(self._clean) >= _CLEAN_KEPT:
                    self._clean.clear()
                self._clean.add(name)
        if not found:
            return
        verdict = decide(found, rules)
        if enforcing:
            raise UnsafeContentError(verdict.kinds, verdict.counts)
        logger.info(
            "write policy (observe): %s names a record with %s (would refuse the write)",
            label,
            ", ".join(sorted(verdict.kinds)),
        )

    def screen_patches(
        self, patches: Sequence[MemoryPatch], records: Mapping[str, MemoryItem]
    ) -> list[MemoryPatch]:
        """An UPDATE's patches through the safety stage of each record's namespace and (new)
        category: what it redacts is redacted; a kind whose action is ``reject`` — or
        ``quarantine``: an edit of a stored record cannot be held back for review as a new
        record is — refuses the whole UPDATE (``UNSAFE_CONTENT``, naming kinds only).
        Observing, it logs what it would do. A patch of an unknown record is left as given.
        """
        screened = []
        for position, patch in enumerate(patches):
            record = records.get(patch.id)
            fields = {
                name: getattr(patch, name)
                for name in _PATCHED
                if getattr(patch, name) is not msgspec.UNSET
            }
            new_category = None if patch.category is msgspec.UNSET else patch.category
            if record is None or not (fields or new_category):
                screened.append(patch)
                continue
            # The stricter of the record's category and its new one: moving a record out of
            # an enforced category must not carry new text past the stage.
            mode = stricter(
                self.policy.modes(record.namespace, record.category).safety,
                self.policy.modes(record.namespace, new_category or record.category).safety,
            )
            if mode == "off":
                screened.append(patch)
                continue
            enforcing = mode == "enforce"
            self.screen_names(f"updates[{position}]", None, enforcing, new_category)
            found = self.scanner().scan_json(fields)
            if not found:
                screened.append(patch)
                continue
            rules = self.policy.safety
            verdict = decide([finding for _, finding in found], rules)
            if not enforcing:
                logger.info(
                    "write policy (observe): updates[%d] holds %s (would %s)",
                    position,
                    ", ".join(f"{kind} x{n}" for kind, n in sorted(verdict.counts.items())),
                    verdict.action.value,
                )
                screened.append(patch)
                continue
            if verdict.action in (SafetyAction.REJECT, SafetyAction.QUARANTINE):
                raise UnsafeContentError(verdict.kinds, verdict.counts)
            redactable = [
                (path, finding)
                for path, finding in found
                if rules.action_for(finding.kind) is SafetyAction.REDACT
            ]
            clean = redact_json(fields, redactable) if redactable else fields
            changed = {name: clean[name] for name in fields if clean[name] != fields[name]}
            screened.append(msgspec.structs.replace(patch, **changed) if changed else patch)
        return screened

    @property
    def screens_updates(self) -> bool:
        """Whether an UPDATE can meet a safety stage that is not off (else skip reading)."""
        every = (self.policy.stages, *self.policy.namespaces.values())
        every += tuple(self.policy.categories.values())
        return any(modes.safety not in (None, "off") for modes in every)
