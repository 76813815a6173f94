"""The Markdown store's lifecycle and how every operation runs: in a worker thread, holding the
folder's lock, after a scan of the files."""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import os
import secrets
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import anyio
import anyio.to_thread

from ditto.contracts.outcomes import claim_outcome, deadline_fired
from ditto.errors import ErrorCode
from workers.memory.model.errors import MemoryStoreError
from workers.memory.model.records import Clock, utc_now
from workers.memory.ports import MemoryStore
from workers.memory.stores.markdown.errors import file_errors
from workers.memory.stores.markdown.files import atomic_write, fsync_dir
from workers.memory.stores.markdown.layout import GITIGNORE, SECRET_FILE, STATE_DIR, VECTOR_FILE
from workers.memory.stores.markdown.scan import FolderScan

__all__ = ("MarkdownBase",)

R = TypeVar("R")


class MarkdownBase(MemoryStore):
    """Opening, closing and running operations (see
    :class:`~workers.memory.stores.markdown.MarkdownMemoryStore`)."""

    def __init__(self, path: str | os.PathLike[str], *, clock: Clock = utc_now) -> None:
        super().__init__()
        self.path = Path(path).expanduser()
        self._clock = clock
        self._folder = FolderScan(self.path, clock)
        self._boundary = file_errors(self.path)
        # One operation at a time in this store (the state is not thread-safe), and one store
        # at a time on the folder: flock on the .ditto folder, which other processes' stores
        # (and other stores in this process: each has its own descriptor) wait for. The kernel
        # drops it when a process dies, so no lock file is ever left behind.
        self._thread_lock = threading.Lock()
        self._descriptor: int | None = None
        self._closed = False

    async def open(self) -> None:
        await self._run(lambda: None)

    async def watch(self, interval_s: float = 2.0) -> None:
        """Take in a person's edits every ``interval_s`` seconds, until cancelled (run it in a
        task group beside the runtime): their history entries are then written even when no
        one reads. Without it, edits are taken in by the next operation, as ever.

        Raises:
            MemoryStoreError: ``INVALID_INPUT`` for an interval that is not positive; what a
                scan raises (``STORE_UNAVAILABLE`` and the like).
        """
        if not interval_s > 0:
            raise MemoryStoreError("the watch interval must be a positive number of seconds")
        while True:
            # A scan writes (a person's edit becomes a new version): a write's rules apply.
            await self._run(lambda: None, writes=True)
            await anyio.sleep(interval_s)

    async def aclose(self) -> None:
        await anyio.to_thread.run_sync(self._close)

    def _close(self) -> None:
        with self._thread_lock:
            self._closed = True
            if self._descriptor is not None:
                os.close(self._descriptor)
                self._descriptor = None

    async def _run(self, operation: Callable[[], R], *, writes: bool = False) -> R:
        """Run ``operation`` in a worker thread, holding the locks, after a scan: one thread
        hop per operation."""
        if not writes:
            return await anyio.to_thread.run_sync(self._locked, operation)
        # A batch cannot be stopped half way (nor rolled back once its journal is in): a
        # cancelled wait waits on for the thread, and a batch that was written when the
        # call's deadline fired is reported as written, not as "timeout" (the SQLite
        # store's rule, ``stores.sqlite.jobs.settle``).
        waiter = asyncio.get_running_loop().run_in_executor(None, self._locked, operation)
        try:
            result = await asyncio.shield(waiter)
        except asyncio.CancelledError:
            while not waiter.done():
                with contextlib.suppress(asyncio.CancelledError):
                    await asyncio.shield(waiter)
            if waiter.exception() is not None or not deadline_fired():
                raise  # nothing was written, or the caller itself left
            result = waiter.result()
        claim_outcome()
        return result

    def _locked(self, operation: Callable[[], R]) -> R:
        with self._boundary, self._thread_lock:
            if self._closed:
                raise MemoryStoreError(
                    "the memory store is closed", code=ErrorCode.STORE_UNAVAILABLE
                )
            if self._descriptor is None:
                self._descriptor = self._setup()
            fcntl.flock(self._descriptor, fcntl.LOCK_EX)
            try:
                self._folder.sync()
                return operation()
            finally:
                fcntl.flock(self._descriptor, fcntl.LOCK_UN)

    def _setup(self) -> int:
        """Make the folder and ``.ditto/`` (with its ``.gitignore`` and the cursor key) if
        missing, and open the descriptor the lock is taken on."""
        state = self.path / STATE_DIR
        if not state.is_dir():
            state.mkdir(parents=True, exist_ok=True)
            fsync_dir(state.parent)
        descriptor = os.open(state, os.O_RDONLY | os.O_DIRECTORY)
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX)  # two stores creating one folder at once
            ignore = state / ".gitignore"
            if not ignore.exists():
                atomic_write(ignore, GITIGNORE.encode())
            else:
                _ignore_also(ignore, VECTOR_FILE)  # a folder made before there were vectors
            secret = state / SECRET_FILE
            if not secret.exists():
                atomic_write(secret, secrets.token_hex(32).encode() + b"\n")
            self.cursor_secret = bytes.fromhex(secret.read_text().strip())
            fcntl.flock(descriptor, fcntl.LOCK_UN)
        except BaseException:
            os.close(descriptor)  # closing drops the lock too
            raise
        return descriptor

    def _describe(self) -> dict[str, Any]:
        # A file that does not read as a record (skipped with a warning at each change) is
        # named here, so that what copies or checks the store can tell it is incomplete.
        unreadable = sorted(name for name, file in self._folder.files.items() if file.id is None)
        return {
            "folder": str(self.path),
            "records": len(self._folder.items),
            "unreadable_files": unreadable,
        }


def _ignore_also(ignore: Path, name: str) -> None:
    """Add ``name`` to the ``.gitignore`` file ``ignore`` unless it lists it (a person's own
    lines stay as they are)."""
    text = ignore.read_bytes()
    if name.encode() in text.splitlines():
        return
    separator = b"\n" if text and not text.endswith(b"\n") else b""
    atomic_write(ignore, text + separator + name.encode() + b"\n")
