"""The types a WRITE is planned with (every store shares them): what a draft may do, one
planned step, the write policy's rules for one call (and what they decided), and the checks a
store makes inside its transaction. :mod:`~workers.memory.model.planning` plans with them."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal, Protocol

from workers.memory.model.contracts import HistoryEntry, MemoryDraft, MemoryItem, MemoryPatch

__all__ = ("NEW_RECORD", "Action", "WriteGuard", "WriteRules", "WriteStep")


Action = Literal["insert", "replace", "keep", "supersede", "contest", "quarantine", "merge"]
"""What one draft of a WRITE did (see :func:`plan_writes`), or ``merge``: sources added to
a record drafts repeat (:func:`~workers.memory.model.merges.plan_merges`)."""
NEW_RECORD: frozenset[Action] = frozenset({"insert", "supersede", "contest", "quarantine"})
"""The actions that store a new record (a store inserts their ``item``)."""


@dataclass(frozen=True, slots=True)
class WriteStep:
    """What one draft of a WRITE does: insert a new record, replace a stored one (upsert), keep
    a stored one unchanged (an idempotent replay), supersede the key's record with a new one,
    or store a new one beside it (contested or quarantined)."""

    action: Action
    item: MemoryItem
    """The draft's record as stored (the new one, for ``supersede``)."""
    entry: HistoryEntry | None
    """The history entry the step records (``None`` for a replay, which changes nothing)."""
    retired: MemoryItem | None = None
    """``supersede``: the key's former record, now ``superseded`` (to store over it)."""
    retired_entry: HistoryEntry | None = None
    """``supersede``: its history entry."""


@dataclass(slots=True)
class WriteRules:
    """How one WRITE call resolves its drafts under the write policy, and what it decided.

    One per call: :func:`plan_writes` fills :attr:`decided`, which the worker reads once the
    store has committed (a store that plans a batch again, after a failed group commit,
    overwrites the same positions).
    """

    supersede: frozenset[int] = frozenset()
    """Positions of drafts under an enforcing contradiction stage: a draft that changes its
    key's record supersedes it when its trust ranks at least as high, else it is stored beside
    it as ``contested``."""
    observe: frozenset[int] = frozenset()
    """Positions of drafts under an observing contradiction stage: written as without it, with
    what enforcing would have done in :attr:`observed`."""
    ranks: Mapping[str, int] = field(default_factory=dict)
    """Trust level -> rank, higher is more trusted."""
    default_trust: str | None = None
    """The level a record without one ranks as."""
    quarantined: frozenset[int] = frozenset()
    """Positions of drafts the safety stage holds for review: stored ``quarantined``, beside
    whatever their key holds."""
    decided: dict[int, tuple[Action, str | None]] = field(default_factory=dict)
    """Position -> what the draft did and the record it concerns (the one it replays, replaces,
    supersedes or contests; ``None`` for a plain insert)."""
    observed: dict[int, Action] = field(default_factory=dict)
    """Position -> what an enforcing contradiction stage would have done (``supersede`` or
    ``contest``), for drafts in :attr:`observe`."""
    contradicts: dict[int, tuple[str, int]] = field(default_factory=dict)
    """Position -> the id and version of the keyless record a keyless draft (in
    :attr:`supersede` or :attr:`observe`) contradicts, as the contradiction stage found it
    by content. The store reads it again in its transaction (:attr:`targets`) and the draft
    supersedes or contests it only if it is still that version, active and live — or, when
    an earlier draft of the same call superseded it, that draft's record (the drafts of a call
    are judged in order, as if written one after another)."""
    also: dict[int, tuple[tuple[str, int], ...]] = field(default_factory=dict)
    """Position -> the id and version of other keyless records the draft contradicts besides
    :attr:`contradicts`' (one subject stated twice in other words): a draft that supersedes
    its record supersedes these too, and one less trusted than any of them contests the most
    trusted."""
    also_retired: list[WriteStep] = field(default_factory=list)
    """Filled by the store's planning: the records of :attr:`also` a draft superseded, as
    ``merge`` steps (a new version, a ``supersede`` history entry) every store applies with
    the merges (:func:`~workers.memory.model.merges.plan_merges`)."""
    follows: dict[int, tuple[int, ...]] = field(default_factory=dict)
    """Position -> the earlier positions of the same call whose (keyless) drafts a keyless
    draft contradicts, found by content, latest first: the later one supersedes or contests
    the first of those records still active after its own step, as a second call would."""
    merges: dict[str, tuple[int, list[str]]] = field(default_factory=dict)
    """Record id -> the version the dedupe stage read and the sources of drafts it found to
    repeat that record (see :func:`~workers.memory.model.merges.plan_merges`)."""
    restated: dict[int, tuple[list[str], str | None]] = field(default_factory=dict)
    """Position -> the sources of the later drafts of the same write that repeat that draft
    (not written themselves), and the most trusted of their trust levels: the draft's record
    takes them (see :func:`~workers.memory.model.merges.restate`)."""
    confirmed: dict[str, str] = field(default_factory=dict)
    """Record id -> the trust of the most trusted draft repeating it, where that outranks the
    record's own: a fact a more trusted source states again is held at that trust (so a
    less trusted write can no longer supersede it)."""
    merged: dict[str, MemoryItem] = field(default_factory=dict)
    """Record id -> the record as a merge left it (filled by the store's planning)."""
    retired: dict[str, MemoryItem] = field(default_factory=dict)
    """Record id -> a record a draft superseded, as the write left it (filled by the store's
    planning)."""

    def rank(self, trust: str | None) -> int:
        return self.ranks.get(trust or self.default_trust or "", -1)

    @property
    def targets(self) -> list[str]:
        """The stored records, by id, a store reads (and locks) in its write transaction
        besides the drafts' keys: the ones drafts contradict or repeat; sorted, so two
        writers lock them in the same order."""
        also = {record_id for records in self.also.values() for record_id, _ in records}
        contradicted = {record_id for record_id, _ in self.contradicts.values()}
        return sorted(contradicted | also | set(self.merges))


class WriteGuard(Protocol):
    """Checks a store makes inside its write transaction, on the records as stored there, so
    nothing can change between a check and the write it allows (access control enforcing,
    retention). Each raises a coded :class:`MemoryStoreError` to refuse the whole call."""

    def check_write(self, stored: MemoryItem, draft: MemoryDraft) -> None:
        """A WRITE draft lands on ``stored`` (same key)."""

    def check_update(self, stored: MemoryItem, patch: MemoryPatch) -> None:
        """A patch applies to ``stored``."""

    def check_delete(self, stored: MemoryItem) -> bool:
        """Whether ``stored`` is deleted (``False``: left alone, not reported as deleted)."""
