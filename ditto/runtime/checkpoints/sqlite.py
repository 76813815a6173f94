"""``SqliteCheckpointStore``: checkpoints in one SQLite file, the embedded default.

* **One writer thread** owns the write connection and a queue. ``save``, ``append`` and
  ``delete`` put a job on the queue and await an asyncio future that the thread settles through
  ``loop.call_soon_threadsafe`` (once per event loop and batch, not once per job). The thread
  takes everything queued while it was busy and commits it in **one** transaction (group
  commit), so a hundred tasks finishing together cost one commit, and a lone append costs one.
* **No savepoints.** Each job is checked against the transaction's own view before it writes
  anything (``append`` to a missing checkpoint writes nothing and fails alone), so a job's
  failure never undoes another's work. Only a driver failure (disk full, I/O error, a lock held
  by another process for longer than ``busy_timeout_ms``) fails the batch, every caller with
  its own ``CHECKPOINT_STORE_UNAVAILABLE``.
* **Reads** (``load``, ``list``) run on a reader thread with their own connection, each in one
  read transaction (a consistent snapshot); WAL lets them run while the writer commits.
* **Durability:** WAL with ``synchronous=NORMAL``. A call that returned is committed: it
  survives the process being killed (``kill -9``) and is seen by any process that opens the
  file. A power loss or OS crash may lose the last commits (never corrupt the file); that is
  the price of not calling ``fsync`` per commit.
* **Threads never outlive the store:** :meth:`~SqliteCheckpointStore.aclose` drains the queue
  and joins them; a store dropped without closing stops its writer when it is garbage
  collected, and the writer is a daemon thread, so it never keeps the interpreter alive.

Several processes may share one file: SQLite serialises their writers (each waits up to
``busy_timeout_ms`` for the lock).
"""

from __future__ import annotations

import asyncio
import builtins
import contextlib
import os
import sqlite3
import threading
import time
import weakref
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from queue import Empty, SimpleQueue
from typing import Any, Final, TypeVar

from ditto.runtime.checkpoints.port import (
    CheckpointError,
    CheckpointErrorCode,
    CheckpointInfo,
    StoredCheckpoint,
    checked_bytes,
    checked_id,
    checked_limit,
    checked_records,
    checked_scope,
    closed,
    not_found,
)

__all__ = ("SCHEMA", "SqliteCheckpointStore")

T = TypeVar("T")

SCHEMA = """
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
"""Idempotent: every connection runs it when it opens, so the first one to open a new file
(writer or reader, this process or another) creates the tables.

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
_LOAD = "SELECT scope, envelope, updated_at FROM checkpoints WHERE id = ?"
_LOAD_RECORDS = "SELECT key, value FROM checkpoint_records WHERE checkpoint_id = ? ORDER BY seq"
_LIST = (
    "SELECT id, scope, updated_at, records FROM checkpoints "
    "ORDER BY updated_at DESC, id DESC LIMIT ?"
)
_LIST_SCOPE = (
    "SELECT id, scope, updated_at, records FROM checkpoints WHERE scope = ? "
    "ORDER BY updated_at DESC, id DESC LIMIT ?"
)

_SAVE_JOB: Final = 0
_APPEND_JOB: Final = 1
_DELETE_JOB: Final = 2

# A job: (kind, checkpoint id, scope | records | None, envelope | None, loop, future).
_Job = tuple[int, str, Any, Any, asyncio.AbstractEventLoop, "asyncio.Future[Any]"]
_UNKNOWN: Final = -1
_INFO_TYPES: Final = (str, str, float, int)

# Primary result codes (https://sqlite.org/rescode.html); extended codes keep them in the low byte.
_CORRUPT_CODES = frozenset({11, 26})  # SQLITE_CORRUPT, SQLITE_NOTADB


def translate(exc: BaseException) -> CheckpointError:
    """The store error for a driver or file-system failure. Never the driver's text or the
    file's path: the caller gets a code and a generic message, the log gets ``__cause__``."""
    code = (getattr(exc, "sqlite_errorcode", None) or 0) & 0xFF
    if code in _CORRUPT_CODES:
        return CheckpointError(
            CheckpointErrorCode.CHECKPOINT_CORRUPT,
            "the checkpoint store file is not an SQLite database or is damaged",
        )
    return CheckpointError(
        CheckpointErrorCode.CHECKPOINT_STORE_UNAVAILABLE,
        "the checkpoint store file could not be read or written",
        retryable=True,
    )


class _sqlite_errors:  # lower case: it reads as a function, ``with _sqlite_errors():``
    """The reads' driver-error boundary (the writer translates in its thread, per job)."""

    __slots__ = ()

    def __enter__(self) -> None:
        return None

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, trace: object
    ) -> None:
        if isinstance(exc, sqlite3.Error | OSError):
            raise translate(exc) from exc


