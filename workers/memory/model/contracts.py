"""The MEMORY wire types: records, filters and the nodes' inputs and outputs (REVIEW's are in
``reviews``). Every type is a frozen ``msgspec.Struct``; the runtime converts dict inputs into
them once, at the boundary, so a malformed input becomes ``INVALID_INPUT`` before the worker
runs. Unknown fields are refused: a typo in a filter must never silently widen it.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

import msgspec
from msgspec import UNSET, Meta, UnsetType

from workers.memory.model.outcomes import (
    Change,
    MissExplanation,
    MissTarget,
    Outcome,
    PolicyOverride,
    WriteOutcome,
)

__all__ = (
    "DEFAULT_CATEGORY",
    "DEFAULT_NAMESPACE",
    "HIDDEN_ALL",
    "ArchivedMode",
    "AuditEntry",
    "Change",
    "DeleteInput",
    "DeleteOutput",
    "ExportLine",
    "GetInput",
    "GetOutput",
    "Hidden",
    "HistoryEntry",
    "Limit",
    "MemoryDraft",
    "MemoryFilter",
    "MemoryItem",
    "MemoryPatch",
    "MissExplanation",
    "MissTarget",
    "OrderBy",
    "OrderField",
    "Outcome",
    "PolicyOverride",
    "QueryInput",
    "QueryOutput",
    "RecordStatus",
    "SearchHit",
    "SearchInput",
    "SearchOutput",
    "UpdateInput",
    "UpdateOutput",
    "Visibility",
    "WriteInput",
    "WriteMode",
    "WriteOutcome",
    "WriteOutput",
)

DEFAULT_NAMESPACE = "default"
DEFAULT_CATEGORY = "core"

Limit = Annotated[int, Meta(ge=1, le=10_000)]
"""Every limit is an integer from 1 to 10,000."""
MAX_BATCH = 10_000
"""Most records, ids or keys one call may name (a WRITE, UPDATE, GET, DELETE or REVIEW batch)."""
MAX_FILTER_TAGS = 100
"""Most tags one filter may list (``tags_any``, ``tags_all``)."""
MAX_FILTER_METADATA = 32
"""Most metadata keys one filter may compare."""
MAX_QUERY_CHARS = 10_000
"""Longest text query SEARCH accepts: every query's cost stays bounded."""
NonEmpty = Annotated[str, Meta(min_length=1, max_length=1024)]
Name = Annotated[str, Meta(min_length=1, max_length=256)]
Tag = Annotated[str, Meta(min_length=1, max_length=256)]
MetadataKey = Annotated[str, Meta(pattern=r"^[A-Za-z0-9_:\-]{1,128}$")]
Int64 = Annotated[int, Meta(ge=-(2**63), le=2**63 - 1)]
"""An integer every store can compare and keep (SQLite's and PostgreSQL's 64 bits)."""
Scalar = str | Int64 | float | bool | None
Timestamp = Annotated[datetime, Meta(tz=True)]
"""Timezone-aware; naive datetimes are refused rather than guessed."""

OrderField = Literal["created_at", "updated_at", "last_used_at", "usage_count"]
WriteMode = Literal["create", "upsert"]
Visibility = Literal["private", "shared"]
"""Who may see a record under access control: its owner only, or every principal."""
ArchivedMode = Literal["exclude", "include", "only"]
"""Whether a filter sees archived records: not at all (the default), too, or only them."""
RecordStatus = Literal["active", "superseded", "contested", "quarantined"]
"""Where a record stands in the write policy (handbook §9): ``active``; ``superseded`` by a
later record of at least its trust (kept, with ``valid_to``, for history and ``as_of`` reads);
``contested`` (stored beside a higher-trust record it contradicts) or ``quarantined`` (it
looked unsafe), both until a person accepts or rejects them (``MEMORY.REVIEW``). Only
``active`` records hold their key: the others share it with the record that holds it."""
Hidden = Literal["superseded", "contested", "quarantined", "expired"]
"""What reads leave out unless a filter's ``include`` names it: those statuses, and expiry."""
HIDDEN_ALL: tuple[Hidden, ...] = ("superseded", "contested", "quarantined", "expired")
"""Every hidden kind: what an export or a store-to-store copy includes."""
TtlSeconds = Annotated[int, Meta(ge=1, le=100 * 365 * 86_400)]
"""A time to live: one second to a hundred years."""


class _Frozen(msgspec.Struct, frozen=True, forbid_unknown_fields=True, omit_defaults=False):
    pass


