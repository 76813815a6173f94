"""The PostgreSQL store's one driver-error boundary (httpcore's ``map_exceptions`` shape).

Every call into asyncpg runs inside :func:`postgres_errors`. Messages are ours: they never
carry the URL, the host, the user or a password (the driver's text can hold any of them); the
driver's exception is chained (``from exc``) so the log keeps the cause. Errors it does not
know pass through untouched and the worker reports them as ``MEMORY_BACKEND_ERROR``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import asyncpg

from workers.memory.errors import MemoryErrorCode, MemoryStoreError

__all__ = ("UNREACHABLE", "postgres_errors", "translate")

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


def translate(exc: BaseException) -> MemoryStoreError | None:
    """The store error for a driver failure, or ``None`` when it is not the driver's."""
    if isinstance(exc, asyncpg.exceptions.QueryCanceledError):
        return MemoryStoreError(
            "the memory store did not answer in time",
            code=MemoryErrorCode.STORE_TIMEOUT,
            retryable=True,
        )
    if isinstance(exc, _REFUSED):
        # Not retryable: the same credentials, database and grants fail the same way again.
        return MemoryStoreError(
            "the memory store refused the connection or the statement: check the PostgreSQL "
            "role, its password, the database name and the role's privileges",
            code=MemoryErrorCode.STORE_UNAVAILABLE,
        )
    if isinstance(exc, asyncpg.exceptions.ReadOnlySQLTransactionError):
        return MemoryStoreError(
            "the memory store is read-only (a standby or a read-only transaction)",
            code=MemoryErrorCode.STORE_READ_ONLY,
        )
    if isinstance(exc, asyncpg.exceptions.DiskFullError):
        return MemoryStoreError(
            "the memory store's disk is full", code=MemoryErrorCode.STORE_UNAVAILABLE
        )
    if isinstance(exc, UNREACHABLE):
        return MemoryStoreError(
            "the memory store is unreachable",
            code=MemoryErrorCode.STORE_UNAVAILABLE,
            retryable=True,
        )
    return None


@asynccontextmanager
async def postgres_errors() -> AsyncIterator[None]:
    """Translate driver failures raised inside the block (see :func:`translate`)."""
    try:
        yield
    except UnicodeEncodeError as exc:  # asyncpg encoding a lone surrogate
        raise MemoryStoreError(
            "text that is not valid Unicode cannot be stored or looked up"
        ) from exc
    except (asyncpg.PostgresError, asyncpg.InterfaceError, OSError, TimeoutError) as exc:
        translated = translate(exc)
        if translated is None:
            raise
        raise translated from exc