def _connect(path: Path, busy_timeout_ms: int) -> sqlite3.Connection:
    """A connection in autocommit mode (transactions are explicit) on a file with the schema,
    creating the folder and the file if needed."""
    path.parent.mkdir(parents=True, exist_ok=True)
    connection = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    try:
        # Before anything that may wait on a lock: switching to WAL needs one too.
        connection.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")
        connection.execute("PRAGMA journal_mode = WAL")
        connection.execute("PRAGMA synchronous = NORMAL")
        connection.executescript(SCHEMA)
    except BaseException:
        connection.close()
        raise
    return connection


class _Writer:
    """The writer thread and its connection. It holds no reference to the store, so a store
    nobody closed can still be garbage collected (and then stops this thread)."""

    def __init__(self, path: Path, busy_timeout_ms: int, clock: Callable[[], float]) -> None:
        self._path = path
        self._busy_timeout_ms = busy_timeout_ms
        self._clock = clock
        self._queue: SimpleQueue[_Job | None] = SimpleQueue()
        self._connection: sqlite3.Connection | None = None
        self._ended: asyncio.Future[None] | None = None
        self.thread = threading.Thread(
            target=self._run, name="ditto-checkpoint-writer", daemon=True
        )
        self.thread.start()

    def put(self, job: _Job) -> None:
        self._queue.put(job)

    def stop(self, ended: asyncio.Future[None] | None = None) -> None:
        """Let the thread finish what is queued, then end (returns at once); ``ended`` is set
        when its connection is closed."""
        self._ended = ended
        self._queue.put(None)

    def _run(self) -> None:
        queue = self._queue
        try:
            while True:
                job = queue.get()
                group: builtins.list[_Job] = []
                while job is not None:
                    group.append(job)
                    try:
                        job = queue.get_nowait()
                    except Empty:
                        break
                if group:
                    self._commit(group)
                if job is None:
                    return
        finally:
            if self._connection is not None:
                self._connection.close()
            if self._ended is not None:
                _settle_one(self._ended, None)

    def _commit(self, group: builtins.list[_Job]) -> None:
        try:
            outcomes = self._write(group)
        except BaseException as exc:  # every caller gets an answer, never a hang
            _settle(group, [_failure(exc) for _ in group])
            return
        _settle(group, outcomes)

    def _write(self, group: builtins.list[_Job]) -> builtins.list[Any]:
        """Run ``group`` in one transaction; each job's outcome (a result or an exception)."""
        if self._connection is None:
            self._connection = _connect(self._path, self._busy_timeout_ms)
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
            for position, (kind, checkpoint_id, payload, envelope, _, _) in enumerate(group):
                if kind == _APPEND_JOB:
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
                elif kind == _SAVE_JOB:
                    now = float(clock())
                    connection.execute(_SAVE, (checkpoint_id, payload, envelope, now))
                    if checkpoint_id in touched:
                        touched[checkpoint_id][1] = now
                    elif counts.get(checkpoint_id, _UNKNOWN) is None:
                        counts[checkpoint_id] = 0
                else:
                    if rows:
                        connection.executemany(_INSERT, rows)
                        rows.clear()
                    connection.execute(_DELETE_RECORDS, (checkpoint_id,))
                    outcomes[position] = connection.execute(_DELETE, (checkpoint_id,)).rowcount > 0
                    counts[checkpoint_id] = None
                    touched.pop(checkpoint_id, None)
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
    if isinstance(exc, sqlite3.Error | OSError):
        error = translate(exc)
        error.__cause__ = exc
        return error
    return exc


def _settle(group: builtins.list[_Job], outcomes: builtins.list[Any]) -> None:
    """Hand each caller its outcome: one wake-up per event loop for the whole group."""
    by_loop: dict[asyncio.AbstractEventLoop, builtins.list[tuple[asyncio.Future[Any], Any]]] = {}
    for job, outcome in zip(group, outcomes, strict=True):
        by_loop.setdefault(job[4], []).append((job[5], outcome))
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


class _Reader:
    """The reader thread's connection, opened on first use (kept apart from the store for the
    same reason as :class:`_Writer`)."""

    def __init__(self, path: Path, busy_timeout_ms: int) -> None:
        self._path = path
        self._busy_timeout_ms = busy_timeout_ms
        self.connection: sqlite3.Connection | None = None

    def run(self, function: Callable[[sqlite3.Connection], T]) -> T:
        if self.connection is None:
            self.connection = _connect(self._path, self._busy_timeout_ms)
        connection = self.connection
        connection.execute("BEGIN")  # one snapshot for every statement of the read
        try:
            return function(connection)
        finally:
            connection.execute("COMMIT")

    def close(self) -> None:
        if self.connection is not None:
            self.connection.close()
            self.connection = None


