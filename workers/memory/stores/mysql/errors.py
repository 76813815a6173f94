"""The MySQL store's one driver-error boundary (httpcore's ``map_exceptions`` shape).

Every call into the SQL driver runs inside :data:`MYSQL_ERRORS`' boundary. The driver is a
port (``sql_driver``), so the table reads what every MySQL DB-API driver shares (PyMySQL,
asyncmy, aiomysql, mysqlclient): the server's error number in ``args[0]``. Messages are ours:
never the URL, the host, the user or a password; the driver's exception is chained (``from
exc``) so the log keeps the cause. Errors it does not know pass through untouched and the
worker reports them as ``MEMORY_BACKEND_ERROR``.

:func:`committing` adds the one thing a table cannot know: whether ``COMMIT`` was on the wire.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from ditto.contracts.outcomes import claim_outcome
from ditto.errors import DittoError, ErrorCode, ExceptionMapping, map_exceptions
from workers.memory.model.errors import MemoryStoreError
from workers.memory.stores.sql_driver import SqlDriver

__all__ = ("MYSQL_ERRORS", "committing", "error_number", "mysql_errors")

_DBAPI = frozenset(
    {
        "Error",
        "DatabaseError",
        "InterfaceError",
        "OperationalError",
        "InternalError",
        "ProgrammingError",
        "IntegrityError",
        "DataError",
        "NotSupportedError",
    }
)

DUPLICATE_KEY = 1062
_DEADLOCK = 1213
_LOCK_WAIT = 1205
_TIMED_OUT = frozenset({1969, 3024})  # MariaDB max_statement_time, MySQL max_execution_time
_REFUSED = frozenset({1044, 1045, 1049, 1142, 1143, 1227, 1698})
_READ_ONLY = frozenset({1290, 1792, 1836})
_FULL = frozenset({1021, 1114})
_UNREACHABLE = frozenset({0, 1040, 1053, 1152, 1158, 1159, 1160, 1161, 1927, 2002, 2003, 2005,
                          2006, 2013, 2055, 4031})  # fmt: skip
_BAD_TEXT = frozenset({1366, 1300})


def error_number(exc: BaseException) -> int | None:
    """The MySQL error number of a DB-API driver exception (``None`` for anything else)."""
    if not any(kind.__name__ in _DBAPI for kind in type(exc).__mro__):
        return None
    number = exc.args[0] if exc.args else None
    return number if isinstance(number, int) and not isinstance(number, bool) else None


def _client_side(number: int) -> bool:
    # 2xxx are the client library's own errors: the connection, not the statement, failed.
    return 2000 <= number < 3000


def _unreachable() -> MemoryStoreError:
    return MemoryStoreError(
        "the memory store is unreachable", code=ErrorCode.STORE_UNAVAILABLE, retryable=True
    )


def _by_number(exc: Exception) -> MemoryStoreError | None:
    number = error_number(exc)
    if number is None:
        return None
    if number == _DEADLOCK:
        return MemoryStoreError(
            "a concurrent change to the same records won; nothing was changed (retry)",
            code=ErrorCode.CONFLICT,
            retryable=True,
        )
    if number == _LOCK_WAIT or number in _TIMED_OUT:
        return MemoryStoreError(
            "the memory store did not answer in time", code=ErrorCode.STORE_TIMEOUT, retryable=True
        )
    if number in _REFUSED:
        # Not retryable: the same credentials, database and grants fail the same way again.
        return MemoryStoreError(
            "the memory store refused the connection or the statement: check the MySQL user, "
            "its password, the database name and the user's privileges",
            code=ErrorCode.STORE_UNAVAILABLE,
        )
    if number in _READ_ONLY:
        return MemoryStoreError(
            "the memory store is read-only (a replica or --read-only)",
            code=ErrorCode.STORE_READ_ONLY,
        )
    if number in _FULL:
        return MemoryStoreError("the memory store's disk is full", code=ErrorCode.STORE_UNAVAILABLE)
    if number in _BAD_TEXT:
        return MemoryStoreError("text that is not valid Unicode cannot be stored or looked up")
    if number in _UNREACHABLE or _client_side(number):
        return _unreachable()
    return None


def _not_unicode(exc: UnicodeEncodeError) -> MemoryStoreError:
    return MemoryStoreError("text that is not valid Unicode cannot be stored or looked up")


MYSQL_ERRORS: ExceptionMapping = {
    DittoError: lambda exc: None,  # already ours (a conflict a write raised, say)
    UnicodeEncodeError: _not_unicode,
    (OSError, TimeoutError, ConnectionError): lambda exc: _unreachable(),
    Exception: _by_number,
}
"""Every other failure (a syntax error, a constraint: a bug of ours) passes through."""

_BOUNDARY = map_exceptions(MYSQL_ERRORS)


def mysql_errors() -> map_exceptions:
    """Translate driver failures raised inside the block (see :data:`MYSQL_ERRORS`)."""
    return _BOUNDARY


@asynccontextmanager
async def committing(driver: SqlDriver) -> AsyncIterator[SqlDriver]:
    """One transaction on one connection, with the call's outcome claimed right before
    ``COMMIT`` (its deadline no longer cancels it).

    Raises:
        MemoryStoreError: ``OUTCOME_UNKNOWN`` when the connection failed during ``COMMIT``:
            the server may have committed, so a retry could write twice.
    """
    on_the_wire = False
    try:
        async with driver.transaction() as bound:
            yield bound
            claim_outcome()
            on_the_wire = True
    except Exception as exc:
        if on_the_wire and not isinstance(exc, DittoError):
            number = error_number(exc)
            if number is None or number in _UNREACHABLE or _client_side(number):
                raise MemoryStoreError(
                    "the connection to the memory store failed while the change was committing: "
                    "it may or may not be stored (read it back before writing it again)",
                    code=ErrorCode.OUTCOME_UNKNOWN,
                ) from exc
        raise
