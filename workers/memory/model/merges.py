"""Sources accumulating on a record the dedupe stage found stated again: a duplicate is not a
new record, but who stated the fact is provenance worth keeping. A record's ``sources`` are the
other sources that stated its fact, in the order first seen, never its own ``source``, the
newest :data:`MAX_SOURCES` kept. Every store plans the merges of a WRITE here, in its write
transaction, on the records as it reads them there."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from datetime import datetime

import msgspec

from workers.memory.model.changes import history_entry, is_live
from workers.memory.model.contracts import MemoryItem, MemoryPatch
from workers.memory.model.errors import MemoryStoreError
from workers.memory.model.write_rules import NEW_RECORD, WriteGuard, WriteRules, WriteStep

__all__ = ("MAX_SOURCES", "plan_merges", "restate", "with_sources")

MAX_SOURCES = 32
"""The most sources a record keeps beside its own: a fact a thousand chat turns repeat names
the latest of them, not all."""


def with_sources(item: MemoryItem, sources: Sequence[str]) -> list[str]:
    """``item.sources`` with the ``sources`` it does not name yet added, in the order first
    seen (never ``item.source`` itself); the newest :data:`MAX_SOURCES` are kept."""
    known = {item.source, *item.sources}
    added = [source for source in dict.fromkeys(sources) if source not in known]
    return [*item.sources, *added][-MAX_SOURCES:] if added else list(item.sources)


def plan_merges(
    targets: Mapping[str, MemoryItem],
    rules: WriteRules,
    steps: Sequence[WriteStep],
    now: datetime,
    guard: WriteGuard | None = None,
) -> list[WriteStep]:
    """The ``merge`` steps of a WRITE: each record in ``rules.merges`` with the sources of the
    drafts that repeat it added, and its trust raised to ``rules.confirmed``'s where that
    outranks it (a new version and a ``merge`` history entry), after
    ``steps`` (the drafts' own, which may retire one of them). ``rules.merged`` receives every
    such record as it stands after the write.

    A record that changed since the dedupe stage read it (another version), is no longer live,
    is retired or replaced by this write or is refused by ``guard`` takes no sources: they
    were stated about what it said then (and a merge built on the version it replaces would
    undo the replacement). One whose sources already hold them all is left as it is.
    """
    rules.merged.clear()  # a store planning a batch again (a failed group commit) starts over
    changed = {step.retired.id for step in steps if step.retired is not None}
    changed.update(rules.retired)  # records of rules.also included
    changed.update(step.item.id for step in steps if step.action == "replace")
    merges: list[WriteStep] = list(rules.also_retired)
    for record_id, (version, sources) in sorted(rules.merges.items()):
        stored = targets.get(record_id)
        if (
            stored is None
            or stored.version != version
            or record_id in changed
            or not _takes_sources(stored, now)
            or not _may_change(guard, stored)
        ):
            continue
        merged = with_sources(stored, sources)
        trust = rules.confirmed.get(record_id)
        if trust is None or rules.rank(trust) <= rules.rank(stored.trust):
            trust = stored.trust
        if merged == stored.sources and trust == stored.trust:
            rules.merged[record_id] = stored
            continue
        item = msgspec.structs.replace(
            stored, sources=merged, trust=trust, updated_at=now, version=stored.version + 1
        )
        rules.merged[record_id] = item
        merges.append(WriteStep("merge", item, history_entry(item, "merge", now)))
    return merges


def restate(step: WriteStep, position: int, rules: WriteRules, now: datetime) -> WriteStep:
    """``step`` with the record it stores as the later drafts of the same write that repeat
    it leave it (``rules.restated``): their sources added, its trust raised to the most
    trusted of them where that outranks it. Steps that store no new record are unchanged."""
    sources, trust = rules.restated[position]
    if step.action not in NEW_RECORD:
        return step
    item = step.item
    raised = trust if trust is not None and rules.rank(trust) > rules.rank(item.trust) else None
    merged = with_sources(item, sources)
    if raised is None and merged == item.sources:
        return step
    item = msgspec.structs.replace(item, sources=merged, trust=raised or item.trust)
    return dataclasses.replace(step, item=item, entry=history_entry(item, "create", now))


def _takes_sources(stored: MemoryItem, now: datetime) -> bool:
    """Live, or a claim waiting for review (stated again, it gathers the sources too)."""
    if stored.status == "contested":
        stored = msgspec.structs.replace(stored, status="active")
    return is_live(stored, now)


def _may_change(guard: WriteGuard | None, stored: MemoryItem) -> bool:
    if guard is None:
        return True
    try:
        guard.check_update(stored, MemoryPatch(stored.id))
    except MemoryStoreError:
        return False
    return True
