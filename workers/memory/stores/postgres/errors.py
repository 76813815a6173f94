"""The PostgreSQL store's one driver-error boundary (httpcore's ``map_exceptions`` shape).

Every call into asyncpg runs inside :func:`postgres_errors`. Messages are ours: they never
carry the URL, the host, the user or a password (the driver's text can hold any of them); the
driver's exception is chained (``from exc``) so the log keeps the cause. Errors it does not
know pass through untouched and the worker reports them as ``MEMORY_BACKEND_ERROR``.
"""

from __future__ import annotations

import asyncpg

from ditto.errors import ErrorCode, ExceptionMapping, map_exceptions
from workers.memory.model.errors import MemoryStoreError

__all__ = ("POSTGRES_ERRORS", "UNREACHABLE", "postgres_errors")

UNREACHABLE: tuple[type[BaseException], ...] = (
    OSError,
    TimeoutError,
    asyncpg.exceptions.ConnectionDoesNotExistError,
    asyncpg.exceptions.CannotConnectNowError,
    asyncpg.exceptions.TooManyConnectionsError,
    asyncpg.exceptions.ConnectionFailureError,
    asyncpg.exceptions.InterfaceError,
    asyncpg.exceptions.AdminShutdownError,
    asyncpg.exceptions.CrashShutdownError,
)
_REFUSED = (
    asyncpg.exceptions.InvalidPasswordError,
    asyncpg.exceptions.InvalidAuthorizationSpecificationError,
    asyncpg.exceptions.InvalidCatalogNameError,
    asyncpg.exceptions.InsufficientPrivilegeError,
)


def _not_unicode(exc: UnicodeEncodeError) -> MemoryStoreError:
    # asyncpg encoding a lone surrogate
    return MemoryStoreError("text that is not valid Unicode cannot be stored or looked up")


def _timed_out(exc: asyncpg.exceptions.QueryCanceledError) -> MemoryStoreError:
    return MemoryStoreError(
        "the memory store did not answer in time", code=ErrorCode.STORE_TIMEOUT, retryable=True
    )


def _refused(exc: asyncpg.PostgresError) -> MemoryStoreError:
    # Not retryable: the same credentials, database and grants fail the same way again.
    return MemoryStoreError(
        "the memory store refused the connection or the statement: check the PostgreSQL "
        "role, its password, the database name and the role's privileges",
        code=ErrorCode.STORE_UNAVAILABLE,
    )


def _read_only(exc: asyncpg.exceptions.ReadOnlySQLTransactionError) -> MemoryStoreError:
    return MemoryStoreError(
        "the memory store is read-only (a standby or a read-only transaction)",
        code=ErrorCode.STORE_READ_ONLY,
    )


def _disk_full(exc: asyncpg.exceptions.DiskFullError) -> MemoryStoreError:
    return MemoryStoreError("the memory store's disk is full", code=ErrorCode.STORE_UNAVAILABLE)


def _too_large(exc: asyncpg.exceptions.ProgramLimitExceededError) -> MemoryStoreError:
    # Typically the search index: a tsvector holds at most 1 MB of distinct words and
    # positions (a record of about a megabyte of varied text), an index row about 2.7 KB.
    return MemoryStoreError(
        "a record is too large for PostgreSQL's limits (its text for the search index is "
        "capped near 1 MB): store a shorter text, or keep it in the SQLite or Markdown store"
    )


def _unreachable(exc: BaseException) -> MemoryStoreError:
    return MemoryStoreError(
        "the memory store is unreachable", code=ErrorCode.STORE_UNAVAILABLE, retryable=True
    )


POSTGRES_ERRORS: ExceptionMapping = {
    UnicodeEncodeError: _not_unicode,
    asyncpg.exceptions.QueryCanceledError: _timed_out,
    _REFUSED: _refused,
    asyncpg.exceptions.ReadOnlySQLTransactionError: _read_only,
    asyncpg.exceptions.DiskFullError: _disk_full,
    asyncpg.exceptions.ProgramLimitExceededError: _too_large,
    UNREACHABLE: _unreachable,
}
"""Every other driver failure (a constraint, a syntax error: a bug of ours) passes through."""

_BOUNDARY = map_exceptions(POSTGRES_ERRORS)


def postgres_errors() -> map_exceptions:
    """Translate driver failures raised inside the block (``async with postgres_errors():``;
    see :data:`POSTGRES_ERRORS`)."""
    return _BOUNDARY
