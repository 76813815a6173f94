"""``MEMORY.REVIEW``'s wire types: a person's decisions on contested and quarantined records,
and what each did (the planning is :mod:`~workers.memory.model.review_plan`)."""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec
from msgspec import Meta

from workers.memory.model.contracts import MAX_BATCH, MemoryItem, Name, NonEmpty

__all__ = (
    "UNDER_REVIEW",
    "ReviewDecision",
    "ReviewInput",
    "ReviewOutcome",
    "ReviewOutput",
    "Verdict",
)

Verdict = Literal["accept", "reject"]
"""``accept``: the record becomes active and takes its key (the key's holder is superseded);
``reject``: the record is deleted, and its history says it was rejected."""
UNDER_REVIEW = ("contested", "quarantined")
"""The statuses a review decides on: the write policy's records that wait for a person."""


class _Frozen(msgspec.Struct, frozen=True, forbid_unknown_fields=True, omit_defaults=False):
    pass


class ReviewDecision(_Frozen, frozen=True, forbid_unknown_fields=True):
    """A person's decision on one contested or quarantined record."""

    id: NonEmpty
    decision: Verdict
    expected_version: Annotated[int, Meta(ge=1)] | None = None
    """When given, the review fails with ``CONFLICT`` unless the stored version equals it."""


class ReviewInput(_Frozen, frozen=True, forbid_unknown_fields=True):
    decisions: Annotated[list[ReviewDecision], Meta(max_length=MAX_BATCH)]
    """One per record (an id at most once); all are applied, or none."""
    namespace: Name | None = None
    """When given, every record reviewed must be in it: an id of another namespace is
    ``NOT_FOUND``, as a missing one is."""


class ReviewOutcome(_Frozen, frozen=True, forbid_unknown_fields=True):
    """What one decision did."""

    id: NonEmpty
    decision: Verdict
    record: MemoryItem
    """``accept``: the record as it now stands (``active``, holding its key; its ``supersedes``
    names the record that held the key until now, kept ``superseded``); ``reject``: the record
    as it stood when it was rejected (it is deleted; its history keeps it)."""


class ReviewOutput(_Frozen, frozen=True, forbid_unknown_fields=True):
    items: list[ReviewOutcome]
    """One per decision, in order."""
