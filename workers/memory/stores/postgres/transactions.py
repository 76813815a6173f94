"""Transactions of the PostgreSQL store whose outcome is the call's.

Right before ``COMMIT`` the call claims its outcome from the runtime (its deadline no longer
cancels it: ``timeout`` promises "not written", and a commit on its way is not that). A
connection lost while the ``COMMIT`` was on the wire leaves the outcome unknown — the server
may have committed — which is ``OUTCOME_UNKNOWN`` (never retryable: a retry could write twice),
not the retryable ``STORE_UNAVAILABLE`` of a failure before the commit.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

import asyncpg

from ditto.contracts.outcomes import claim_outcome
from ditto.errors import ErrorCode, ExceptionMapping, map_exceptions
from workers.memory.model.errors import MemoryStoreError
from workers.memory.stores.postgres.errors import UNREACHABLE

if TYPE_CHECKING:
    from workers.memory.stores.postgres.pool import Connection

__all__ = ("committing",)


def _unknown(exc: BaseException) -> MemoryStoreError:
    return MemoryStoreError(
        "the connection to the memory store failed while the change was committing: it may "
        "or may not be stored (read it back before writing it again)",
        code=ErrorCode.OUTCOME_UNKNOWN,
    )


def _refused(exc: asyncpg.PostgresError) -> None:
    return None  # the server refused the COMMIT and rolled back: not unknown, its own failure


_COMMIT_ERRORS: ExceptionMapping = {
    UNREACHABLE: _unknown,
    asyncpg.PostgresError: _refused,
    Exception: _unknown,  # the connection broke with the COMMIT on the wire
}
"""A caller cancelled during ``COMMIT`` is not an ``Exception``: it passes through."""
_COMMITTING = map_exceptions(_COMMIT_ERRORS)


@asynccontextmanager
async def committing(connection: Connection) -> AsyncIterator[None]:
    """One transaction: rolled back when the block raises (or is cancelled), committed when it
    ends, with the outcome claimed first.

    Raises:
        MemoryStoreError: ``OUTCOME_UNKNOWN`` when the connection failed during ``COMMIT``.
    """
    transaction = connection.transaction()
    await transaction.start()
    try:
        yield
    except BaseException:
        # A lost connection cannot roll back, and need not: the server already has.
        with contextlib.suppress(*UNREACHABLE):
            await transaction.rollback()
        raise
    claim_outcome()
    with _COMMITTING:
        await transaction.commit()
