"""MEMORY error codes and the error stores raise."""

from __future__ import annotations

from enum import StrEnum

from ditto.errors import DittoError, ErrorCode

__all__ = ("MemoryErrorCode", "MemoryStoreError", "SearchUnavailableError")


class MemoryErrorCode(StrEnum):
    """Codes specific to the MEMORY worker (it also uses ``INVALID_INPUT``, ``NOT_FOUND`` and
    ``CONFLICT`` from :class:`ditto.ErrorCode`)."""

    SEARCH_UNAVAILABLE = "SEARCH_UNAVAILABLE"
    """No search provider was given and the store has no search of its own."""
    INVALID_BACKEND_OUTPUT = "INVALID_BACKEND_OUTPUT"
    """A store or provider returned something that breaks the node's contract."""
    MEMORY_BACKEND_ERROR = "MEMORY_BACKEND_ERROR"
    """A store or provider failed unexpectedly; details are in the log only."""
    STORE_UNAVAILABLE = "STORE_UNAVAILABLE"
    """The store cannot be reached or opened, or the connection or disk failed mid-operation;
    retryable when the outage may pass (a lost connection, an I/O error), not when the store
    cannot be opened as configured (a missing folder, no permission, a full disk)."""
    STORE_CORRUPT = "STORE_CORRUPT"
    """The store's file or schema is not a memory store (not a database, truncated, damaged,
    or written by a newer version of Ditto); nothing was changed."""
    OUTCOME_UNKNOWN = "OUTCOME_UNKNOWN"
    """The connection to the store failed while a change was committing: it may or may not be
    stored. Not retryable as is (a retry could apply it twice): read the records back first."""
    STORE_READ_ONLY = "STORE_READ_ONLY"
    """A change was asked of a store that can only be read (a read-only file or database);
    nothing was changed."""
    UNSUPPORTED = "UNSUPPORTED"
    """The store does not offer this operation (for example a store that keeps no history)."""
    STORE_TIMEOUT = "STORE_TIMEOUT"
    """The store did not answer in time: a statement timeout, or a database locked by another
    writer past the busy timeout (retryable)."""
    EMBEDDING_MISMATCH = "EMBEDDING_MISMATCH"
    """Vectors of another embedding model (or dimension) than the store holds: it never
    compares incomparable vectors; ``reindex`` moves a store to a new model."""
    EMBEDDING_FAILED = "EMBEDDING_FAILED"
    """The embedder failed or returned vectors of the wrong count, dimension or non-finite
    values; nothing was stored."""
    EMBEDDER_UNAVAILABLE = "EMBEDDER_UNAVAILABLE"
    """The configured embedder cannot run here (its model files or extra are not installed);
    the message names the command that installs them."""
    FORBIDDEN = "FORBIDDEN"
    """Access control refused the call: another principal's private record, or no principal
    where ``acl.mode: enforce`` needs one."""


class MemoryStoreError(DittoError):
    """Raised by stores and providers with a stable code and a message safe to show.

    Use the codes ``NOT_FOUND``, ``CONFLICT``, ``INVALID_INPUT`` or a
    :class:`MemoryErrorCode`; anything a store raises that is not a ``DittoError`` becomes
    ``MEMORY_BACKEND_ERROR`` with a fixed message.
    """

    default_code: str = ErrorCode.INVALID_INPUT


class SearchUnavailableError(MemoryStoreError):
    """SEARCH was called but nothing can search."""

    default_code: str = MemoryErrorCode.SEARCH_UNAVAILABLE

    def __init__(self) -> None:
        super().__init__("no search provider is configured and the store cannot search")


def not_found(message: str) -> MemoryStoreError:
    return MemoryStoreError(message, code=ErrorCode.NOT_FOUND)


def conflict(message: str) -> MemoryStoreError:
    return MemoryStoreError(message, code=ErrorCode.CONFLICT)


def forbidden(message: str) -> MemoryStoreError:
    return MemoryStoreError(message, code=MemoryErrorCode.FORBIDDEN)


def key_taken(namespace: str, key: str | None) -> MemoryStoreError:
    """``CONFLICT``: restoring a record whose key another record already holds."""
    return conflict(f"key {key!r} in namespace {namespace!r} belongs to another record")
