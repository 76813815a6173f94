"""REVIEW planning every store shares: what accepting or rejecting a contested or quarantined
record does to it and to its key's holder, and the history each decision records. Stores read
the records inside their transaction, call :func:`plan_reviews` to decide, and apply its steps
in the order :class:`ReviewStep` says (wire types: :mod:`~workers.memory.model.reviews`)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

import msgspec

from workers.memory.model.contracts import HistoryEntry, MemoryItem
from workers.memory.model.errors import MemoryStoreError, conflict, not_found
from workers.memory.model.planning import history_entry, retire
from workers.memory.model.reviews import UNDER_REVIEW, ReviewDecision, Verdict

__all__ = (
    "ReviewGuard",
    "ReviewStep",
    "contested_to_review",
    "keys_to_review",
    "locked_for_review",
    "plan_reviews",
    "review_history",
)


class ReviewGuard(Protocol):
    """The check a store makes inside its review transaction, on the records as stored there
    (access control enforcing). It raises a coded :class:`MemoryStoreError` to refuse the
    whole call."""

    def check_review(self, stored: MemoryItem) -> None:
        """A review changes ``stored``: the record decided on, or the key's holder an accepted
        record supersedes."""


@dataclass(frozen=True, slots=True)
class ReviewStep:
    """One decision: the record as it leaves the review, its history entry, and for an accept
    that takes a held key, the former holder (now ``superseded``) with its own entry.

    A store applies the steps as :attr:`retired` first (every one of them: it gives a key up),
    then :attr:`item` — stored over the record for ``accept``, deleted for ``reject`` — so a
    key never has two active records, not even between two statements.
    """

    decision: Verdict
    item: MemoryItem
    entry: HistoryEntry
    retired: MemoryItem | None = None
    retired_entry: HistoryEntry | None = None


def keys_to_review(
    decisions: Iterable[ReviewDecision], stored: Mapping[str, MemoryItem]
) -> list[tuple[str, str]]:
    """The ``(namespace, key)`` pairs whose active holder :func:`plan_reviews` needs: the keys
    of the records to accept (sorted: the order stores lock them in)."""
    keys = {
        (item.namespace, item.key)
        for decision in decisions
        if decision.decision == "accept"
        and (item := stored.get(decision.id)) is not None
        and item.key is not None
    }
    return sorted(keys)


def contested_to_review(
    decisions: Iterable[ReviewDecision], stored: Mapping[str, MemoryItem]
) -> list[str]:
    """The ids of the records that the keyless records to accept contest (sorted): accepting
    such a claim supersedes the record it contests, as accepting a keyed one supersedes its
    key's holder, so :func:`plan_reviews` needs them too."""
    return sorted(
        {
            item.contests
            for decision in decisions
            if decision.decision == "accept"
            and (item := stored.get(decision.id)) is not None
            and item.key is None
            and item.contests
        }
    )


def locked_for_review(
    found: Iterable[MemoryItem], decisions: Iterable[ReviewDecision], ids: Iterable[str]
) -> tuple[dict[str, MemoryItem], dict[tuple[str, str], MemoryItem]]:
    """Split the rows a SQL store read (and locked) for a review — the records named by id and
    the active records of the keys under review — into :func:`plan_reviews`' ``stored`` and
    ``holders``."""
    found = list(found)
    named = set(ids)
    stored = {item.id: item for item in found if item.id in named}
    wanted = set(keys_to_review(decisions, stored))
    holders = {
        (item.namespace, item.key or ""): item
        for item in found
        if item.status == "active" and (item.namespace, item.key) in wanted
    }
    return stored, holders


