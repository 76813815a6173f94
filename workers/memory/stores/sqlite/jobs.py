"""One operation on a store thread, and how its caller's deadline stops it.

A ``timeout`` result promises that nothing was written, so a write the caller gave up on must
never commit behind its back. Each hop to a store thread carries a :class:`Job` that the thread
and the event loop share under a lock:

* the loop, when the awaiting call is cancelled (its deadline passed, or its caller went),
  **aborts** the job: a job not yet begun never runs; a running one is interrupted
  (``sqlite3.Connection.interrupt``) and its transaction rolled back, and a writer still waiting
  for another process's lock stops waiting within :data:`LOCK_SLICE_S`;
* the thread, right before ``COMMIT``, asks the job whether it **may commit**; once it has, an
  abort comes too late and the caller gets the real outcome (:func:`settle` claims it from the
  runtime, see :func:`ditto.contracts.outcomes.claim_outcome`).

So a store thread is freed soon after its caller's deadline, and ``timeout`` means "not
written".
"""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from collections.abc import Callable
from concurrent.futures import Future
from time import monotonic
from typing import TypeVar

from ditto.contracts.outcomes import claim_outcome, deadline_fired

__all__ = ("LOCK_SLICE_S", "Aborted", "Job", "begin_immediate", "settle")

T = TypeVar("T")

LOCK_SLICE_S = 0.05
"""How long one wait for another process's write lock lasts before the job checks whether its
caller gave up."""

_PENDING, _RUNNING, _RAN, _COMMITTING, _ABORTED, _DONE = range(6)
_BUSY = 5  # SQLITE_BUSY
_INTERRUPT = 9  # SQLITE_INTERRUPT


class Aborted(Exception):
    """The job was stopped before its commit: nothing it did was written."""


class Job:
    """The shared state of one hop: pending, running, ran (its part of a group transaction is
    done, the commit is not), committing, aborted or done."""

    __slots__ = ("_connection", "_lock", "_state")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._state = _PENDING
        self._connection: sqlite3.Connection | None = None

    # -- the thread's side

    def start(self, connection: sqlite3.Connection) -> None:
        """The job begins on ``connection``.

        Raises:
            Aborted: The caller gave up before the thread got to it.
        """
        with self._lock:
            if self._state == _ABORTED:
                raise Aborted()
            self._state = _RUNNING
            self._connection = connection

    def ran(self) -> None:
        """The job's statements are done; the transaction it is part of has not committed. An
        abort from here on interrupts nothing (another job may be using the connection)."""
        with self._lock:
            if self._state == _RUNNING:
                self._state = _RAN
            self._connection = None

    def may_commit(self) -> bool:
        """Whether the thread may commit now (from here on an abort comes too late)."""
        with self._lock:
            if self._state == _ABORTED:
                return False
            self._state = _COMMITTING
            return True

    @property
    def aborted(self) -> bool:
        return self._state == _ABORTED

    def finish(self) -> None:
        with self._lock:
            if self._state != _ABORTED:
                self._state = _DONE
            self._connection = None

    # -- the loop's side

    def abort(self) -> bool:
        """Stop the job unless its commit has begun; ``True`` when stopped in time."""
        with self._lock:
            if self._state in (_COMMITTING, _DONE):
                return False
            if self._state == _RUNNING and self._connection is not None:
                # Under the lock: the thread cannot finish and start another job meanwhile.
                self._connection.interrupt()
            self._state = _ABORTED
            return True


def begin_immediate(
    connection: sqlite3.Connection, gave_up: Callable[[], bool], budget_s: float
) -> None:
    """``BEGIN IMMEDIATE``, waiting at most ``budget_s`` for another process's write lock, in
    slices of :data:`LOCK_SLICE_S` so aborted jobs stop waiting (SQLite's own busy wait
    ignores interrupts). The connection's ``busy_timeout`` must be the slice.

    Raises:
        Aborted: ``gave_up()`` said every caller gave up while the jobs waited.
        sqlite3.OperationalError: ``SQLITE_BUSY`` once the budget is spent.
    """
    give_up = monotonic() + budget_s
    while True:
        try:
            connection.execute("BEGIN IMMEDIATE")
            return
        except sqlite3.OperationalError as exc:
            code = (getattr(exc, "sqlite_errorcode", 0) or 0) & 0xFF
            if code == _INTERRUPT and not gave_up() and monotonic() < give_up:
                # An interrupt meant for an earlier job that had just finished: SQLite keeps
                # the flag until no statement of the connection is active. Not this one's.
                continue
            if code != _BUSY or monotonic() >= give_up:
                raise
            if gave_up():
                raise Aborted() from exc


async def settle(future: Future[T], job: Job, *, commits: bool) -> T:
    """What a cancelled wait for ``future`` means, called in its ``except CancelledError``.

    A job stopped before its commit wrote nothing: the cancellation goes on. A write whose
    commit had begun is waited for, and its real outcome returned to the runtime (claimed, so
    the result is not reported as ``timeout``) when the cancellation was the call's deadline;
    any other cancellation still goes on once the job has settled.

    Raises:
        asyncio.CancelledError: Re-raised whenever the caller's result is not the job's.
    """
    if future.cancel() or job.abort() or not commits:
        raise asyncio.CancelledError()
    # The commit is under way: it ends soon, however often this wait is cancelled again.
    waiter = asyncio.wrap_future(future)
    while not waiter.done():
        try:
            await asyncio.shield(waiter)
        except asyncio.CancelledError:
            continue
    if waiter.exception() is not None or not deadline_fired():
        raise asyncio.CancelledError()  # a failed commit wrote nothing; or the caller left
    claim_outcome()
    return waiter.result()
