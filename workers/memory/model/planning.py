"""WRITE planning every store shares: what each draft does to its key (insert, replace,
replay, supersede, or a record beside it, contested or quarantined) and the history each
change records. Stores do the I/O inside their transaction and call these to decide, so every
backend behaves the same (patches: :mod:`~workers.memory.model.patches`)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal, Protocol

import msgspec

from workers.memory.model.changes import Change, expiry_of, history_entry, is_live, new_item
from workers.memory.model.contracts import (
    HistoryEntry,
    MemoryDraft,
    MemoryItem,
    MemoryPatch,
    WriteMode,
)
from workers.memory.model.errors import MemoryStoreError, conflict
from workers.memory.model.records import canonical_json

__all__ = (
    "NEW_RECORD",
    "Action",
    "Change",
    "WriteGuard",
    "WriteRules",
    "WriteStep",
    "expiry_of",
    "history_entry",
    "history_of",
    "is_live",
    "new_item",
    "plan_writes",
    "retire",
)


def _draft_fields(draft: MemoryDraft | MemoryItem) -> bytes:
    return canonical_json(
        [
            draft.content,
            draft.summary,
            draft.category,
            draft.tags,
            draft.metadata,
            draft.source,
        ]
    )


def _replays(draft: MemoryDraft, stored: MemoryItem) -> bool:
    """Whether writing ``draft`` over ``stored`` would change nothing (``None`` flags keep the
    stored value, so they never differ). A ``ttl`` does not count: the same draft written again
    replays its record rather than conflicting (or refreshing its expiry); the writing
    principal is provenance, not a field a rerun changes."""
    return (
        _draft_fields(draft) == _draft_fields(stored)
        and draft.pinned in (None, stored.pinned)
        and draft.visibility in (None, stored.visibility)
        and draft.trust in (None, stored.trust)
        and draft.expires_at in (None, stored.expires_at)
        and draft.valid_from in (None, stored.valid_from)
    )


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
    supersedes or contests it only if it is still that version, active and live."""
    merges: dict[str, tuple[int, list[str]]] = field(default_factory=dict)
    """Record id -> the version the dedupe stage read and the sources of drafts it found to
    repeat that record (see :func:`~workers.memory.model.merges.plan_merges`)."""
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
        return sorted({record_id for record_id, _ in self.contradicts.values()} | set(self.merges))


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


def plan_writes(
    drafts: Iterable[MemoryDraft],
    mode: WriteMode,
    existing: Mapping[tuple[str, str], Sequence[MemoryItem]],
    now: datetime,
    guard: WriteGuard | None = None,
    rules: WriteRules | None = None,
    targets: Mapping[str, MemoryItem] | None = None,
) -> list[WriteStep]:
    """Decide every draft of a batch against the records already stored under its key (or,
    for a keyless draft in ``rules.contradicts``, the record it contradicts).

    ``create``: a key with identical fields replays the stored record; any difference is
    ``CONFLICT`` (and the caller rolls the whole batch back). ``upsert``: a key replaces the
    stored record's fields, keeping ``id``, ``created_at`` and usage statistics and bumping
    ``version`` (an identical draft is a replay, not a new version). An upsert keeps the owner
    (ownership never moves with a write), keeps ``pinned``, ``visibility``, ``trust``,
    ``valid_from`` and the expiry unless the draft sets them, and revives an archived record.
    A key whose record has expired takes a new one in either mode (the expired record is
    replaced, as by an upsert).

    A draft in ``rules.supersede`` (either mode) that changes its key's live record never
    overwrites it: with trust ranking at least the record's, the draft becomes a new active
    record that ``supersedes`` it, and the old one is kept ``superseded`` with ``valid_to``;
    with lower trust, the draft is stored ``contested`` beside it and the record stays as it
    is (handbook §9: a verified fact is never replaced by a lower-trust write). A draft equal
    to a contested record of its key replays that record. A keyless draft the contradiction
    stage matched by content to a keyless record does the same to that record, when it is
    still the version the stage read, active and live and the guard lets the draft land on it;
    otherwise it is a plain insert (the match was about a record that has changed since).

    Args:
        drafts: The batch, keys unique within it.
        mode: ``create`` or ``upsert``.
        existing: Every record stored under each key the batch names (any status).
        now: The write's time.
        guard: Checked on the key's active record before a draft lands on it.
        rules: The write policy's rules for this call, which also receive the decisions.
        targets: The records :attr:`WriteRules.targets` names, as stored now (missing ones:
            deleted since).

    Raises:
        MemoryStoreError: ``CONFLICT`` for a changed record under an existing key in create mode
            (unless the draft is in ``rules.supersede``).
    """
    steps: list[WriteStep] = []
    if rules is not None:
        rules.retired.clear()  # a store planning a batch again (a failed group commit)
    for position, draft in enumerate(drafts):
        if draft.key is None and rules is not None and position in rules.contradicts:
            step = _plan_contradiction(position, draft, targets or {}, now, guard, rules)
            _decided(rules, position, step)
            steps.append(step)
            continue
        sharing = existing.get((draft.namespace, draft.key), ()) if draft.key is not None else ()
        stored = next((record for record in sharing if record.status == "active"), None)
        if stored is not None and guard is not None:
            guard.check_write(stored, draft)  # replays too: they return the stored record
        step = _plan_one(position, draft, mode, stored, sharing, now, rules)
        if rules is not None:
            _decided(rules, position, step)
        steps.append(step)
    return steps


