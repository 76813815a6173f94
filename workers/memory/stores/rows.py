"""Rows of the SQL stores as records: both select a record's columns in this order::

    id, key, namespace, content, summary, category, tags, metadata, source,
    created_at, updated_at, version, usage_count, last_used_at,
    pinned, archived_at, owner, visibility,
    trust, principal, status, valid_from, valid_to, expires_at, supersedes, contests, sources

with JSON text for content, tags, metadata and sources, and integer microseconds for timestamps.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any

import msgspec

from ditto.errors import ErrorCode
from workers.memory.model.contracts import AuditEntry, MemoryItem
from workers.memory.model.errors import MemoryStoreError
from workers.memory.model.records import from_micros, to_micros

if TYPE_CHECKING:
    from workers.memory.ports import AuditEvent

__all__ = (
    "AUDIT_COLUMNS",
    "GOVERNANCE_COLUMNS",
    "PROVENANCE_COLUMNS",
    "RECORD_COLUMNS",
    "ROW_FIELDS",
    "audit_entry",
    "audit_values",
    "governance_values",
    "provenance_values",
    "record_values",
    "row_to_item",
)

RECORD_COLUMNS = (
    "id",
    "key",
    "namespace",
    "content",
    "summary",
    "category",
    "tags",
    "metadata",
    "source",
    "created_at",
    "updated_at",
    "version",
)
"""The columns before the usage counters, in the order of :func:`record_values`."""

GOVERNANCE_COLUMNS = ("pinned", "archived_at", "owner", "visibility")
"""The columns after the usage counters, in the order above."""

PROVENANCE_COLUMNS = (
    "trust",
    "principal",
    "status",
    "valid_from",
    "valid_to",
    "expires_at",
    "supersedes",
    "contests",
    "sources",
)
"""The write policy's columns, last, in the order above."""

ROW_FIELDS = (
    *RECORD_COLUMNS,
    "usage_count",
    "last_used_at",
    *GOVERNANCE_COLUMNS,
    *PROVENANCE_COLUMNS,
)
"""The row order above: also :class:`MemoryItem`'s field order, which :func:`row_to_item`
relies on (a test holds the two together)."""

_decode = msgspec.json.decode
_encode = msgspec.json.encode
_decode_names = msgspec.json.Decoder(list[str]).decode

AUDIT_COLUMNS = ("at", "principal", "node", "ids", "decision", "detail", "keys", "categories")
"""An audit row's stored columns, in the order of :func:`audit_values` (``seq`` comes first
when read: see :func:`audit_entry`)."""


def audit_values(event: AuditEvent) -> tuple[Any, ...]:
    """An audit event's values for ``AUDIT_COLUMNS`` (lists as JSON text)."""
    return (
        to_micros(event.at),
        event.principal,
        event.node,
        _encode(list(event.ids)).decode(),
        event.decision,
        event.detail,
        _encode(list(event.keys)).decode(),
        _encode(list(event.categories)).decode(),
    )


def audit_entry(row: Any) -> AuditEntry:
    """An audit entry from a row of ``seq`` and ``AUDIT_COLUMNS`` (a tuple or a Record)."""
    seq, at, principal, node, ids, decision, detail, keys, categories = row
    return AuditEntry(
        seq,
        from_micros(at),
        principal,
        node,
        _decode_names(ids),
        decision,
        detail,
        _decode_names(keys),
        _decode_names(categories),
    )


def record_values(item: MemoryItem) -> tuple[Any, ...]:
    """A record's stored values in the order above, without the usage counters."""
    return (
        item.id,
        item.key,
        item.namespace,
        _encode(item.content).decode(),
        item.summary,
        item.category,
        _encode(item.tags).decode(),
        _encode(item.metadata).decode(),
        item.source,
        to_micros(item.created_at),
        to_micros(item.updated_at),
        item.version,
    )


def governance_values(item: MemoryItem) -> tuple[Any, ...]:
    """A record's ``GOVERNANCE_COLUMNS`` values (``pinned`` as a boolean; SQLite stores 0/1)."""
    archived_at = None if item.archived_at is None else to_micros(item.archived_at)
    return (item.pinned, archived_at, item.owner, item.visibility)


def _micros(moment: datetime | None) -> int | None:
    return None if moment is None else to_micros(moment)


def provenance_values(item: MemoryItem) -> tuple[Any, ...]:
    """A record's ``PROVENANCE_COLUMNS`` values (timestamps as integer microseconds)."""
    return (
        item.trust,
        item.principal,
        item.status,
        _micros(item.valid_from),
        _micros(item.valid_to),
        _micros(item.expires_at),
        item.supersedes,
        item.contests,
        _encode(item.sources).decode(),
    )


def row_to_item(row: Any) -> MemoryItem:
    """A record from a row (a tuple or an ``asyncpg.Record``) in the order above.

    Every read decodes rows here, so it passes fields by position (about half the cost of
    keywords) and reuses ``created_at`` for an ``updated_at`` that equals it.

    Raises:
        MemoryStoreError: ``STORE_CORRUPT`` naming the record, for a row no write could have
            stored (a timestamp out of range, JSON that does not decode).
    """
    try:
        created_at = from_micros(row[9])
        return MemoryItem(
            row[0],
            row[1],
            row[2],
            _decode(row[3]),
            row[4],
            row[5],
            _decode(row[6]),
            _decode(row[7]),
            row[8],
            created_at,
            created_at if row[10] == row[9] else from_micros(row[10]),
            row[11],
            row[12],
            None if row[13] is None else from_micros(row[13]),
            bool(row[14]),
            None if row[15] is None else from_micros(row[15]),
            row[16],
            row[17],
            row[18],
            row[19],
            row[20],
            None if row[21] is None else from_micros(row[21]),
            None if row[22] is None else from_micros(row[22]),
            None if row[23] is None else from_micros(row[23]),
            row[24],
            row[25],
            _decode_names(row[26]),
        )
    except (OverflowError, ValueError, msgspec.DecodeError) as exc:
        raise MemoryStoreError(
            f"the stored record {row[0]!r} is malformed ({type(exc).__name__}); delete it or "
            "restore it from an export",
            code=ErrorCode.STORE_CORRUPT,
        ) from exc
