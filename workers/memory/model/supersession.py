"""Supersession, as every store plans it: a draft that changes a record's fact either
supersedes it (trust at least the record's: the old one is kept ``superseded`` with
``valid_to``) or is stored beside it ``contested`` (handbook §9: a verified fact is never
replaced by a lower-trust write); and the keyless drafts the contradiction stage matched by
content, to a stored record or to an earlier draft of the same call.

The drafts of one call are judged in order, as if each were written by a call of its own: a
draft contradicting a record an earlier draft of the call already superseded is judged
against that draft's record (the fact as it then stands), and a draft contradicting an
earlier draft's record supersedes or contests it. That record is new to the store: it is
stored already superseded (the later step carries its ``supersede`` history entry), so no
store ever updates a record its own transaction has not inserted yet."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, MutableSequence, Sequence
from datetime import datetime

import msgspec

from workers.memory.model.changes import history_entry, is_live, new_item
from workers.memory.model.contracts import MemoryDraft, MemoryItem
from workers.memory.model.errors import MemoryStoreError
from workers.memory.model.merges import with_sources
from workers.memory.model.records import canonical_json
from workers.memory.model.write_rules import WriteGuard, WriteRules, WriteStep

__all__ = ("plan_keyless", "replays", "retire", "supersede_or_contest")


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


def replays(draft: MemoryDraft, stored: MemoryItem) -> bool:
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


def supersede_or_contest(
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
            if record.status == "contested" and replays(draft, record):
                return WriteStep("keep", record, None)
        contested = msgspec.structs.replace(fresh, status="contested", contests=stored.id)
        return WriteStep("contest", contested, history_entry(contested, "create", now))
    began = stored.created_at if stored.valid_from is None else stored.valid_from
    if draft.valid_from is not None and draft.valid_from < began:
        # An older fact learned late ("lived in Oslo from 2020" about someone in Madrid since
        # 2022): it held until the stored one began, and the stored one still holds.
        past = msgspec.structs.replace(fresh, status="superseded", valid_to=began)
        return WriteStep("insert", past, history_entry(past, "create", now))
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


def plan_keyless(
    position: int,
    draft: MemoryDraft,
    steps: MutableSequence[WriteStep],
    targets: Mapping[str, MemoryItem],
    successors: dict[str, int],
    now: datetime,
    guard: WriteGuard | None,
    rules: WriteRules,
) -> WriteStep:
    """The step of a keyless draft the contradiction stage matched by content
    (``rules.contradicts`` or ``rules.follows``), given the steps of the call's earlier
    drafts (``steps[p]`` is position ``p``'s, changed in place when this draft supersedes its
    record) and ``successors`` (record id -> the position of the draft of this call that
    superseded it, updated here)."""
    held = _holder(position, draft, steps, targets, successors, now, guard, rules)
    if held is not None:
        record, earlier = held
        if position in rules.supersede:
            others = _others(position, draft, targets, now, guard, rules) if earlier is None else []
            mates = [
                steps[mate].item
                for mate in _mates(position, draft, steps, successors, now, guard, rules, earlier)
            ]
            strongest = max([record, *others, *mates], key=lambda item: rules.rank(item.trust))
            if rules.rank(draft.trust) < rules.rank(strongest.trust):
                record, others, mates = strongest, [], []  # contested against the most trusted
            step = supersede_or_contest(draft, record, (), now, rules)
            if step.retired is not None:
                successors[record.id] = position
                rules.retired[record.id] = step.retired
                if earlier is not None:  # a record of this call: stored already retired
                    steps[earlier] = dataclasses.replace(steps[earlier], item=step.retired)
                    step = dataclasses.replace(step, retired=None)
                for other in [*others, *mates]:  # the subject stated twice: both statements end
                    retired = retire(other, now, step.item.valid_from)
                    successors[other.id] = position
                    rules.retired[other.id] = retired
                    entry = history_entry(retired, "supersede", now)
                    rules.also_retired.append(WriteStep("merge", retired, entry))
            return step
        if position in rules.observe:
            would = supersede_or_contest(draft, record, (), now, rules).action
            if would != "insert":
                rules.observed[position] = would
    item = new_item(draft, now)
    return WriteStep("insert", item, history_entry(item, "create", now))


def _holder(
    position: int,
    draft: MemoryDraft,
    steps: Sequence[WriteStep],
    targets: Mapping[str, MemoryItem],
    successors: Mapping[str, int],
    now: datetime,
    guard: WriteGuard | None,
    rules: WriteRules,
) -> tuple[MemoryItem, int | None] | None:
    """The record ``draft`` lands on, and the position of the draft of this call that wrote
    it (``None``: a stored record), or ``None`` when the match no longer holds."""
    if position in rules.contradicts:
        record_id, version = rules.contradicts[position]
        stored = targets.get(record_id)
        if record_id in successors:  # an earlier draft of the call superseded it
            held = _latest(successors[record_id], draft, steps, successors, now, guard)
            if held is not None:
                return held
        elif (
            stored is not None
            and stored.version == version
            and stored.key is None
            and stored.namespace == draft.namespace
            and is_live(stored, now)
            and _may_land(guard, stored, draft)
        ):
            return _as_repeated(stored, rules), None
    for earlier in rules.follows.get(position, ()):
        held = _latest(earlier, draft, steps, successors, now, guard)
        if held is not None:
            return held
    return None


def _others(
    position: int,
    draft: MemoryDraft,
    targets: Mapping[str, MemoryItem],
    now: datetime,
    guard: WriteGuard | None,
    rules: WriteRules,
) -> list[MemoryItem]:
    """The other stored records the draft contradicts (``rules.also``) that still stand as
    the contradiction stage read them and that no earlier draft of the call retired."""
    found = []
    for record_id, version in rules.also.get(position, ()):
        stored = targets.get(record_id)
        if (
            stored is not None
            and record_id not in rules.retired
            and stored.version == version
            and stored.key is None
            and stored.namespace == draft.namespace
            and is_live(stored, now)
            and _may_land(guard, stored, draft)
        ):
            found.append(_as_repeated(stored, rules))
    return found


def _mates(
    position: int,
    draft: MemoryDraft,
    steps: Sequence[WriteStep],
    successors: Mapping[str, int],
    now: datetime,
    guard: WriteGuard | None,
    rules: WriteRules,
    chosen: int | None,
) -> list[int]:
    """The positions of the other earlier drafts of the call whose records the draft
    contradicts (``rules.follows``) and that still stand, besides ``chosen``'s."""
    mates: list[int] = []
    for earlier in rules.follows.get(position, ()):
        held = _latest(earlier, draft, steps, successors, now, guard)
        if held is not None and held[1] != chosen and held[1] not in mates:
            mates.append(held[1])
    return mates


