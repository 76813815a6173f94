"""The writes of :class:`~ditto.adapters.sqlite.checkpoints.SqliteCheckpointStore`: every job
queued while the writer thread (:mod:`ditto.adapters.sqlite.writer`, shared with the memory
store) was busy is committed in one transaction (group commit), each caller settled with its own
outcome. Lease operations are jobs of the same queue, and a fenced write checks its lease just
before it writes, in that transaction (:mod:`ditto.adapters.sqlite.checkpoint_leases`). Also
what both of the store's threads share: the schema, how a connection is opened, and how a
driver failure becomes a store error.
"""

from __future__ import annotations

import asyncio
import builtins
import contextlib
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final

from ditto.adapters.sqlite import checkpoint_leases as leases
from ditto.adapters.sqlite.journal import use_wal
from ditto.adapters.sqlite.writer import WriterThread
from ditto.errors import ErrorCode, ExceptionMapping, translate
from ditto.runtime.checkpoints.port import CheckpointError, not_found

__all__ = (
    "ACQUIRE_JOB",
    "APPEND_JOB",
    "DELETE_JOB",
    "RELEASE_JOB",
    "RENEW_JOB",
    "SAVE_JOB",
    "SCHEMA",
    "SQLITE_ERRORS",
    "Job",
    "Writer",
    "connect",
)

SCHEMA = (
    """
CREATE TABLE IF NOT EXISTS checkpoints (
    id TEXT PRIMARY KEY,
    scope TEXT NOT NULL,
    envelope BLOB NOT NULL,
    updated_at REAL NOT NULL,
    records INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS checkpoints_by_scope ON checkpoints (scope);
CREATE TABLE IF NOT EXISTS checkpoint_records (
    checkpoint_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    key TEXT NOT NULL,
    value BLOB NOT NULL
);
CREATE UNIQUE INDEX IF NOT EXISTS checkpoint_records_order
    ON checkpoint_records (checkpoint_id, seq);
"""
    + leases.LEASE_SCHEMA
)
"""Idempotent: every connection runs it when it opens, so the first one to open a new file
(writer or reader, this process or another) creates the tables, and a file made before a
table existed (the leases') gets it then: the schema has no version to migrate.

No index covers ``updated_at``: every append moves it, and two indexes on it made each commit
write two more pages (measured 10–15 µs of a lone append's ~80 µs). ``list`` sorts instead:
the rows of one scope (found by ``checkpoints_by_scope``), or every row without a filter."""

_SAVE = (
    "INSERT INTO checkpoints (id, scope, envelope, updated_at) VALUES (?, ?, ?, ?) "
    "ON CONFLICT (id) DO UPDATE SET "
    "scope = excluded.scope, envelope = excluded.envelope, updated_at = excluded.updated_at"
)
_COUNT = "SELECT records FROM checkpoints WHERE id = ?"
_INSERT = "INSERT INTO checkpoint_records (checkpoint_id, seq, key, value) VALUES (?, ?, ?, ?)"
_TOUCH = "UPDATE checkpoints SET records = ?, updated_at = ? WHERE id = ?"
_DELETE_RECORDS = "DELETE FROM checkpoint_records WHERE checkpoint_id = ?"
_DELETE = "DELETE FROM checkpoints WHERE id = ?"

SAVE_JOB: Final = 0
APPEND_JOB: Final = 1
DELETE_JOB: Final = 2
ACQUIRE_JOB: Final = 3
RENEW_JOB: Final = 4
RELEASE_JOB: Final = 5

# A job: (kind, checkpoint id, scope | records | holder | lease | released token | None,
# envelope | ttl | None, fencing token | None, loop, future).
Job = tuple[int, str, Any, Any, int | None, asyncio.AbstractEventLoop, "asyncio.Future[Any]"]
_UNKNOWN: Final = -1
# Primary result codes (https://sqlite.org/rescode.html); extended codes keep them in the low byte.
_CORRUPT_CODES = frozenset({11, 26})  # SQLITE_CORRUPT, SQLITE_NOTADB


def _store_error(exc: sqlite3.Error | OSError) -> CheckpointError:
    code = (getattr(exc, "sqlite_errorcode", None) or 0) & 0xFF
    if code in _CORRUPT_CODES:
        return CheckpointError(
            ErrorCode.CHECKPOINT_CORRUPT,
            "the checkpoint store file is not an SQLite database or is damaged",
        )
    return CheckpointError(
        ErrorCode.CHECKPOINT_STORE_UNAVAILABLE,
        "the checkpoint store file could not be read or written",
        retryable=True,
    )


SQLITE_ERRORS: ExceptionMapping = {(sqlite3.Error, OSError): _store_error}
"""Both threads' driver-error boundary: a driver or file-system failure as a store error. Never
the driver's text or the file's path: the caller gets a code and a generic message, the log gets
``__cause__``."""


def connect(path: Path, busy_timeout_ms: int) -> sqlite3.Connection:
    """A connection in autocommit mode (transactions are explicit) on a file with the schema,
    creating the folder and the file if needed."""
    path.parent.mkdir(parents=True, exist_ok=True)
    connection = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    try:
        # Before anything that may wait on a lock: switching to WAL needs one too.
        connection.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")
        use_wal(connection, busy_timeout_ms)
        connection.execute("PRAGMA synchronous = NORMAL")
        connection.executescript(SCHEMA)
    except BaseException:
        connection.close()
        raise
    return connection


