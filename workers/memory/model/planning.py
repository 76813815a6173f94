"""WRITE planning every store shares: what each draft does to its key (insert, replace,
replay, supersede, or a record beside it, contested or quarantined) and the history each
change records. Stores do the I/O inside their transaction and call these to decide, so every
backend behaves the same (patches: :mod:`~workers.memory.model.patches`; the types:
:mod:`~workers.memory.model.write_rules`; supersession and the keyless drafts matched by
content: :mod:`~workers.memory.model.supersession`)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime

import msgspec

from workers.memory.model.changes import Change, expiry_of, history_entry, is_live, new_item
from workers.memory.model.contracts import HistoryEntry, MemoryDraft, MemoryItem, WriteMode
from workers.memory.model.errors import conflict
from workers.memory.model.merges import restate
from workers.memory.model.supersession import (
    plan_keyless,
    replays,
    retire,
    supersede_or_contest,
)
from workers.memory.model.write_rules import (
    NEW_RECORD,
    Action,
    WriteGuard,
    WriteRules,
    WriteStep,
)

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
    otherwise it is a plain insert (the match was about a record that has changed since). The
    drafts are judged in order, as if written one after another: a keyless draft that
    contradicts an earlier draft of the batch (``rules.follows``), or a record an earlier
    draft superseded, lands on that draft's record (see
    :mod:`~workers.memory.model.supersession`).

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
    successors: dict[str, int] = {}
    """Record id -> the position of the draft of this batch that superseded it."""
    if rules is not None:
        rules.retired.clear()  # a store planning a batch again (a failed group commit)
        rules.also_retired.clear()
    for position, draft in enumerate(drafts):
        if (
            draft.key is None
            and rules is not None
            and (position in rules.contradicts or position in rules.follows)
        ):
            step = plan_keyless(
                position, draft, steps, targets or {}, successors, now, guard, rules
            )
            if position in rules.restated:
                step = restate(step, position, rules, now)
            _decided(rules, position, step)
            steps.append(step)
            continue
        sharing = existing.get((draft.namespace, draft.key), ()) if draft.key is not None else ()
        stored = next((record for record in sharing if record.status == "active"), None)
        if stored is not None and guard is not None:
            guard.check_write(stored, draft)  # replays too: they return the stored record
        step = _plan_one(position, draft, mode, stored, sharing, now, rules)
        if rules is not None:
            if position in rules.restated:
                step = restate(step, position, rules, now)
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
    if step.action == "supersede":
        return step.item.supersedes
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
            if record.status == "quarantined" and replays(draft, record):
                return WriteStep("keep", record, None)
        held = msgspec.structs.replace(new_item(draft, now), status="quarantined")
        return WriteStep("quarantine", held, history_entry(held, "create", now))
    expired = stored is not None and stored.expires_at is not None and stored.expires_at <= now
    if stored is None:
        item = new_item(draft, now)
        return WriteStep("insert", item, history_entry(item, "create", now))
    if not expired and replays(draft, stored):
        return WriteStep("keep", stored, None)
    if rules is not None and not expired:
        if position in rules.supersede:
            return supersede_or_contest(draft, stored, sharing, now, rules)
        if position in rules.observe:
            would = supersede_or_contest(draft, stored, sharing, now, rules).action
            if would != "insert":  # an older fact stored as history changes nothing
                rules.observed[position] = "contest" if would == "keep" else would
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