class SqliteCheckpointStore:
    """A :class:`~ditto.runtime.checkpoints.port.CheckpointStore` in one SQLite file.

    Nothing is opened until the first call; the file and its folder are created then.

    Args:
        path: The database file (shared by every store and process that names it).
        busy_timeout_ms: How long a write waits for another process's lock before it fails
            with a retryable ``CHECKPOINT_STORE_UNAVAILABLE``.
        clock: Unix seconds for ``updated_at`` (default :func:`time.time`); called on the
            writer thread.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        busy_timeout_ms: int = 5000,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if isinstance(busy_timeout_ms, bool) or not isinstance(busy_timeout_ms, int):
            raise CheckpointError(
                CheckpointErrorCode.INVALID_INPUT, "busy_timeout_ms must be an integer"
            )
        if busy_timeout_ms < 0:
            raise CheckpointError(
                CheckpointErrorCode.INVALID_INPUT, "busy_timeout_ms must not be negative"
            )
        self.path = Path(path)
        self._busy_timeout_ms = busy_timeout_ms
        self._clock = clock
        self._writer: _Writer | None = None
        self._reader = _Reader(self.path, busy_timeout_ms)
        self._readers: ThreadPoolExecutor | None = None
        self._finalizer: weakref.finalize[[], SqliteCheckpointStore] | None = None
        self._closed = False

    # ----------------------------------------------------------------- writes

    async def save(self, checkpoint_id: str, scope: str, envelope: bytes) -> None:
        checkpoint_id = checked_id(checkpoint_id)
        scope = checked_scope(scope)
        envelope = checked_bytes(envelope, "an envelope")
        await self._write(_SAVE_JOB, checkpoint_id, scope, envelope)

    async def append(self, checkpoint_id: str, records: Sequence[tuple[str, bytes]]) -> None:
        checkpoint_id = checked_id(checkpoint_id)
        copied = checked_records(records)
        await self._write(_APPEND_JOB, checkpoint_id, copied, None)

    async def delete(self, checkpoint_id: str) -> bool:
        checkpoint_id = checked_id(checkpoint_id)
        existed: bool = await self._write(_DELETE_JOB, checkpoint_id, None, None)
        return existed

    def _write(self, kind: int, checkpoint_id: str, payload: Any, envelope: Any) -> Any:
        """The future of one queued job (a plain function: no coroutine frame per call)."""
        if self._closed:
            raise closed()
        writer = self._writer
        if writer is None:
            writer = self._writer = _Writer(self.path, self._busy_timeout_ms, self._clock)
            self._finalizer = weakref.finalize(self, writer.stop)
        loop = asyncio.get_running_loop()
        future = loop.create_future()
        writer.put((kind, checkpoint_id, payload, envelope, loop, future))
        return future

    # ----------------------------------------------------------------- reads

    async def load(self, checkpoint_id: str) -> StoredCheckpoint | None:
        checkpoint_id = checked_id(checkpoint_id)

        def read(connection: sqlite3.Connection) -> StoredCheckpoint | None:
            row = connection.execute(_LOAD, (checkpoint_id,)).fetchone()
            if row is None:
                return None
            records = connection.execute(_LOAD_RECORDS, (checkpoint_id,)).fetchall()
            scope, envelope, updated_at = row
            if (
                type(scope) is not str
                or type(envelope) is not bytes
                or type(updated_at) is not float
                or not all(type(k) is str and type(v) is bytes for k, v in records)
            ):
                raise _corrupt()
            return StoredCheckpoint(checkpoint_id, scope, envelope, tuple(records), updated_at)

        return await self._read(read)

    async def list(
        self, *, scope: str | None = None, limit: int = 100
    ) -> builtins.list[CheckpointInfo]:
        if scope is not None:
            scope = checked_scope(scope)
        limit = checked_limit(limit)

        def read(connection: sqlite3.Connection) -> builtins.list[CheckpointInfo]:
            if scope is None:
                rows = connection.execute(_LIST, (limit,)).fetchall()
            else:
                rows = connection.execute(_LIST_SCOPE, (scope, limit)).fetchall()
            for row in rows:
                if tuple(map(type, row)) != _INFO_TYPES:
                    raise _corrupt()
            return [CheckpointInfo(*row) for row in rows]

        return await self._read(read)

    async def _read(self, function: Callable[[sqlite3.Connection], T]) -> T:
        if self._closed:
            raise closed()
        if self._readers is None:
            self._readers = ThreadPoolExecutor(1, "ditto-checkpoint-reader")
        with _sqlite_errors():
            return await asyncio.wrap_future(self._readers.submit(self._reader.run, function))

    # ----------------------------------------------------------------- lifecycle

    async def aclose(self) -> None:
        """Finish the queued writes, stop the threads and close the connections."""
        if self._closed:
            return
        self._closed = True
        writer, readers = self._writer, self._readers
        self._writer = self._readers = None
        if self._finalizer is not None:
            self._finalizer.detach()
        # Neither wait blocks the event loop for more than a thread's last instructions, and
        # neither borrows the loop's default executor.
        if writer is not None:
            ended = asyncio.get_running_loop().create_future()
            writer.stop(ended)
            await ended
            writer.thread.join()
        if readers is not None:
            await asyncio.wrap_future(readers.submit(self._reader.close))
            readers.shutdown(wait=True)
        self._reader.close()


def _corrupt() -> CheckpointError:
    return CheckpointError(
        CheckpointErrorCode.CHECKPOINT_CORRUPT, "the checkpoint store holds a value it cannot read"
    )