class MemoryDraft(_Frozen, frozen=True, forbid_unknown_fields=True):
    """A record to write; the store assigns ``id``, timestamps and ``version``."""

    content: Any
    """Any JSON value (``null`` included)."""
    key: NonEmpty | None = None
    """Stable external id, unique within ``namespace``; makes re-runs idempotent."""
    namespace: Name = DEFAULT_NAMESPACE
    """Partition: a user, workspace, tenant or session."""
    summary: str | None = None
    category: Name = DEFAULT_CATEGORY
    """``core``, ``daily``, ``conversation`` or custom; drives retention."""
    tags: list[Tag] = msgspec.field(default_factory=list)
    metadata: dict[str, Any] = msgspec.field(default_factory=dict)
    source: str | None = None
    """Where the record came from (a tool, a user, a document URI)."""
    pinned: bool | None = None
    """Pinned records are never archived or purged by retention. ``None``: a new record is not
    pinned, an upsert keeps what the stored record has."""
    visibility: Visibility | None = None
    """``None``: the access policy's default for a new record; an upsert keeps the stored one."""
    owner: Name | None = None
    """The owning principal. Under access control the worker stamps the caller here (another
    principal is ``FORBIDDEN``); without it, whatever is given is kept."""
    trust: Name | None = None
    """How far the source is trusted, a level of the write policy's ordered scale (by default
    ``verified > user > agent > inferred``). ``None``: a new record gets none, an upsert keeps
    what the stored record has."""
    principal: Name | None = None
    """Who wrote it. The worker stamps the calling principal here when the call has one."""
    valid_from: Timestamp | None = None
    """When the fact became true; ``None``: when it is written."""
    expires_at: Timestamp | None = None
    """When the record stops being valid: after it, reads leave it out unless they include
    ``expired``, and hygiene sweeps it. ``None``: a new record never expires, an upsert keeps
    the stored expiry. Give this or ``ttl``, not both."""
    ttl: TtlSeconds | None = None
    """Seconds from the write until the record expires (sets ``expires_at``)."""


class MemoryItem(_Frozen, frozen=True, forbid_unknown_fields=True):
    """A stored record."""

    id: NonEmpty
    key: NonEmpty | None
    namespace: Name
    content: Any
    summary: str | None
    category: Name
    tags: list[Tag]
    metadata: dict[str, Any]
    source: str | None
    created_at: Timestamp
    updated_at: Timestamp
    version: Annotated[int, Meta(ge=1, le=2**63 - 1)]
    usage_count: Annotated[int, Meta(ge=0, le=2**63 - 1)]
    last_used_at: Timestamp | None
    # Governance fields come last, with defaults, so exports written before them still import.
    pinned: bool = False
    archived_at: Timestamp | None = None
    """When retention archived the record (hidden from reads unless asked for); ``None``: live."""
    owner: Name | None = None
    visibility: Visibility = "shared"
    # Provenance and validity (the write policy), last and with defaults for the same reason.
    trust: Name | None = None
    """The trust level of its source (see :attr:`MemoryDraft.trust`)."""
    principal: Name | None = None
    """Who wrote it (the calling principal, when the write had one)."""
    status: RecordStatus = "active"
    valid_from: Timestamp | None = None
    """When the fact became true; ``None`` reads as ``created_at``."""
    valid_to: Timestamp | None = None
    """When it stopped being true (a superseded record); ``None``: still true."""
    expires_at: Timestamp | None = None
    """When it expires; ``None``: never."""
    supersedes: NonEmpty | None = None
    """The id of the record this one superseded (now ``superseded``), if any."""
    contests: NonEmpty | None = None
    """The id of the higher-trust record this ``contested`` one contradicts."""
    sources: list[str] = msgspec.field(default_factory=list)
    """Other sources that stated its fact since (see :mod:`~workers.memory.model.merges`)."""


class HistoryEntry(_Frozen, frozen=True, forbid_unknown_fields=True):
    """One change of a record, as the record stood after it (before it, for ``delete``)."""

    id: NonEmpty
    version: Annotated[int, Meta(ge=1, le=2**63 - 1)]
    change: Change
    at: Timestamp
    record: MemoryItem
    reviewer: Name | None = None
    """Who decided a review (``accept``, ``reject``, and the ``supersede`` an accept causes)."""