def _as_repeated(stored: MemoryItem, rules: WriteRules) -> MemoryItem:
    """``stored`` as the drafts of this write that repeat it leave it before the draft that
    contradicts it (every repeat after that one contradicts it instead: see
    :mod:`~workers.memory.worker.write_order`): their sources added, its trust raised. A
    record superseded here keeps them (its merge is not planned apart)."""
    merge = rules.merges.get(stored.id)
    trust = rules.confirmed.get(stored.id)
    changes: dict[str, object] = {}
    if merge is not None and merge[0] == stored.version:
        changes["sources"] = with_sources(stored, merge[1])
    if trust is not None and rules.rank(trust) > rules.rank(stored.trust):
        changes["trust"] = trust
    return msgspec.structs.replace(stored, **changes) if changes else stored


def _latest(
    earlier: int,
    draft: MemoryDraft,
    steps: Sequence[WriteStep],
    successors: Mapping[str, int],
    now: datetime,
    guard: WriteGuard | None,
) -> tuple[MemoryItem, int] | None:
    """The record the draft at ``earlier`` wrote, or the one that superseded it in turn,
    while active (not contested, quarantined or a replay of a stored record)."""
    while (record := steps[earlier].item).id in successors:
        earlier = successors[record.id]
    if steps[earlier].action == "keep" or record.status != "active":
        return None
    if not is_live(record, now) or not _may_land(guard, record, draft):
        return None
    return record, earlier


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
