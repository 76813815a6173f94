"""Opaque QUERY cursors, signed and bound to the filter and order they were issued for.

A cursor carries the position after which the next page starts. It is signed with the store's
``cursor_secret`` so a tampered cursor is refused, and it carries a digest of the filter and
order so reusing it with another query is refused rather than returning a wrong page.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac

import msgspec

from workers.memory.model.contracts import MemoryFilter, OrderBy
from workers.memory.model.errors import MemoryStoreError
from workers.memory.model.records import canonical_json
from workers.memory.ports import QueryPosition

__all__ = ("decode_cursor", "encode_cursor")

_VERSION = 1
_SIGNATURE_BYTES = 16


def _binding(filter: MemoryFilter, order: OrderBy) -> str:
    digest = hashlib.sha256(
        canonical_json([msgspec.to_builtins(filter), msgspec.to_builtins(order)])
    )
    return digest.hexdigest()[:24]


def encode_cursor(
    secret: bytes, filter: MemoryFilter, order: OrderBy, position: QueryPosition
) -> str:
    payload = msgspec.msgpack.encode([_VERSION, _binding(filter, order), position[0], position[1]])
    signature = hmac.digest(secret, payload, "sha256")[:_SIGNATURE_BYTES]
    return base64.urlsafe_b64encode(payload + signature).rstrip(b"=").decode("ascii")


def decode_cursor(
    secret: bytes, filter: MemoryFilter, order: OrderBy, cursor: str
) -> QueryPosition:
    """The position ``cursor`` points after.

    Raises:
        MemoryStoreError: ``INVALID_INPUT`` for a malformed or tampered cursor, or one issued
            for another filter or order.
    """
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
    except (binascii.Error, ValueError):
        raise MemoryStoreError("invalid cursor") from None
    payload, signature = raw[:-_SIGNATURE_BYTES], raw[-_SIGNATURE_BYTES:]
    expected = hmac.digest(secret, payload, "sha256")[:_SIGNATURE_BYTES]
    if len(raw) <= _SIGNATURE_BYTES or not hmac.compare_digest(signature, expected):
        raise MemoryStoreError("invalid cursor")
    try:
        version, binding, key, last_id = msgspec.msgpack.decode(
            payload, type=tuple[int, str, int, str]
        )
    except msgspec.DecodeError:
        raise MemoryStoreError("invalid cursor") from None
    if version != _VERSION or binding != _binding(filter, order):
        raise MemoryStoreError("this cursor was issued for another filter or order")
    return key, last_id
