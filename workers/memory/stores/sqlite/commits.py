"""Group commit for the SQLite store's writer: the writes queued while it was busy, in one
transaction, each caller still getting its own result or its own failure.

A group first runs its writes side by side with no savepoint: a savepoint copies every page a
write changes before changing it, and writes rarely fail. When one does, the transaction is
rolled back and the group runs again carefully, each write in its own savepoint, so the failure
is that write's alone. A write alone in its transaction needs no savepoint either way. A caller
who gave up (its deadline passed) before its write committed has nothing written: its write is
skipped, or rolled back with the group, which then commits without it.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

from workers.memory.stores.sqlite.jobs import Aborted, Job, begin_immediate

__all__ = ("QueuedWrite", "Usage", "commit_group")

_APPLY_USAGE = (
    "UPDATE memories SET usage_count = usage_count + ?, "
    "last_used_at = max(coalesce(last_used_at, ?), ?) WHERE id = ?"
)


Usage = dict[str, tuple[int, int]]
"""Pending usage counters: record id → (uses, last use in UTC microseconds)."""


@dataclass(slots=True)
class QueuedWrite:
    """A queued write: the job its caller may abort, what to run, where its answer goes."""

    job: Job
    function: Callable[..., Any]
    args: tuple[Any, ...]
    future: Future[Any]

    def fail(self, error: BaseException) -> None:
        self.job.finish()
        if not self.future.done():
            self.future.set_exception(error)


_FAILED = object()
_TRANSACTION_LOST = object()
_RUN_CAREFULLY = object()


def _started(connection: sqlite3.Connection, request: QueuedWrite) -> bool:
    """Start the request's job; a caller who gave up meanwhile is told, and it is skipped."""
    try:
        request.job.start(connection)
    except Aborted as exc:
        request.fail(exc)
        return False
    return True


def _run_in_savepoint(
    connection: sqlite3.Connection, request: QueuedWrite, *, savepoint: bool
) -> Any:
    """Run one write inside its own savepoint: its result, or ``_FAILED`` (its changes undone,
    its caller told), or ``_TRANSACTION_LOST`` (its failure ended the whole transaction, as it
    always does without a savepoint)."""
    if not _started(connection, request):
        return _FAILED
    try:
        if savepoint:
            connection.execute("SAVEPOINT ditto_write")
        result = request.function(connection, *request.args)
    except BaseException as exc:
        request.job.ran()
        request.fail(Aborted() if request.job.aborted else exc)
        if not savepoint or not connection.in_transaction:
            rollback(connection)
            return _TRANSACTION_LOST
        connection.execute("ROLLBACK TO ditto_write")
        connection.execute("RELEASE ditto_write")
        return _FAILED
    request.job.ran()
    if savepoint:
        connection.execute("RELEASE ditto_write")
    return result


def _run_optimistically(connection: sqlite3.Connection, request: QueuedWrite) -> Any:
    """Run one write of a group with no savepoint: its result, ``_FAILED`` (its caller gave
    up, so it is not run), or ``_RUN_CAREFULLY`` (it failed: the transaction is rolled back,
    and the group must run again, each write in a savepoint; the failure is not yet its
    answer, since a write of the group before it may have caused it)."""
    if not _started(connection, request):
        return _FAILED
    try:
        result = request.function(connection, *request.args)
    except BaseException:
        request.job.ran()
        rollback(connection)
        return _RUN_CAREFULLY
    request.job.ran()
    return result


def rollback(connection: sqlite3.Connection) -> None:
    if connection.in_transaction:
        connection.execute("ROLLBACK")


def commit_group(
    connection: sqlite3.Connection,
    group: list[QueuedWrite],
    usage: Usage,
    busy_timeout_s: float,
    check_file: Callable[[], None],
) -> bool:
    """Commit ``group`` (and the pending ``usage`` counters) in as few transactions as its
    failures allow; every write gets its answer. ``check_file`` runs inside each
    transaction right after ``BEGIN`` and again just before ``COMMIT``: when it raises, the
    transaction is rolled back and every write of it fails with that error (nothing of it is
    acknowledged). Returns whether the usage was stored."""
    committed = careful = False
    try:
        while group and not committed:
            group, committed, careful = _attempt(
                connection, group, usage, careful, busy_timeout_s, check_file
            )
    except BaseException as exc:  # a bug, never a hang: every caller still gets an answer
        rollback(connection)
        for request in group:
            request.fail(exc)
        raise
    return committed


def _attempt(
    connection: sqlite3.Connection,
    group: list[QueuedWrite],
    usage: Usage,
    careful: bool,
    busy_timeout_s: float,
    check_file: Callable[[], None],
) -> tuple[list[QueuedWrite], bool, bool]:
    """One transaction for ``group``. Returns the writes to run again in a new one (when a
    failure ended this transaction, or a caller gave up after its part ran), whether this
    one committed, and whether the next attempt must be careful.

    Writes of a group first run side by side with no savepoint: a savepoint copies every
    page a write changes before changing it, and writes rarely fail. When one does, the
    transaction is rolled back and the group runs again carefully, each write in its own
    savepoint, so the failure is that write's alone. A write alone in its transaction
    needs no savepoint either way."""
    try:
        begin_immediate(
            connection,
            lambda: all(request.job.aborted for request in group),
            busy_timeout_s,
        )
        check_file()
        if usage:
            connection.executemany(
                _APPLY_USAGE,
                [(count, at, at, item_id) for item_id, (count, at) in usage.items()],
            )
    except BaseException as exc:
        rollback(connection)
        for request in group:
            request.fail(exc)
        return [], False, careful
    done: list[tuple[QueuedWrite, Any]] = []
    alone = len(group) == 1
    for position, request in enumerate(group):
        if not alone and not careful:
            outcome = _run_optimistically(connection, request)
            if outcome is _RUN_CAREFULLY:
                return [*(ran for ran, _ in done), *group[position:]], False, True
        else:
            outcome = _run_in_savepoint(connection, request, savepoint=not alone)
        if outcome is _TRANSACTION_LOST:
            # The failure ended the whole transaction (an interrupt, a full disk): that
            # write has its answer; the others run again in a new transaction.
            return [*(ran for ran, _ in done), *group[position + 1 :]], False, careful
        if outcome is not _FAILED:
            done.append((request, outcome))
    refused = [request for request, _ in done if not request.job.may_commit()]
    try:
        if refused:  # a caller gave up after its part ran: write the others without it
            raise Aborted()
        check_file()
        connection.execute("COMMIT")
    except BaseException as exc:
        rollback(connection)
        for request in refused:
            request.fail(Aborted())
        if refused and isinstance(exc, Aborted):
            return [request for request, _ in done if request not in refused], False, careful
        for request, _ in done:
            request.fail(exc)
        return [], False, careful
    for request, result in done:
        request.job.finish()
        request.future.set_result(result)
    return [], True, careful
