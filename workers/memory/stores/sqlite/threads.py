"""The SQLite store's threads: one writer, a few readers, each with its own connection.

sqlite3 blocks, so every operation is one hop to a thread the store owns, never one per row
(a point read, bounded by a few index lookups, runs on the calling thread instead). The writer
is the project's one SQLite writer thread (:mod:`ditto.adapters.sqlite.writer`, shared with the
checkpoint store): it runs every transaction in order (``BEGIN IMMEDIATE`` ... ``COMMIT``), and
the writes queued while it was busy in one transaction together (``commits``: the group commit
policy); WAL lets the readers run while it commits. Usage counters are collected in memory
without waiting and applied by the writer — at most ``USAGE_DELAY`` seconds later, or first
thing in the next write transaction — so a busy search path never becomes one write
transaction per search.

Every hop goes through :func:`~workers.memory.stores.sqlite.errors.sqlite_errors`: the one
place driver failures become coded store errors.

The file's identity (``st_dev``, ``st_ino``) is taken when the store opens and compared with
the path's before every read and inside every write transaction (after ``BEGIN`` and just
before ``COMMIT``): a store whose file was deleted, moved or replaced while open (its folder
removed, say) would otherwise go on reading and acknowledging writes to an unlinked file, lost
at close. One ``os.stat`` costs about a microsecond; the call fails ``STORE_UNAVAILABLE``.
"""

from __future__ import annotations

import asyncio
import logging
import os
import sqlite3
import threading
from collections.abc import Callable
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from datetime import datetime
from pathlib import Path
from typing import Any, TypeVar

from ditto.adapters.sqlite.writer import WriterThread
from ditto.contracts.outcomes import claim_outcome
from workers.memory.model.errors import MemoryStoreError
from workers.memory.model.records import to_micros
from workers.memory.stores.sqlite.commits import QueuedWrite, Usage, commit_group
from workers.memory.stores.sqlite.errors import (
    StoreVanishedError,
    cannot_create,
    no_folder,
    sqlite_errors,
)
from workers.memory.stores.sqlite.jobs import LOCK_SLICE_S, Job, settle
from workers.memory.stores.sqlite.schema import migrate, read_cursor_secret
from workers.memory.stores.sqlite.search import KeywordPlanner
from workers.memory.stores.sqlite.sql import connect

__all__ = ("USAGE_DELAY", "SqliteThreads")

logger = logging.getLogger("ditto.workers.memory.sqlite")

T = TypeVar("T")

USAGE_DELAY = 0.05
"""Seconds pending usage counters may wait for the writer."""


