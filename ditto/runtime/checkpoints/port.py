"""``CheckpointStore``: where a run's checkpoint lives between a crash and its resume.

The store is deliberately dumb: it keeps opaque bytes. Encoding, digests and what an envelope or
a record means belong to the runtime. A checkpoint is one small *envelope* (saved, replaced as a
whole) plus an append-only list of *records*, one per finished task, written as each task
finishes — so appends are frequent, small and concurrent, and every backend makes them cheap.

Every backend validates its arguments with the helpers here, so an id that one backend refuses
is refused by all of them, before any I/O.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Protocol

import msgspec

from ditto.errors import DittoError, ErrorCode

__all__ = (
    "MAX_ID_LENGTH",
    "MAX_SCOPE_LENGTH",
    "CheckpointError",
    "CheckpointInfo",
    "CheckpointStore",
    "StoredCheckpoint",
    "checked_bytes",
    "checked_id",
    "checked_limit",
    "checked_records",
    "checked_scope",
    "closed",
    "not_found",
)

MAX_ID_LENGTH = 200
"""Longest checkpoint id, in characters."""

MAX_SCOPE_LENGTH = 256
"""Longest scope, in characters (room for ``"loop:"`` plus a full-length id)."""

# C0 and C1 control characters, and lone surrogates (no store can encode those as UTF-8).
_FORBIDDEN = re.compile("[\x00-\x1f\x7f-\x9f\ud800-\udfff]")
_SURROGATE = re.compile("[\ud800-\udfff]")


class CheckpointError(DittoError):
    """A checkpoint store failure with a stable code and a message safe to show: never a URL,
    a password or a driver's text (the driver's exception is kept as ``__cause__``)."""

    def __init__(self, code: ErrorCode, message: str, *, retryable: bool = False) -> None:
        super().__init__(message, code=code, retryable=retryable)


class CheckpointInfo(msgspec.Struct, frozen=True):
    """One checkpoint as :meth:`CheckpointStore.list` reports it (no payload)."""

    id: str
    """The checkpoint id."""
    scope: str
    """What the checkpoint belongs to, e.g. ``"graph:<graph id>"`` or ``"loop:<loop id>"``."""
    updated_at: float
    """Unix seconds of the last save or (non-empty) append."""
    records: int
    """How many records are stored."""


class StoredCheckpoint(msgspec.Struct, frozen=True):
    """A checkpoint as :meth:`CheckpointStore.load` returns it."""

    id: str
    """The checkpoint id."""
    scope: str
    """The scope of the last save."""
    envelope: bytes
    """The last saved envelope, verbatim."""
    records: tuple[tuple[str, bytes], ...]
    """Every appended ``(key, value)``, in append order. A key appended again is kept again:
    the last one for a key is the truth."""
    updated_at: float
    """Unix seconds of the last save or (non-empty) append."""


class CheckpointStore(Protocol):
    """Checkpoints: one envelope and an append-only list of records each.

    Guarantees, the same for every backend (the conformance suite checks each):

    * A call that returns has taken effect and is durable as far as the backend is (SQLite:
      survives the process being killed; Redis: as its persistence is configured).
    * :meth:`append` is atomic per call and never interleaves: concurrent appends to one
      checkpoint each land exactly once, each call's records contiguous, in some order.
    * Arguments are validated before any I/O: a bad one raises ``INVALID_INPUT`` and touches
      nothing.
    * A call whose caller is cancelled while it waits may still take effect (a record written
      twice is harmless: the last one for a key wins).
    * Backend failures are ``CHECKPOINT_STORE_UNAVAILABLE`` (retryable) with a message that
      names no URL, password or driver text; data the store cannot read is
      ``CHECKPOINT_CORRUPT``. After :meth:`aclose`, every call raises
      ``CHECKPOINT_STORE_UNAVAILABLE`` (not retryable).
    """

    async def save(self, checkpoint_id: str, scope: str, envelope: bytes) -> None:
        """Create ``checkpoint_id`` or replace its scope and envelope; its records are kept.

        Args:
            checkpoint_id: 1 to 200 characters, no control characters.
            scope: 1 to 256 characters, no control characters.
            envelope: The bytes to keep (``b""`` is fine).

        Raises:
            CheckpointError: ``INVALID_INPUT``, ``CHECKPOINT_STORE_UNAVAILABLE``.
        """
        ...

    async def append(self, checkpoint_id: str, records: Sequence[tuple[str, bytes]]) -> None:
        """Add ``records`` after the existing ones, in order; durable when it returns. An empty
        sequence only checks that the checkpoint exists (and changes nothing).

        Args:
            checkpoint_id: A saved checkpoint.
            records: ``(key, value)`` tuples: a non-empty key, a bytes value.

        Raises:
            CheckpointError: ``CHECKPOINT_NOT_FOUND`` when the checkpoint was never saved or
                was deleted (nothing is written); ``INVALID_INPUT``;
                ``CHECKPOINT_STORE_UNAVAILABLE``.
        """
        ...

    async def load(self, checkpoint_id: str) -> StoredCheckpoint | None:
        """The checkpoint with every record (one consistent snapshot), or ``None``.

        Raises:
            CheckpointError: ``INVALID_INPUT``, ``CHECKPOINT_CORRUPT``,
                ``CHECKPOINT_STORE_UNAVAILABLE``.
        """
        ...

    async def list(self, *, scope: str | None = None, limit: int = 100) -> list[CheckpointInfo]:
        """Checkpoints, most recently updated first (equal times: greater id first).

        Args:
            scope: Only checkpoints whose scope is exactly this.
            limit: At most this many (a positive integer).

        Raises:
            CheckpointError: ``INVALID_INPUT``, ``CHECKPOINT_CORRUPT``,
                ``CHECKPOINT_STORE_UNAVAILABLE``.
        """
        ...

    async def delete(self, checkpoint_id: str) -> bool:
        """Remove the envelope and every record.

        Returns:
            Whether the checkpoint existed.

        Raises:
            CheckpointError: ``INVALID_INPUT``, ``CHECKPOINT_STORE_UNAVAILABLE``.
        """
        ...

    async def aclose(self) -> None:
        """Release what the store owns (threads, connections, a client built by ``from_url``;
        never an injected client). Idempotent."""
        ...


# ----------------------------------------------------------------------- validation


def _invalid(message: str) -> CheckpointError:
    return CheckpointError(ErrorCode.INVALID_INPUT, message)


def checked_id(checkpoint_id: object) -> str:
    """``checkpoint_id`` if it is a valid id.

    Raises:
        CheckpointError: ``INVALID_INPUT``.
    """
    if (
        type(checkpoint_id) is not str
        or not 0 < len(checkpoint_id) <= MAX_ID_LENGTH
        or _FORBIDDEN.search(checkpoint_id) is not None
    ):
        raise _invalid(
            f"a checkpoint id must be a string of 1 to {MAX_ID_LENGTH} characters "
            "without control characters"
        )
    return checkpoint_id


def checked_scope(scope: object) -> str:
    """``scope`` if it is a valid scope.

    Raises:
        CheckpointError: ``INVALID_INPUT``.
    """
    if (
        type(scope) is not str
        or not 0 < len(scope) <= MAX_SCOPE_LENGTH
        or _FORBIDDEN.search(scope) is not None
    ):
        raise _invalid(
            f"a checkpoint scope must be a string of 1 to {MAX_SCOPE_LENGTH} characters "
            "without control characters"
        )
    return scope


def checked_bytes(value: object, what: str) -> bytes:
    """``value`` as ``bytes`` (a ``bytes`` subclass is copied into a plain one).

    Raises:
        CheckpointError: ``INVALID_INPUT`` for anything else (``bytearray`` included: the
            caller could change it after the call).
    """
    if type(value) is bytes:
        return value
    if isinstance(value, bytes):
        return bytes(value)
    raise _invalid(f"{what} must be bytes, not {type(value).__name__}")


def checked_records(records: object) -> tuple[tuple[str, bytes], ...]:
    """A private, immutable copy of ``records``.

    Raises:
        CheckpointError: ``INVALID_INPUT`` unless ``records`` is a sequence (not text) of
            ``(key, value)`` tuples with a non-empty string key and a bytes value.
    """
    if not isinstance(records, Sequence) or isinstance(records, str | bytes | bytearray):
        raise _invalid("records must be a sequence of (key, value) tuples")
    copied: list[tuple[str, bytes]] = []
    for record in records:
        if type(record) is not tuple or len(record) != 2:
            raise _invalid("each record must be a (key, value) tuple")
        key, value = record
        if type(key) is not str or not key or _SURROGATE.search(key) is not None:
            raise _invalid("a record key must be a non-empty string of valid Unicode")
        copied.append((key, checked_bytes(value, "a record value")))
    return tuple(copied)


def checked_limit(limit: object) -> int:
    """``limit`` if it is a positive integer.

    Raises:
        CheckpointError: ``INVALID_INPUT``.
    """
    if type(limit) is not int or limit < 1:
        raise _invalid("limit must be a positive integer")
    return limit


def not_found() -> CheckpointError:
    return CheckpointError(ErrorCode.CHECKPOINT_NOT_FOUND, "no checkpoint has this id")


def closed() -> CheckpointError:
    return CheckpointError(ErrorCode.CHECKPOINT_STORE_UNAVAILABLE, "the checkpoint store is closed")
