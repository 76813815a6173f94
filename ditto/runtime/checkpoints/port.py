"""``CheckpointStore``: where a run's checkpoint lives between a crash and its resume.

The store is deliberately dumb: it keeps opaque bytes. Encoding, digests and what an envelope or
a record means belong to the runtime. A checkpoint is one small *envelope* (saved, replaced as a
whole) plus an append-only list of *records*, one per finished task, written as each task
finishes — so appends are frequent, small and concurrent, and every backend makes them cheap.

One process at a time runs a checkpoint: it holds the checkpoint's *lease* (:class:`Lease`,
time-bounded, renewed while the run goes on) and passes it as ``fence=`` to its writes. The
store checks the lease in the same transaction or script as the write, so a process whose lease
expired or was taken over can never write over the new holder (its fencing token is stale).

Every backend validates its arguments with the helpers here (and those of leases in
:mod:`~ditto.runtime.checkpoints.leases`), so an id that one backend refuses is refused by all
of them, before any I/O.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any, Protocol

import msgspec

from ditto.errors import DittoError, ErrorCode

__all__ = (
    "MAX_ID_LENGTH",
    "MAX_SCOPE_LENGTH",
    "CheckpointError",
    "CheckpointInfo",
    "CheckpointStore",
    "Lease",
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

    def __init__(
        self,
        code: ErrorCode,
        message: str,
        *,
        retryable: bool = False,
        details: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(message, code=code, retryable=retryable, details=details)


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


class Lease(msgspec.Struct, frozen=True):
    """The right to write one checkpoint, until ``expires_at`` (see
    :meth:`CheckpointStore.acquire`)."""

    checkpoint_id: str
    """The checkpoint it covers (which need not exist yet)."""
    holder: str
    """Who holds it (e.g. ``"host:pid:run-id"``): a second opener is shown this."""
    token: int
    """The fencing token: strictly increasing over every acquire of the store (one counter per
    store, not per checkpoint: the in-process object, the SQLite file, the Redis prefix), never
    reused, so a newer holder always has a greater token."""
    expires_at: float
    """Unix seconds on the *store's* clock (in-process: its ``clock``; SQLite: ``time.time()``
    of the process that wrote it; Redis: the server's ``TIME``). Compare it with the store's
    clock only: the caller's may differ."""


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
    * Leases: at most one unexpired :class:`Lease` per checkpoint id at any moment of the
      store's clock, across every process using the store; concurrent :meth:`acquire` calls
      give exactly one lease, the others ``CHECKPOINT_BUSY``. Tokens strictly increase over
      every acquire of the store.
    * Fencing: a write given ``fence=`` lands only if that lease is still held (same token,
      unexpired on the store's clock), checked atomically with the write (one transaction or
      one script); otherwise it is ``CHECKPOINT_LEASE_LOST`` and nothing is written. Writes
      without ``fence`` ignore leases, except :meth:`delete`, which never removes a checkpoint
      whose lease is live (so pruning never deletes a running run's checkpoint).
    """

    async def save(
        self, checkpoint_id: str, scope: str, envelope: bytes, *, fence: Lease | None = None
    ) -> None:
        """Create ``checkpoint_id`` or replace its scope and envelope; its records are kept.

        Args:
            checkpoint_id: 1 to 200 characters, no control characters.
            scope: 1 to 256 characters, no control characters.
            envelope: The bytes to keep (``b""`` is fine).
            fence: The lease of ``checkpoint_id`` the writer holds: the save lands only while
                it is held.

        Raises:
            CheckpointError: ``CHECKPOINT_LEASE_LOST`` (``fence`` expired, released or taken
                over: nothing is written); ``INVALID_INPUT`` (also a ``fence`` of another
                checkpoint); ``CHECKPOINT_STORE_UNAVAILABLE``.
        """
        ...

    async def append(
        self,
        checkpoint_id: str,
        records: Sequence[tuple[str, bytes]],
        *,
        fence: Lease | None = None,
    ) -> None:
        """Add ``records`` after the existing ones, in order; durable when it returns. An empty
        sequence only checks that the checkpoint exists (and changes nothing).

        Args:
            checkpoint_id: A saved checkpoint.
            records: ``(key, value)`` tuples: a non-empty key, a bytes value.
            fence: As for :meth:`save` (checked before the checkpoint's existence).

        Raises:
            CheckpointError: ``CHECKPOINT_LEASE_LOST`` (nothing is written);
                ``CHECKPOINT_NOT_FOUND`` when the checkpoint was never saved or was deleted
                (nothing is written); ``INVALID_INPUT``; ``CHECKPOINT_STORE_UNAVAILABLE``.
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

    async def delete(self, checkpoint_id: str, *, fence: Lease | None = None) -> bool:
        """Remove the envelope and every record; with ``fence``, release the lease too.

        Args:
            checkpoint_id: The checkpoint.
            fence: Its lease, held by the caller. Without it, a checkpoint whose lease is live
                is not deleted (``CHECKPOINT_BUSY``); an expired lease is cleared with it.

        Returns:
            Whether the checkpoint existed.

        Raises:
            CheckpointError: ``CHECKPOINT_BUSY`` (retryable; ``details`` as for
                :meth:`acquire`) without ``fence`` while someone holds the lease;
                ``CHECKPOINT_LEASE_LOST`` with a ``fence`` no longer held (nothing is
                deleted); ``INVALID_INPUT``; ``CHECKPOINT_STORE_UNAVAILABLE``.
        """
        ...

    async def acquire(self, checkpoint_id: str, holder: str, ttl: float) -> Lease:
        """Take the lease of ``checkpoint_id`` for ``ttl`` seconds (the checkpoint need not
        exist yet: a new run takes it before its first save).

        Args:
            checkpoint_id: As for :meth:`save`.
            holder: Who asks, shown to a second opener: 1 to 200 characters, no control
                characters.
            ttl: Seconds until it expires unless renewed: a finite number above 0, at most a
                day.

        Returns:
            A new lease with a token greater than every token the store gave before. An
            acquire whose caller was cancelled may still have taken the lease: nobody else
            gets it until it expires.

        Raises:
            CheckpointError: ``CHECKPOINT_BUSY`` (retryable) while an unexpired lease is held
                by anyone, the same ``holder`` included; ``details`` are ``{"holder": str,
                "expires_in": seconds}``. ``INVALID_INPUT``; ``CHECKPOINT_STORE_UNAVAILABLE``.
        """
        ...

    async def renew(self, lease: Lease, ttl: float) -> Lease:
        """Extend a lease still held: the same token, ``expires_at`` ``ttl`` seconds from now.

        Raises:
            CheckpointError: ``CHECKPOINT_LEASE_LOST`` once the lease expired (even if nobody
                took it since), was released or taken over; ``INVALID_INPUT``;
                ``CHECKPOINT_STORE_UNAVAILABLE``.
        """
        ...

    async def release(self, lease: Lease) -> None:
        """Give the lease up if it is still held with its token; else do nothing (idempotent:
        releasing a lost lease never raises and never touches the new holder's).

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
