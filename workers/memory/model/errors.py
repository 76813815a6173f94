"""The error MEMORY stores raise (its codes are in :class:`ditto.errors.ErrorCode`)."""

from __future__ import annotations

from ditto.errors import DittoError, ErrorCode

__all__ = ("MemoryErrorCode", "MemoryStoreError", "SearchUnavailableError")

# An alias, not a second list: `from workers.memory import MemoryErrorCode` was public API.
MemoryErrorCode = ErrorCode


class MemoryStoreError(DittoError):
    """Raised by stores and providers with a stable code and a message safe to show.

    Use any :class:`~ditto.errors.ErrorCode` (``NOT_FOUND``, ``CONFLICT``, ``INVALID_INPUT``,
    ``STORE_UNAVAILABLE``, ...); anything a store raises that is not a ``DittoError`` becomes
    ``MEMORY_BACKEND_ERROR`` with a fixed message.
    """

    default_code: str = ErrorCode.INVALID_INPUT


class SearchUnavailableError(MemoryStoreError):
    """SEARCH was called but nothing can search."""

    default_code: str = ErrorCode.SEARCH_UNAVAILABLE

    def __init__(self) -> None:
        super().__init__("no search provider is configured and the store cannot search")


def not_found(message: str) -> MemoryStoreError:
    return MemoryStoreError(message, code=ErrorCode.NOT_FOUND)


def conflict(message: str) -> MemoryStoreError:
    return MemoryStoreError(message, code=ErrorCode.CONFLICT)


def forbidden(message: str) -> MemoryStoreError:
    return MemoryStoreError(message, code=ErrorCode.FORBIDDEN)


def key_taken(namespace: str, key: str | None) -> MemoryStoreError:
    """``CONFLICT``: restoring a record whose key another record already holds."""
    return conflict(f"key {key!r} in namespace {namespace!r} belongs to another record")