class AuditEntry(_Frozen, frozen=True, forbid_unknown_fields=True):
    """One access decision: who called which node on which records, and what was decided."""

    seq: Annotated[int, Meta(ge=1)]
    """Position in the log (increasing; also the cursor for reading it in pages)."""
    at: Timestamp
    principal: str | None
    node: str
    ids: list[str]
    """The records the call touched or returned (for a denial: the ones it was denied)."""
    decision: Literal["allow", "deny", "would-deny", "failed"]
    """``would-deny``: observe mode let through what enforce mode would have refused;
    ``failed``: the call failed (``detail`` holds its code and message)."""
    detail: str | None = None
    keys: list[str] = msgspec.field(default_factory=list)
    """The record keys the call named or touched (PRX audits keys, not only ids)."""
    categories: list[str] = msgspec.field(default_factory=list)
    """The categories of the records the call named or touched."""


class MemoryPatch(_Frozen, frozen=True, forbid_unknown_fields=True):
    """A partial update of one record by id; fields left out keep their value (no ``key``)."""

    id: NonEmpty
    content: Any | UnsetType = UNSET
    summary: str | UnsetType | None = UNSET
    metadata: dict[str, Any] | UnsetType = UNSET
    """Replaces the whole metadata object (``{}`` clears it); never merged."""
    tags: list[Tag] | UnsetType = UNSET
    category: Name | UnsetType = UNSET
    pinned: bool | UnsetType = UNSET
    visibility: Visibility | UnsetType = UNSET
    """Only the owner may change it under access control."""
    archived: bool | UnsetType = UNSET
    """``True`` archives the record now (history records an ``archive``), ``False`` revives it."""
    expires_at: Timestamp | UnsetType | None = UNSET
    """A new expiry (``None``: never); or ``ttl``: seconds from the update (renews, revives)."""
    ttl: TtlSeconds | UnsetType = UNSET
    expected_version: Annotated[int, Meta(ge=1)] | None = None
    """When given, the update fails with ``CONFLICT`` unless the stored version equals it."""


class MemoryFilter(_Frozen, frozen=True, forbid_unknown_fields=True):
    """Which records an operation sees; every given condition must hold (AND)."""

    namespace: Name | None = None
    category: Name | None = None
    key: NonEmpty | None = None
    key_prefix: NonEmpty | None = None
    tags_any: Annotated[list[Tag], Meta(max_length=MAX_FILTER_TAGS)] | None = None
    """At least one of these tags."""
    tags_all: Annotated[list[Tag], Meta(max_length=MAX_FILTER_TAGS)] | None = None
    """Every one of these tags."""
    source: str | None = None
    metadata: Annotated[dict[MetadataKey, Scalar], Meta(max_length=MAX_FILTER_METADATA)] | None = (
        None
    )
    """Equality on top-level metadata keys (a JSON ``true`` never equals ``1``)."""
    created_after: Timestamp | None = None
    created_before: Timestamp | None = None
    updated_after: Timestamp | None = None
    updated_before: Timestamp | None = None
    inactive_before: Timestamp | None = None
    """Neither updated nor used at or after this time (what retention measures)."""
    pinned: bool | None = None
    owner: Name | None = None
    visible_to: Name | None = None
    """Only records this principal may see (shared, or its own); the ACL sets it to the caller."""
    archived: ArchivedMode = "exclude"
    include: Annotated[list[Hidden], Meta(max_length=4)] = msgspec.field(default_factory=list)
    """Hidden records to see too: ``superseded``, ``contested``, ``quarantined``, ``expired``
    (by default reads see active, unexpired records only)."""
    as_of: Timestamp | None = None
    """Only records valid at this moment (from ``valid_from``, else ``created_at``, until
    ``valid_to`` or expiry): superseded ones count, contested and quarantined only if included."""
    expires_before: Timestamp | None = None
    """Only records that expire before this moment (include ``expired`` to see those that
    already have: what hygiene sweeps)."""
    status: Annotated[list[RecordStatus], Meta(min_length=1, max_length=4)] | None = None
    """Only records of these statuses (hidden ones still need ``include``)."""


class OrderBy(_Frozen, frozen=True, forbid_unknown_fields=True):
    field: OrderField = "created_at"
    direction: Literal["asc", "desc"] = "asc"


