"""The write policy's wire types: what a write did with each draft (and the changes history
records), and a call's own policy modes (re-exported by :mod:`~workers.memory.model.contracts`)."""

from __future__ import annotations

from typing import Literal

import msgspec

__all__ = (
    "Change",
    "MissExplanation",
    "MissStage",
    "MissTarget",
    "Outcome",
    "PolicyMode",
    "PolicyOverride",
    "WriteOutcome",
)


class _Frozen(msgspec.Struct, frozen=True, forbid_unknown_fields=True, omit_defaults=False):
    pass


Outcome = Literal[
    "created", "updated", "deduplicated", "superseded", "contested", "quarantined", "redacted"
]
"""What a write did with one draft."""
Change = Literal[
    "create", "upsert", "update", "archive", "supersede", "merge", "delete", "accept", "reject"
]
"""What a history entry records: a write's change, or a person's review (``accept``,
``reject``)."""
PolicyMode = Literal["off", "observe", "enforce"]


class PolicyOverride(_Frozen, frozen=True, forbid_unknown_fields=True):
    """One call's write-policy modes, over the configured ones (``None`` keeps them). The
    safety stage may only be made stricter by a call."""

    safety: PolicyMode | None = None
    dedupe: PolicyMode | None = None
    contradiction: PolicyMode | None = None


class WriteOutcome(_Frozen, frozen=True, forbid_unknown_fields=True):
    """What the write did with one draft, and the records involved."""

    outcome: list[Outcome]
    """``created`` (a new record), ``updated`` (the key's record replaced in place),
    ``deduplicated`` (an equal record already stood: it is returned), ``superseded`` (a new
    record replaced the key's record, which is kept ``superseded``), ``contested`` (stored
    beside a higher-trust record it contradicts), ``quarantined`` (held for review), and
    ``redacted`` beside any of them."""
    duplicate_of: str | None = None
    supersedes: str | None = None
    contests: str | None = None
    safety: dict[str, int] = msgspec.field(default_factory=dict)
    """What the safety stage found: kinds and counts, never the values."""
    observed: list[Outcome] = msgspec.field(default_factory=list)
    """What stages in ``observe`` mode would have done (nothing of it was done)."""


MissStage = Literal[
    "returned",
    "not_found",
    "namespace",
    "archived",
    "expired",
    "superseded",
    "contested",
    "quarantined",
    "filter",
    "not_a_candidate",
    "below_min_score",
    "limit",
]
"""Where a search left a record out (``returned``: it was not left out)."""


class MissTarget(_Frozen, frozen=True, forbid_unknown_fields=True):
    """The record a search should explain: by ``id``, or by ``key`` in the filter's namespace
    (the default namespace when the filter names none)."""

    id: str | None = None
    key: str | None = None


class MissExplanation(_Frozen, frozen=True, forbid_unknown_fields=True):
    """Why a search did not return a record (or at which rank it did)."""

    stage: MissStage
    reason: str
    """The same, in words a person reads."""
    record_id: str | None = None
    rank: int | None = None
    """Where it ranked among every match, when it was a candidate."""
    score: float | None = None
