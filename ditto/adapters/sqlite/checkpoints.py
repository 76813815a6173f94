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
* **Leases** (``acquire``, ``renew``, ``release``) are jobs of the same queue, each in the
  group's ``BEGIN IMMEDIATE`` transaction, and a fenced write checks its lease in the
  transaction that writes it: the file's write lock makes both atomic against every process
  (:mod:`~ditto.adapters.sqlite.checkpoint_leases`). Leases expire on ``time.time()``, not on
  ``clock``: processes sharing the file must agree on it.
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
import os
import sqlite3
import time
import weakref
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Final, TypeVar

from ditto.adapters.sqlite.checkpoint_writes import (
    ACQUIRE_JOB,
    APPEND_JOB,
    DELETE_JOB,
    RELEASE_JOB,
    RENEW_JOB,
    SAVE_JOB,
    SCHEMA,
    SQLITE_ERRORS,
    Writer,
    connect,
)
from ditto.errors import ErrorCode, map_exceptions
from ditto.runtime.checkpoints.leases import (
    checked_fence,
    checked_holder,
    checked_lease,
    checked_ttl,
)
from ditto.runtime.checkpoints.port import (
    CheckpointError,
    CheckpointInfo,
    Lease,
    StoredCheckpoint,
    checked_bytes,
    checked_id,
    checked_limit,
    checked_records,
    checked_scope,
    closed,
)

__all__ = ("SCHEMA", "SqliteCheckpointStore")

T = TypeVar("T")

_LOAD = "SELECT scope, envelope, updated_at, records FROM checkpoints WHERE id = ?"
_LOAD_RECORDS = (
    "SELECT seq, key, value FROM checkpoint_records WHERE checkpoint_id = ? ORDER BY seq"
)
_LIST = (
    "SELECT id, scope, updated_at, records FROM checkpoints "
    "ORDER BY updated_at DESC, id DESC LIMIT ?"
)
_LIST_SCOPE = (
    "SELECT id, scope, updated_at, records FROM checkpoints WHERE scope = ? "
    "ORDER BY updated_at DESC, id DESC LIMIT ?"
)

_INFO_TYPES: Final = (str, str, float, int)


_sqlite_errors = map_exceptions(SQLITE_ERRORS)
"""The reads' driver-error boundary (the writer translates in its thread, per job)."""


class _Reader:
    """The reader thread's connection, opened on first use (kept apart from the store for the
    same reason as :class:`~ditto.adapters.sqlite.checkpoint_writes.Writer`)."""

    def __init__(self, path: Path, busy_timeout_ms: int) -> None:
        self._path = path
        self._busy_timeout_ms = busy_timeout_ms
        self.connection: sqlite3.Connection | None = None

    def run(self, function: Callable[[sqlite3.Connection], T]) -> T:
        if self.connection is None:
            self.connection = connect(self._path, self._busy_timeout_ms)
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
            writer thread. Leases always expire on :func:`time.time`, the clock every process
            sharing the file reads.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        busy_timeout_ms: int = 5000,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if isinstance(busy_timeout_ms, bool) or not isinstance(busy_timeout_ms, int):
            raise CheckpointError(ErrorCode.INVALID_INPUT, "busy_timeout_ms must be an integer")
        if busy_timeout_ms < 0:
            raise CheckpointError(ErrorCode.INVALID_INPUT, "busy_timeout_ms must not be negative")
        self.path = Path(path)
        self._busy_timeout_ms = busy_timeout_ms
        self._clock = clock
        self._writer: Writer | None = None
        self._reader = _Reader(self.path, busy_timeout_ms)
        self._readers: ThreadPoolExecutor | None = None
        self._finalizer: weakref.finalize[[], SqliteCheckpointStore] | None = None
        self._closed = False

    # ----------------------------------------------------------------- writes

    async def save(
        self, checkpoint_id: str, scope: str, envelope: bytes, *, fence: Lease | None = None
    ) -> None:
        checkpoint_id = checked_id(checkpoint_id)
        scope = checked_scope(scope)
        envelope = checked_bytes(envelope, "an envelope")
        token = checked_fence(checkpoint_id, fence)
        await self._write(SAVE_JOB, checkpoint_id, scope, envelope, token)

    async def append(
        self,
        checkpoint_id: str,
        records: Sequence[tuple[str, bytes]],
        *,
        fence: Lease | None = None,
    ) -> None:
        checkpoint_id = checked_id(checkpoint_id)
        copied = checked_records(records)
        token = checked_fence(checkpoint_id, fence)
        await self._write(APPEND_JOB, checkpoint_id, copied, None, token)

    async def delete(self, checkpoint_id: str, *, fence: Lease | None = None) -> bool:
        checkpoint_id = checked_id(checkpoint_id)
        token = checked_fence(checkpoint_id, fence)
        existed: bool = await self._write(DELETE_JOB, checkpoint_id, None, None, token)
        return existed

    # ----------------------------------------------------------------- leases

    async def acquire(self, checkpoint_id: str, holder: str, ttl: float) -> Lease:
        checkpoint_id = checked_id(checkpoint_id)
        holder = checked_holder(holder)
        ttl = checked_ttl(ttl)
        lease: Lease = await self._write(ACQUIRE_JOB, checkpoint_id, holder, ttl, None)
        return lease

    async def renew(self, lease: Lease, ttl: float) -> Lease:
        lease = checked_lease(lease)
        ttl = checked_ttl(ttl)
        renewed: Lease = await self._write(RENEW_JOB, lease.checkpoint_id, lease, ttl, None)
        return renewed

    async def release(self, lease: Lease) -> None:
        lease = checked_lease(lease)
        await self._write(RELEASE_JOB, lease.checkpoint_id, lease.token, None, None)

    def _write(
        self, kind: int, checkpoint_id: str, payload: Any, envelope: Any, token: int | None
    ) -> Any:
        """The future of one queued job (a plain function: no coroutine frame per call)."""
        if self._closed:
            raise closed()
        writer = self._writer
        if writer is None:
            writer = self._writer = Writer(self.path, self._busy_timeout_ms, self._clock)
            self._finalizer = weakref.finalize(self, writer.stop)
        loop = asyncio.get_running_loop()
        future = loop.create_future()
        writer.put((kind, checkpoint_id, payload, envelope, token, loop, future))
        return future

    # ----------------------------------------------------------------- reads

    async def load(self, checkpoint_id: str) -> StoredCheckpoint | None:
        checkpoint_id = checked_id(checkpoint_id)

        def read(connection: sqlite3.Connection) -> StoredCheckpoint | None:
            row = connection.execute(_LOAD, (checkpoint_id,)).fetchone()
            if row is None:
                return None
            rows = connection.execute(_LOAD_RECORDS, (checkpoint_id,)).fetchall()
            scope, envelope, updated_at, count = row
            if (
                type(scope) is not str
                or type(envelope) is not bytes
                or type(updated_at) is not float
                # The count the next append numbers its records from: one edited away from
                # the records held would make every later append collide with them.
                or count != len(rows)
                or [seq for seq, _, _ in rows] != list(range(len(rows)))
                or not all(type(k) is str and type(v) is bytes for _, k, v in rows)
            ):
                raise _corrupt()
            records = tuple((key, value) for _, key, value in rows)
            return StoredCheckpoint(checkpoint_id, scope, envelope, records, updated_at)

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
        with _sqlite_errors:
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
        ErrorCode.CHECKPOINT_CORRUPT, "the checkpoint store holds a value it cannot read"
    )
