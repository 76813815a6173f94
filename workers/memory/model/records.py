"""Record basics every store shares: ids, the clock and timestamps as stores keep them,
canonical JSON, the indexed text of a record and how records order. What a write does to a
record is decided in :mod:`~workers.memory.model.planning`."""

from __future__ import annotations

import os
import random
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import msgspec

from workers.memory.model.contracts import MemoryItem, OrderField

__all__ = (
    "TIMESTAMP_FIELDS",
    "Clock",
    "canonical_json",
    "content_text",
    "from_micros",
    "new_id",
    "now_from",
    "order_key",
    "to_micros",
    "utc_now",
)

Clock = Callable[[], datetime]
"""Returns the current time, timezone-aware. Stores take one so tests can fix time."""

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)

TIMESTAMP_FIELDS = (
    "created_at",
    "updated_at",
    "last_used_at",
    "archived_at",
    "valid_from",
    "valid_to",
    "expires_at",
)
"""A record's timestamp fields (``MemoryItem``'s, each a ``datetime`` or ``None``)."""


def utc_now() -> datetime:
    return datetime.now(UTC)


_random = random.Random(os.urandom(32))
_bits = _random.getrandbits
# A forked child must not draw the parent's next ids.
os.register_at_fork(after_in_child=lambda: _random.seed(os.urandom(32)))


def new_id() -> str:
    """A new record id: a UUIDv7 (RFC 9562) — milliseconds since the epoch, then 74 random
    bits. Ids of records written one after another sort by time, so inserts append to the end
    of every index on ``id`` instead of landing at random pages of it (and page in less of a
    large store); within a millisecond the random bits keep them unique. The bits come from a
    generator seeded by the OS (a system call per id costs more than the rest of the id): ids
    are names, not secrets — access rules, not unguessable ids, protect records."""
    value = (time.time_ns() // 1_000_000) << 80 | _bits(80)
    value = value & ~(0xF << 76) | 0x7 << 76  # version 7
    value = value & ~(0x3 << 62) | 0x2 << 62  # variant 10xx (RFC 9562)
    text = f"{value:032x}"
    return f"{text[:8]}-{text[8:12]}-{text[12:16]}-{text[16:20]}-{text[20:]}"


def to_micros(moment: datetime) -> int:
    """Microseconds since the epoch; the exact integer form stores index and compare."""
    delta = moment - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def from_micros(micros: int) -> datetime:
    return _EPOCH + timedelta(0, 0, micros)  # positional: a third cheaper than microseconds=


def now_from(clock: Clock) -> datetime:
    """The clock's time, checked to be aware and cut to microseconds (what stores keep)."""
    moment = clock()
    if moment.tzinfo is None:
        raise ValueError("the memory store clock must return timezone-aware datetimes")
    return moment.astimezone(UTC)


_encode_sorted = msgspec.json.Encoder(order="sorted")


def canonical_json(value: Any) -> bytes:
    """JSON with sorted keys: equal values give equal bytes, and ``true`` never equals ``1``."""
    return _encode_sorted.encode(value)


def content_text(content: Any) -> str:
    """The searchable text of a record's content: a string as is; for objects and arrays every
    string and number leaf (not the keys), one per line."""
    if isinstance(content, str):
        return content
    parts: list[str] = []
    stack = [content]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            parts.append(item)
        elif isinstance(item, bool) or item is None:
            continue
        elif isinstance(item, int | float):
            try:
                parts.append(str(item))
            except ValueError:  # an integer past Python's 4,300-digit conversion limit
                continue
        elif isinstance(item, dict):
            stack.extend(reversed(list(item.values())))
        elif isinstance(item, list):
            stack.extend(reversed(item))
    return "\n".join(parts)


def order_key(item: MemoryItem, field: OrderField) -> int:
    """The integer a record sorts by for ``field`` (a never-used record sorts as -1)."""
    if field == "created_at":
        return to_micros(item.created_at)
    if field == "updated_at":
        return to_micros(item.updated_at)
    if field == "usage_count":
        return item.usage_count
    return -1 if item.last_used_at is None else to_micros(item.last_used_at)
