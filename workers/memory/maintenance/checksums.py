"""Whether two stores hold the same records (``ditto memory verify``): per namespace, a count
and an order-independent checksum of every record (and history entry), read page by page.

A record's digest covers every field of :class:`MemoryItem` in a canonical form: its JSON
with object keys sorted (PostgreSQL's ``jsonb`` and MySQL's ``JSON`` keep keys in their own
order) and timestamps in UTC. A namespace's checksum is the sum of its digests modulo
2**128, so the order a store returns records in does not matter, while a record missing,
added twice or changed in any field does. Where the checksums differ, :func:`id_digests`
reads that namespace again, id by id, to name the records that differ.
"""

from __future__ import annotations

import hashlib
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import msgspec

from workers.memory.maintenance.transfer import PAGE, read_pages
from workers.memory.model.contracts import HistoryEntry, MemoryItem
from workers.memory.model.records import TIMESTAMP_FIELDS
from workers.memory.ports import MemoryStore

__all__ = (
    "Checksum",
    "IdDigests",
    "NamespaceChecksums",
    "entry_digest",
    "id_digests",
    "record_digest",
    "store_checksums",
)

_MODULUS = 1 << 128
_encode = msgspec.json.Encoder(order="sorted")


@dataclass(slots=True)
class Checksum:
    """How many items, and the sum of their digests modulo 2**128."""

    count: int = 0
    total: int = 0

    def add(self, digest: int) -> None:
        self.count += 1
        self.total = (self.total + digest) % _MODULUS

    @property
    def hex(self) -> str:
        return f"{self.total:032x}"


@dataclass(slots=True)
class NamespaceChecksums:
    records: Checksum = field(default_factory=Checksum)
    history: Checksum = field(default_factory=Checksum)


@dataclass(slots=True)
class IdDigests:
    """One namespace, id by id: each record's digest, and the sum of its history entries'."""

    records: dict[str, int] = field(default_factory=dict)
    history: dict[str, Checksum] = field(default_factory=lambda: defaultdict(Checksum))


def _canonical(item: MemoryItem) -> dict[str, Any]:
    utc: dict[str, datetime] = {}
    for name in TIMESTAMP_FIELDS:
        value = getattr(item, name)
        if value is not None:
            utc[name] = value.astimezone(UTC)
    fields: dict[str, Any] = msgspec.to_builtins(msgspec.structs.replace(item, **utc))
    return fields


def _digest(value: Any) -> int:
    return int.from_bytes(hashlib.blake2b(_encode.encode(value), digest_size=16).digest())


def record_digest(item: MemoryItem) -> int:
    """128 bits of a hash of every field of ``item`` in canonical form."""
    return _digest(_canonical(item))


def entry_digest(entry: HistoryEntry) -> int:
    """128 bits of a hash of every field of ``entry`` (its record's in canonical form)."""
    at = entry.at.astimezone(UTC).isoformat()
    return _digest([entry.id, entry.version, entry.change, at, _canonical(entry.record)])


async def store_checksums(
    store: MemoryStore,
    *,
    namespace: str | None = None,
    history: bool = False,
    size: int = PAGE,
) -> dict[str, NamespaceChecksums]:
    """Count and checksum per namespace of every record (archived and hidden ones included)
    and with ``history`` of every history entry (a deleted record's under the namespace it
    had), in one pass with flat memory; only ``namespace`` when given.

    Raises:
        MemoryStoreError: ``UNSUPPORTED`` for ``history`` on a store without it.
    """
    found: dict[str, NamespaceChecksums] = defaultdict(NamespaceChecksums)
    async for page in read_pages(store, namespace=namespace, history=history, size=size):
        for item in page.records:
            found[item.namespace].records.add(record_digest(item))
        for entry in page.entries:
            found[entry.record.namespace].history.add(entry_digest(entry))
    return dict(found)


async def id_digests(
    store: MemoryStore, namespace: str, *, history: bool = False, size: int = PAGE
) -> IdDigests:
    """The digests of one namespace by record id (memory grows with the namespace: read only
    for a namespace whose checksums differ)."""
    found = IdDigests()
    async for page in read_pages(store, namespace=namespace, history=history, size=size):
        for item in page.records:
            found.records[item.id] = record_digest(item)
        for entry in page.entries:
            found.history[entry.id].add(entry_digest(entry))
    return found