class Writer:
    """The checkpoint store's writes on the shared
    :class:`~ditto.adapters.sqlite.writer.WriterThread`: the write connection, and each group in
    one transaction. It holds no reference to the store, so a store nobody closed can still be
    garbage collected (and then stops this thread)."""

    def __init__(self, path: Path, busy_timeout_ms: int, clock: Callable[[], float]) -> None:
        self._path = path
        self._busy_timeout_ms = busy_timeout_ms
        self._clock = clock
        self._connection: sqlite3.Connection | None = None
        self._ended: asyncio.Future[None] | None = None
        self._writer = WriterThread("ditto-checkpoint-writer", self._commit, on_exit=self._close)
        self.thread = self._writer.thread

    def put(self, job: Job) -> None:
        self._writer.put(job)

    def stop(self, ended: asyncio.Future[None] | None = None) -> None:
        """Let the thread finish what is queued, then end (returns at once); ``ended`` is set
        when its connection is closed."""
        self._ended = ended
        self._writer.stop()

    def _close(self) -> None:
        if self._connection is not None:
            self._connection.close()
        if self._ended is not None:
            _settle_one(self._ended, None)

    def _commit(self, group: builtins.list[Job]) -> None:
        try:
            outcomes = self._write(group)
        except BaseException as exc:  # every caller gets an answer, never a hang
            _settle(group, [_failure(exc) for _ in group])
            return
        _settle(group, outcomes)

    def _write(self, group: builtins.list[Job]) -> builtins.list[Any]:
        """Run ``group`` in one transaction; each job's outcome (a result or an exception)."""
        if self._connection is None:
            self._connection = connect(self._path, self._busy_timeout_ms)
        connection = self._connection
        clock = self._clock
        outcomes: builtins.list[Any] = [None] * len(group)
        # Records count of each checkpoint as this transaction sees it (None: absent), and
        # the new (count, updated_at) of each one appended to, written once at the end.
        counts: dict[str, int | None] = {}
        touched: dict[str, builtins.list[Any]] = {}
        rows: builtins.list[tuple[str, int, str, bytes]] = []
        connection.execute("BEGIN IMMEDIATE")
        try:
            for position, (kind, checkpoint_id, payload, envelope, token, _, _) in enumerate(group):
                if token is not None and kind <= APPEND_JOB:  # a fenced save or append
                    refused = leases.check_fence(connection, checkpoint_id, token)
                    if refused is not None:
                        outcomes[position] = refused
                        continue
                if kind == APPEND_JOB:
                    count = counts.get(checkpoint_id, _UNKNOWN)
                    if count == _UNKNOWN:
                        found = connection.execute(_COUNT, (checkpoint_id,)).fetchone()
                        count = counts[checkpoint_id] = None if found is None else found[0]
                    if count is None:
                        outcomes[position] = not_found()
                    elif payload:
                        rows.extend(
                            (checkpoint_id, count + offset, key, value)
                            for offset, (key, value) in enumerate(payload)
                        )
                        count = counts[checkpoint_id] = count + len(payload)
                        touched[checkpoint_id] = [count, float(clock()), checkpoint_id]
                elif kind == SAVE_JOB:
                    now = float(clock())
                    connection.execute(_SAVE, (checkpoint_id, payload, envelope, now))
                    if checkpoint_id in touched:
                        touched[checkpoint_id][1] = now
                    elif counts.get(checkpoint_id, _UNKNOWN) is None:
                        counts[checkpoint_id] = 0
                elif kind == DELETE_JOB:
                    refused = leases.check_deletable(connection, checkpoint_id, token)
                    if refused is not None:
                        outcomes[position] = refused
                        continue
                    if rows:
                        connection.executemany(_INSERT, rows)
                        rows.clear()
                    connection.execute(_DELETE_RECORDS, (checkpoint_id,))
                    outcomes[position] = connection.execute(_DELETE, (checkpoint_id,)).rowcount > 0
                    counts[checkpoint_id] = None
                    touched.pop(checkpoint_id, None)
                elif kind == ACQUIRE_JOB:
                    outcomes[position] = leases.acquire(
                        connection, checkpoint_id, payload, envelope
                    )
                elif kind == RENEW_JOB:
                    outcomes[position] = leases.renew(connection, payload, envelope)
                else:
                    leases.release(connection, checkpoint_id, payload)
            if rows:
                connection.executemany(_INSERT, rows)
            if touched:
                connection.executemany(_TOUCH, touched.values())
            connection.execute("COMMIT")
        except BaseException:
            # A failed ROLLBACK (the connection is broken) must not hide the real failure.
            with contextlib.suppress(sqlite3.Error):
                if connection.in_transaction:
                    connection.execute("ROLLBACK")
            raise
        return outcomes


def _failure(exc: BaseException) -> BaseException:
    """A caller's own error for a failed batch (an exception instance is raised in one task
    only), the driver's failure kept as the cause for the log."""
    return translate(exc, SQLITE_ERRORS) or exc


def _settle(group: builtins.list[Job], outcomes: builtins.list[Any]) -> None:
    """Hand each caller its outcome: one wake-up per event loop for the whole group."""
    by_loop: dict[asyncio.AbstractEventLoop, builtins.list[tuple[asyncio.Future[Any], Any]]] = {}
    for job, outcome in zip(group, outcomes, strict=True):
        by_loop.setdefault(job[5], []).append((job[6], outcome))
    for loop, settled in by_loop.items():
        with contextlib.suppress(RuntimeError):  # a closed loop: nobody waits any more
            loop.call_soon_threadsafe(_resolve, settled)


def _settle_one(future: asyncio.Future[Any], outcome: Any) -> None:
    with contextlib.suppress(RuntimeError):
        future.get_loop().call_soon_threadsafe(_resolve, [(future, outcome)])


def _resolve(settled: builtins.list[tuple[asyncio.Future[Any], Any]]) -> None:
    for future, outcome in settled:
        if future.done():  # its caller was cancelled
            continue
        if isinstance(outcome, BaseException):
            future.set_exception(outcome)
        else:
            future.set_result(outcome)