def _decided(rules: WriteRules, position: int, step: WriteStep) -> None:
    rules.decided[position] = (step.action, _related(step))
    if step.retired is not None:
        rules.retired[step.retired.id] = step.retired


def history_of(steps: Iterable[WriteStep]) -> list[HistoryEntry]:
    """The history entries a planned batch records, in order (a retired record's first)."""
    entries: list[HistoryEntry] = []
    for step in steps:
        if step.retired_entry is not None:
            entries.append(step.retired_entry)
        if step.entry is not None:
            entries.append(step.entry)
    return entries


def _related(step: WriteStep) -> str | None:
    """The stored record a step concerns besides its own new one, if any."""
    if step.action in ("keep", "replace"):
        return step.item.id
    if step.retired is not None:
        return step.retired.id
    return step.item.contests


def _plan_one(
    position: int,
    draft: MemoryDraft,
    mode: WriteMode,
    stored: MemoryItem | None,
    sharing: Sequence[MemoryItem],
    now: datetime,
    rules: WriteRules | None,
) -> WriteStep:
    if rules is not None and position in rules.quarantined:
        for record in sharing:
            if record.status == "quarantined" and _replays(draft, record):
                return WriteStep("keep", record, None)
        held = msgspec.structs.replace(new_item(draft, now), status="quarantined")
        return WriteStep("quarantine", held, history_entry(held, "create", now))
    expired = stored is not None and stored.expires_at is not None and stored.expires_at <= now
    if stored is None:
        item = new_item(draft, now)
        return WriteStep("insert", item, history_entry(item, "create", now))
    if not expired and _replays(draft, stored):
        return WriteStep("keep", stored, None)
    if rules is not None and not expired:
        if position in rules.supersede:
            return _supersede_or_contest(draft, stored, sharing, now, rules)
        if position in rules.observe:
            would = _supersede_or_contest(draft, stored, sharing, now, rules)
            rules.observed[position] = "contest" if would.action == "keep" else would.action
    if mode == "create" and not expired:
        raise conflict(
            f"key {draft.key!r} in namespace {draft.namespace!r} already holds a different "
            "record; use mode='upsert' to replace it or MEMORY.UPDATE to change it"
        )
    replaced = msgspec.structs.replace(
        stored,
        content=draft.content,
        summary=draft.summary,
        category=draft.category,
        tags=list(draft.tags),
        metadata=dict(draft.metadata),
        source=draft.source,
        updated_at=now,
        version=stored.version + 1,
        pinned=stored.pinned if draft.pinned is None else draft.pinned,
        visibility=draft.visibility or stored.visibility,
        archived_at=None,
        trust=stored.trust if draft.trust is None else draft.trust,
        principal=stored.principal if draft.principal is None else draft.principal,
        valid_from=stored.valid_from if draft.valid_from is None else draft.valid_from,
        # An expired record's expiry is over: the new one has the draft's, if any.
        expires_at=stored.expires_at
        if not expired and draft.ttl is None and draft.expires_at is None
        else expiry_of(draft, now),
    )
    return WriteStep("replace", replaced, history_entry(replaced, "upsert", now))


