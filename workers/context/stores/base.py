"""``ContextStateStore``: where scoped working sets live between calls."""

from __future__ import annotations

import uuid
from abc import ABC, abstractmethod
from typing import NamedTuple

import msgspec

from ditto.errors import ErrorCode
from workers.context.canonical import scope_key
from workers.context.contracts import Context, ContextScope
from workers.context.errors import ContextError

__all__ = ("ContextStateStore", "StoredContext", "decode_context", "encode_context", "new_version")


class StoredContext(NamedTuple):
    """A scope's state: the working set and the version it was written as."""

    version: str
    context: Context


def new_version() -> str:
    """A fresh random version per write, so a value that expired and was re-created never looks
    like the one a stale writer read (no ABA)."""
    return str(uuid.uuid4())


_encoder = msgspec.json.Encoder()
_decoder = msgspec.json.Decoder(Context)


def encode_context(context: Context) -> bytes:
    """The stored form of ``context``.

    Raises:
        ContextError: ``INVALID_INPUT`` when it holds text that is not valid Unicode or values
            that are not JSON (nothing is stored then).
    """
    try:
        return _encoder.encode(msgspec.structs.replace(context, version=None))
    except (TypeError, ValueError, OverflowError, RecursionError) as exc:
        raise ContextError(
            ErrorCode.INVALID_INPUT,
            "the context holds text that is not valid Unicode or values that are not JSON",
        ) from exc


def decode_context(raw: bytes | str) -> Context:
    """Raises:
    ContextError: ``INVALID_STATE`` for anything but a valid context with unique ids."""
    try:
        context = _decoder.decode(raw)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise ContextError(
            ErrorCode.INVALID_STATE, "the store returned invalid context state"
        ) from exc
    if len({item.id for item in context.items}) != len(context.items):
        raise ContextError(ErrorCode.INVALID_STATE, "the stored context repeats an item id")
    return context


class ContextStateStore(ABC):
    """Versioned working sets, one per scope.

    Guarantees:

    * :meth:`get` returns the scope's state, or ``None`` when it is missing or expired; it never
      refreshes the TTL.
    * :meth:`compare_and_set` writes atomically only if the stored version equals
      ``expected_version`` (``None``: only if nothing is stored), with a fresh version and a
      full TTL; otherwise it raises ``STATE_CONFLICT`` and changes nothing.
    * Corrupt stored state is ``INVALID_STATE``; an unreachable store is
      ``STATE_STORE_UNAVAILABLE`` (retryable) — never a silent fallback.
    """

    @abstractmethod
    async def get(self, scope: ContextScope) -> StoredContext | None: ...

    @abstractmethod
    async def compare_and_set(
        self, scope: ContextScope, expected_version: str | None, context: Context
    ) -> StoredContext: ...

    async def aclose(self) -> None:  # noqa: B027 - optional hook
        """Release resources the store owns (not injected clients)."""

    @staticmethod
    def key(scope: ContextScope) -> str:
        """``scope:<sha256>`` of the scope's full tuple."""
        return scope_key(scope.session_id, scope.turn_id, scope.invocation_id)


def conflict() -> ContextError:
    return ContextError(
        ErrorCode.STATE_CONFLICT,
        "the context changed or expired since it was read; reload it before retrying",
    )