class GetInput(_Frozen, frozen=True, forbid_unknown_fields=True):
    ids: Annotated[list[NonEmpty], Meta(max_length=MAX_BATCH)] = msgspec.field(default_factory=list)
    keys: Annotated[list[NonEmpty], Meta(max_length=MAX_BATCH)] = msgspec.field(
        default_factory=list
    )
    namespace: Name = DEFAULT_NAMESPACE
    """The namespace ``keys`` are looked up in (ids are global)."""
    include_archived: bool = False
    include: Annotated[list[Hidden], Meta(max_length=4)] = msgspec.field(default_factory=list)
    """Hidden records to return too (see :attr:`MemoryFilter.include`); a key names its active
    record, and with ``superseded``/``contested``/``quarantined`` the others that share it."""
    as_of: Timestamp | None = None
    """Return only records valid at this moment (see :attr:`MemoryFilter.as_of`)."""


class GetOutput(_Frozen, frozen=True, forbid_unknown_fields=True):
    items: list[MemoryItem]
    """Requested ids first, then keys, each record once; missing ones are left out."""


class QueryInput(_Frozen, frozen=True, forbid_unknown_fields=True):
    filter: MemoryFilter = msgspec.field(default_factory=MemoryFilter)
    limit: Limit | None = None
    cursor: NonEmpty | None = None
    """``next_cursor`` of the previous page, with the same filter and order."""
    order_by: OrderBy = msgspec.field(default_factory=OrderBy)


class QueryOutput(_Frozen, frozen=True, forbid_unknown_fields=True):
    items: list[MemoryItem]
    next_cursor: str | None = None


class SearchInput(_Frozen, frozen=True, forbid_unknown_fields=True):
    query: Any
    """Usually text (at most ``MAX_QUERY_CHARS`` characters); providers define what else they
    accept."""
    strategy: Name | None = None
    filter: MemoryFilter = msgspec.field(default_factory=MemoryFilter)
    limit: Limit | None = None
    options: dict[str, Any] = msgspec.field(default_factory=dict)
    explain_miss: MissTarget | None = None
    """Say why this record is not among the hits (``SearchOutput.miss``): the worker answers
    it; search providers never see it."""


class SearchHit(_Frozen, frozen=True, forbid_unknown_fields=True):
    memory: MemoryItem
    score: float | None = None
    explain: dict[str, Any] | None = None


class SearchOutput(_Frozen, frozen=True, forbid_unknown_fields=True):
    hits: list[SearchHit]
    vector_missing: int | None = None
    """Vector and hybrid search: records the vector leg could not see, lacking a vector of the
    store's model (store-wide, a few seconds old; ``ditto memory reindex`` embeds them)."""
    miss: MissExplanation | None = None
    """The answer to ``SearchInput.explain_miss``."""


class WriteInput(_Frozen, frozen=True, forbid_unknown_fields=True):
    memories: Annotated[list[MemoryDraft], Meta(max_length=MAX_BATCH)]
    mode: WriteMode = "create"
    policy: PolicyOverride | None = None
    """This call's write-policy modes (see ``PolicyOverride``)."""
    idempotent: bool = False
    """Key each keyless draft by the call's ``ctx.idempotency_key`` and its position, so the
    same work written again (a resume, a redelivery, a retry) replays its first records
    (``create``: other content is ``CONFLICT``; ``upsert`` replaces them)."""


class WriteOutput(_Frozen, frozen=True, forbid_unknown_fields=True):
    items: list[MemoryItem]
    """One record per draft, in draft order."""
    outcomes: list[WriteOutcome] = msgspec.field(default_factory=list)
    """One per draft, in draft order."""


class UpdateInput(_Frozen, frozen=True, forbid_unknown_fields=True):
    updates: Annotated[list[MemoryPatch], Meta(max_length=MAX_BATCH)]


class UpdateOutput(_Frozen, frozen=True, forbid_unknown_fields=True):
    items: list[MemoryItem]


class DeleteInput(_Frozen, frozen=True, forbid_unknown_fields=True):
    ids: Annotated[list[NonEmpty], Meta(max_length=MAX_BATCH)] = msgspec.field(default_factory=list)
    keys: Annotated[list[NonEmpty], Meta(max_length=MAX_BATCH)] = msgspec.field(
        default_factory=list
    )
    """Records to delete by key, in ``namespace`` (a key no record visible to the caller holds
    is skipped, as an unknown id is)."""
    namespace: Name = DEFAULT_NAMESPACE


class DeleteOutput(_Frozen, frozen=True, forbid_unknown_fields=True):
    deleted: list[str]
    """The ids this call really deleted (a repeat returns ``[]``)."""


class ExportLine(_Frozen, frozen=True, forbid_unknown_fields=True):
    """One line of ``ditto memory export``: a record, or one entry of a record's history."""

    type: Literal["record", "history"]
    record: MemoryItem | None = None
    entry: HistoryEntry | None = None