def _plan_contradiction(
    position: int,
    draft: MemoryDraft,
    targets: Mapping[str, MemoryItem],
    now: datetime,
    guard: WriteGuard | None,
    rules: WriteRules,
) -> WriteStep:
    """A keyless draft the contradiction stage matched to a keyless record by content."""
    record_id, version = rules.contradicts[position]
    stored = targets.get(record_id)
    if (
        stored is not None
        and record_id not in rules.retired  # an earlier draft of the batch retired it
        and stored.version == version
        and stored.key is None
        and stored.namespace == draft.namespace
        and is_live(stored, now)
        and _may_land(guard, stored, draft)
    ):
        if position in rules.supersede:
            return _supersede_or_contest(draft, stored, (), now, rules)
        if position in rules.observe:
            rules.observed[position] = _supersede_or_contest(draft, stored, (), now, rules).action
    item = new_item(draft, now)
    return WriteStep("insert", item, history_entry(item, "create", now))


def _may_land(guard: WriteGuard | None, stored: MemoryItem, draft: MemoryDraft) -> bool:
    """Whether the guard lets ``draft`` land on ``stored`` (a record it matched by content,
    not one it named: a refusal means no match, not a failed write)."""
    if guard is None:
        return True
    try:
        guard.check_write(stored, draft)
    except MemoryStoreError:
        return False
    return True


def _supersede_or_contest(
    draft: MemoryDraft,
    stored: MemoryItem,
    sharing: Sequence[MemoryItem],
    now: datetime,
    rules: WriteRules,
) -> WriteStep:
    # The new record inherits what the draft leaves unset, as an upsert would.
    fresh = new_item(
        msgspec.structs.replace(
            draft,
            pinned=stored.pinned if draft.pinned is None else draft.pinned,
            visibility=draft.visibility or stored.visibility,
            owner=draft.owner if draft.owner is not None else stored.owner,
        ),
        now,
    )
    if rules.rank(draft.trust) < rules.rank(stored.trust):
        for record in sharing:
            if record.status == "contested" and _replays(draft, record):
                return WriteStep("keep", record, None)
        contested = msgspec.structs.replace(fresh, status="contested", contests=stored.id)
        return WriteStep("contest", contested, history_entry(contested, "create", now))
    successor = msgspec.structs.replace(fresh, supersedes=stored.id)
    retired = retire(stored, now, successor.valid_from)
    return WriteStep(
        "supersede",
        successor,
        history_entry(successor, "create", now),
        retired,
        history_entry(retired, "supersede", now),
    )


def retire(stored: MemoryItem, now: datetime, until: datetime | None = None) -> MemoryItem:
    """``stored`` superseded at ``now``: it gives its key up and stays, no longer true, for
    history and ``as_of`` reads (a new version). It was true until ``until`` — when its
    successor states that it became true (its ``valid_from``) — else until ``now``; a
    successor dated before ``stored`` became true does not shorten it below nothing."""
    end = now
    if until is not None and (stored.valid_from is None or until >= stored.valid_from):
        end = until
    return msgspec.structs.replace(
        stored, status="superseded", valid_to=end, updated_at=now, version=stored.version + 1
    )