class SqliteThreads:
    """The connections and threads of one store file.

    Args:
        path: The database file.
        readers: Reader threads (and connections).
        busy_timeout_ms: How long a connection waits for another process's lock before the
            call fails with a retryable ``STORE_TIMEOUT``.
        read_only: Open an existing file for reading only.
        create_folder: Create the file's folder when it is missing (else ``STORE_UNAVAILABLE``).
    """

    def __init__(
        self,
        path: Path,
        readers: int,
        busy_timeout_ms: int,
        read_only: bool,
        create_folder: bool = True,
    ) -> None:
        self.path = path
        self.read_only = read_only
        self._create_folder = create_folder
        self._identity: tuple[int, int] | None = None
        self._errors = sqlite_errors(path)  # built once: entered on every hop
        self._readers_count = readers
        self._busy_timeout_ms = busy_timeout_ms
        self._local = threading.local()
        self._connections: list[sqlite3.Connection] = []
        self._connections_lock = threading.Lock()
        self._writer: WriterThread[QueuedWrite] | None = None
        self._readers: ThreadPoolExecutor | None = None
        self._open_lock = asyncio.Lock()
        self._closed = False
        self._cursor_secret: bytes | None = None
        self._usage_lock = threading.Lock()
        self._pending_usage: Usage = {}
        self._usage_timer: asyncio.TimerHandle | None = None

    # ----------------------------------------------------------------- lifecycle

    async def open(self) -> bytes:
        """Create the file if needed, migrate the schema and start the threads (idempotent).

        Returns:
            The store's cursor key.
        """
        async with self._open_lock:
            if self._closed:
                raise MemoryStoreError("the memory store is closed")
            if self._cursor_secret is not None:
                return self._cursor_secret
            writer = WriterThread("ditto-sqlite-writer", self._commit_group)
            try:
                self._cursor_secret = await self._hop(writer, False, self._setup)
            except BaseException:
                writer.shutdown(wait=True)
                self._close_connections()
                raise
            self._writer = writer
            self._readers = ThreadPoolExecutor(self._readers_count, "ditto-sqlite-reader")
            return self._cursor_secret

    def _setup(self, job: Job) -> bytes:
        if not self.read_only and self._create_folder:
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise cannot_create(self.path, exc) from exc
        elif not self.path.parent.is_dir():
            raise no_folder(self.path)
        connection = self.connection()
        migrate(connection)
        found = os.stat(self.path)  # the file the connection opened (SQLite made it by now)
        self._identity = (found.st_dev, found.st_ino)
        return read_cursor_secret(connection)

    def check_identity(self) -> None:
        """Raise ``STORE_UNAVAILABLE`` unless the path still names the file the store opened.

        Raises:
            StoreVanishedError: The file was deleted, moved or replaced since the store opened.
        """
        try:
            found = os.stat(self.path)
        except OSError:
            raise StoreVanishedError(self.path) from None
        if (found.st_dev, found.st_ino) != self._identity:
            raise StoreVanishedError(self.path)

    def connection(self) -> sqlite3.Connection:
        """This thread's connection (opened on first use)."""
        connection: sqlite3.Connection | None = getattr(self._local, "connection", None)
        if connection is None:
            connection = self._open_connection(self._busy_timeout_ms)
            self._local.connection = connection
        return connection

    def _open_connection(self, busy_timeout_ms: int) -> sqlite3.Connection:
        connection = connect(str(self.path), busy_timeout_ms, self.read_only)
        self._local.planner = KeywordPlanner(connection)
        with self._connections_lock:
            self._connections.append(connection)
        return connection

    def _writer_connection(self) -> sqlite3.Connection:
        """The writer's connection: it waits for other processes' locks in short slices (see
        ``jobs.begin_immediate``), so an abandoned write stops waiting soon."""
        connection = self.connection()
        if not getattr(self._local, "sliced", False):
            connection.execute(f"PRAGMA busy_timeout = {int(LOCK_SLICE_S * 1000)}")
            self._local.sliced = True
        return connection

    def planner(self) -> KeywordPlanner:
        """This thread's keyword planner (it caches term statistics per connection)."""
        self.connection()
        planner: KeywordPlanner = self._local.planner
        return planner

    async def close(self) -> None:
        """Apply pending usage counters, stop the threads and close every connection."""
        try:
            await self.flush()
        except StoreVanishedError:
            pass  # the file is gone: there is nowhere to keep the counters
        except MemoryStoreError as exc:
            if exc.code != "STORE_TIMEOUT":
                raise
            # Another connection held the write lock past busy_timeout_ms: closing must not
            # fail for counters of use (the records themselves are all committed).
            with self._usage_lock:
                lost = len(self._pending_usage)
            logger.warning(
                "closed the memory store without recording the usage counters of %d "
                "record(s): another connection held the file's write lock",
                lost,
            )
        finally:
            async with self._open_lock:
                self._closed = True
                writer, readers = self._writer, self._readers
                self._writer = self._readers = None
            for executor in (readers, writer):
                if executor is not None:
                    await asyncio.to_thread(executor.shutdown, True)
            self._close_connections()

    def _close_connections(self) -> None:
        with self._connections_lock:
            connections, self._connections = self._connections, []
        for connection in connections:
            connection.close()

    # ----------------------------------------------------------------- hops

    async def _hop(
        self,
        executor: Executor | WriterThread[Any],
        commits: bool,
        function: Callable[..., T],
        *args: Any,
    ) -> T:
        """Run ``function(job, *args)`` on ``executor``; a cancelled wait stops it (``jobs``)."""
        job = Job()
        future = executor.submit(function, job, *args)
        with self._errors:
            try:
                result = await asyncio.wrap_future(future)
            except asyncio.CancelledError:
                return await settle(future, job, commits=commits)
        if commits:
            claim_outcome()  # committed: whatever the clock says now, this is the outcome
        return result

    async def read(self, function: Callable[..., T], *args: Any) -> T:
        """Run ``function(*args)`` on a reader thread (it calls :meth:`connection`)."""
        if self._readers is None:
            await self.open()
        assert self._readers is not None
        return await self._hop(self._readers, False, self._job, function, *args)

    async def read_here(self, function: Callable[..., T], *args: Any) -> T:
        """Run a point read ``function(*args)`` on the calling thread, with that thread's own
        connection, skipping the hop: a read by primary key costs microseconds, far less than
        two thread switches. The connection never waits for a lock (``busy_timeout`` 0): in
        the rare case SQLite reports one busy (WAL recovery by another process), the read
        takes the reader-thread path like any other, so the event loop is never held up.

        Only for reads bounded by a few index lookups (``function`` calls :meth:`connection`).
        """
        if self._readers is None:
            await self.open()
        try:
            with self._errors:
                self.check_identity()
                if getattr(self._local, "connection", None) is None:
                    self._local.connection = self._open_connection(busy_timeout_ms=0)
                return function(*args)
        except MemoryStoreError as exc:
            if not isinstance(exc.__cause__, sqlite3.OperationalError) or not _busy(exc.__cause__):
                raise
        return await self.read(function, *args)

    async def on(self, executor: Executor, function: Callable[[], T]) -> T:
        """Run ``function`` on another executor's thread, with that thread's connection."""
        if self._readers is None:
            await self.open()
        return await self._hop(executor, False, self._job, function)

    async def write(self, function: Callable[..., T], *args: Any) -> T:
        """Run ``function(connection, *args)`` in a write transaction on the writer.

        Writes queued while the writer is busy commit together (group commit): one
        ``BEGIN IMMEDIATE`` ... ``COMMIT`` for all of them, each inside its own savepoint, so
        each caller still gets its own result or its own failure, and a caller that gave up
        before the commit has nothing written.
        """
        if self._writer is None:
            await self.open()
        assert self._writer is not None
        request = QueuedWrite(Job(), function, args, Future())
        self._writer.put(request)
        with self._errors:
            try:
                result: T = await asyncio.wrap_future(request.future)
            except asyncio.CancelledError:
                return await settle(request.future, request.job, commits=True)
        claim_outcome()  # committed: whatever the clock says now, this is the outcome
        return result

    def _job(self, job: Job, function: Callable[..., T], *args: Any) -> T:
        self.check_identity()
        job.start(self.connection())
        try:
            return function(*args)
        finally:
            job.finish()

    def _commit_group(self, queued: list[QueuedWrite]) -> None:
        """On the writer: commit every write queued while it was busy in one transaction
        (writes whose callers already gave up are skipped)."""
        group = [request for request in queued if request.future.set_running_or_notify_cancel()]
        if not group:
            return
        connection = self._writer_connection()
        with self._usage_lock:
            usage, self._pending_usage = self._pending_usage, {}
        committed = False
        try:
            committed = commit_group(
                connection, group, usage, self._busy_timeout_ms / 1000, self.check_identity
            )
        finally:
            if not committed:
                self._keep_usage(usage)  # not stored: keep the counters for next time

    # ----------------------------------------------------------------- usage

    def record_usage(self, ids: list[str], at: datetime) -> None:
        """Count a use of each id; the writer applies the counters soon (see module doc). A
        read-only store counts nothing: reading must not fail for want of a write."""
        if self.read_only:
            return
        micros = to_micros(at)
        with self._usage_lock:
            for item_id in ids:
                count, last = self._pending_usage.get(item_id, (0, micros))
                self._pending_usage[item_id] = (count + 1, max(last, micros))
        if self._usage_timer is None and not self._closed:
            loop = asyncio.get_running_loop()
            self._usage_timer = loop.call_later(USAGE_DELAY, self._apply_usage_soon)

    def _keep_usage(self, usage: dict[str, tuple[int, int]]) -> None:
        with self._usage_lock:
            for item_id, (count, at) in usage.items():
                pending = self._pending_usage.get(item_id, (0, at))
                self._pending_usage[item_id] = (pending[0] + count, max(pending[1], at))

    def _apply_usage_soon(self) -> None:
        self._usage_timer = None
        if self._writer is not None:
            request = QueuedWrite(Job(), _nothing, (), Future())
            request.future.add_done_callback(_log_failure)
            self._writer.put(request)

    async def flush(self) -> None:
        """Apply pending usage counters now (none pending: no transaction, no lock taken)."""
        if self._usage_timer is not None:
            self._usage_timer.cancel()
            self._usage_timer = None
        with self._usage_lock:
            pending = bool(self._pending_usage)
        if self._writer is not None and pending:
            await self.write(_nothing)


def _busy(error: sqlite3.OperationalError) -> bool:
    code = getattr(error, "sqlite_errorcode", None)
    return code is not None and code & 0xFF in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)


def _nothing(connection: sqlite3.Connection) -> None:
    """A transaction that only applies pending usage counters."""


def _log_failure(future: Future[Any]) -> None:
    if not future.cancelled() and future.exception() is not None:
        logger.error("recording memory usage failed", exc_info=future.exception())