def plan_reviews(
    decisions: Sequence[ReviewDecision],
    stored: Mapping[str, MemoryItem],
    holders: Mapping[tuple[str, str], MemoryItem],
    now: datetime,
    reviewer: str | None = None,
    guard: ReviewGuard | None = None,
    contested: Mapping[str, MemoryItem] | None = None,
) -> list[ReviewStep]:
    """Decide every decision of a review against the records as stored.

    **Accept** makes a contested or quarantined record ``active``: it takes its key, and the
    record that held the key (if any) — for a keyless claim, the record it contests, if still
    active — is superseded — ``valid_to`` now, its source kept, in
    history and ``as_of`` reads — exactly as a write that supersedes it would. The accepted
    record names it in ``supersedes``, contests nothing any more, is revived if archived, and
    becomes true now unless it states its own ``valid_from``. **Reject** deletes the record;
    its history keeps it under a ``reject`` entry. Both bump the version and record
    ``reviewer`` on their history entries.

    Args:
        decisions: The decisions, ids unique.
        stored: The stored records by id (those the decisions name that exist).
        holders: The active record of each key in :func:`keys_to_review` that has one.
        now: The review's time.
        reviewer: Who decides (the calling principal).
        guard: Checked on each record the review changes (a refusal plans nothing).
        contested: The records of :func:`contested_to_review`, as stored (those that exist).

    Raises:
        MemoryStoreError: ``NOT_FOUND`` for an id not in ``stored``; ``CONFLICT`` for a record
            that is not contested or quarantined (another review may have decided it), a stale
            ``expected_version``, or an accept of an expired record; ``INVALID_INPUT`` for an
            id named twice or two accepts of one key; what ``guard`` raises. Either way nothing
            is planned.
    """
    ids = [decision.id for decision in decisions]
    if len(set(ids)) != len(ids):
        raise MemoryStoreError("a record appears twice in one review")
    missing = [item_id for item_id in ids if item_id not in stored]
    if missing:
        raise not_found(f"no record with id {missing[0]!r}")
    steps = []
    taken: dict[tuple[str, str], str] = {}
    for decision in decisions:
        item = stored[decision.id]
        _check(decision, item, guard, now)
        if decision.decision == "reject":
            rejected = msgspec.structs.replace(item, updated_at=now, version=item.version + 1)
            steps.append(
                ReviewStep("reject", rejected, history_entry(rejected, "reject", now, reviewer))
            )
            continue
        holder = None
        if item.key is None and item.contests and contested:
            holder = _contested_holder(item, contested, taken)
        if item.key is not None:
            place = (item.namespace, item.key)
            if place in taken:
                raise MemoryStoreError(
                    f"records {taken[place]!r} and {item.id!r} share key {item.key!r}: one "
                    "review accepts at most one record per key"
                )
            taken[place] = item.id
            holder = holders.get(place)
        if holder is not None and guard is not None:
            guard.check_review(holder)
        accepted = msgspec.structs.replace(
            item,
            status="active",
            contests=None,
            supersedes=item.supersedes if holder is None else holder.id,
            valid_from=now if item.valid_from is None else item.valid_from,
            archived_at=None,
            updated_at=now,
            version=item.version + 1,
        )
        entry = history_entry(accepted, "accept", now, reviewer)
        if holder is None:
            steps.append(ReviewStep("accept", accepted, entry))
            continue
        retired = retire(holder, now, accepted.valid_from)
        retired_entry = history_entry(retired, "supersede", now, reviewer)
        steps.append(ReviewStep("accept", accepted, entry, retired, retired_entry))
    return steps


def _contested_holder(
    item: MemoryItem, contested: Mapping[str, MemoryItem], taken: dict[tuple[str, str], str]
) -> MemoryItem | None:
    """The active record a keyless claim contests (in its namespace), which accepting the claim
    supersedes; ``None`` when it is gone or no longer active."""
    held = contested.get(item.contests or "")
    if held is None or held.status != "active" or held.namespace != item.namespace:
        return None
    place = (held.namespace, "\0" + held.id)  # no key holds a NUL: a place of its own
    if place in taken:
        raise MemoryStoreError(
            f"records {taken[place]!r} and {item.id!r} contest the same record {held.id!r}: "
            "one review accepts at most one of them"
        )
    taken[place] = item.id
    return held


def review_history(steps: Iterable[ReviewStep]) -> list[HistoryEntry]:
    """The history entries a planned review records, in order (a retired holder's first)."""
    entries: list[HistoryEntry] = []
    for step in steps:
        if step.retired_entry is not None:
            entries.append(step.retired_entry)
        entries.append(step.entry)
    return entries


def _check(
    decision: ReviewDecision, item: MemoryItem, guard: ReviewGuard | None, now: datetime
) -> None:
    if guard is not None:
        guard.check_review(item)
    if item.status not in UNDER_REVIEW:
        raise conflict(
            f"record {item.id} is {item.status}, not contested or quarantined: only those are "
            "reviewed (another review may have decided it)"
        )
    if decision.expected_version is not None and decision.expected_version != item.version:
        raise conflict(
            f"record {item.id} is at version {item.version}, not {decision.expected_version}"
        )
    if decision.decision == "accept" and item.expires_at is not None and item.expires_at <= now:
        raise conflict(
            f"record {item.id} expired at {item.expires_at.isoformat()}: an expired record "
            "cannot be accepted (reject it, or write it again)"
        )
