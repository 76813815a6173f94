"""What only the SQLite store promises: durability on return across processes, its file, its
threads."""

from __future__ import annotations

import gc
import signal
import sqlite3
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import anyio
import pytest
from anyio.streams.buffered import BufferedByteReceiveStream

from ditto.runtime.checkpoints import CheckpointError, SqliteCheckpointStore

pytestmark = pytest.mark.anyio

REPO = Path(__file__).resolve().parents[3]

APPENDER = textwrap.dedent(
    """
    import sys, anyio
    from ditto.runtime.checkpoints import SqliteCheckpointStore

    async def main(path, count, then):
        store = SqliteCheckpointStore(path)
        for n in range(int(count)):
            await store.append("run", [(f"child-{n}", n.to_bytes(4, "big"))])
        print("appended", flush=True)
        if then == "hang":
            await anyio.sleep_forever()
        # "exit": leave without aclose(); the writer thread must not keep the process alive.

    anyio.run(main, *sys.argv[1:])
    """
)


async def _child_appends(path: Path, count: int, then: str) -> tuple[str, int]:
    """Run the appender; with ``then="hang"`` SIGKILL it right after it reports. Returns its
    report line and exit status."""
    command = [sys.executable, "-c", APPENDER, str(path), str(count), then]
    async with await anyio.open_process(command, cwd=REPO, stdin=subprocess.DEVNULL) as child:
        assert child.stdout is not None
        lines = BufferedByteReceiveStream(child.stdout)
        try:
            with anyio.fail_after(60):
                line = (await lines.receive_until(b"\n", 1_024)).decode()
                if then == "hang":
                    child.kill()
                status = await child.wait()
        finally:
            if child.returncode is None:
                child.kill()
    return line, status


def _writer_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "ditto-checkpoint-writer"]


async def test_an_append_is_durable_when_it_returns_even_if_the_process_is_killed(
    tmp_path: Path,
) -> None:
    path = tmp_path / "cp.sqlite"
    store = SqliteCheckpointStore(path)
    try:
        await store.save("run", "graph:g", b"envelope")
        assert await store.load("run") is not None  # this process has the file open too
        line, status = await _child_appends(path, 50, "hang")
        assert (line, status) == ("appended", -signal.SIGKILL)
        expected = tuple((f"child-{n}", n.to_bytes(4, "big")) for n in range(50))
        stored = await store.load("run")  # the open store sees the other process's commits
        assert stored is not None
        assert stored.records == expected
        fresh = SqliteCheckpointStore(path)
        try:
            again = await fresh.load("run")
            assert again is not None
            assert (again.envelope, again.records) == (b"envelope", expected)
        finally:
            await fresh.aclose()
    finally:
        await store.aclose()


async def test_an_unclosed_store_neither_keeps_its_process_alive_nor_loses_writes(
    tmp_path: Path,
) -> None:
    path = tmp_path / "cp.sqlite"
    store = SqliteCheckpointStore(path)
    try:
        await store.save("run", "graph:g", b"")
        assert await _child_appends(path, 3, "exit") == ("appended", 0)
        stored = await store.load("run")
        assert stored is not None
        assert [key for key, _ in stored.records] == ["child-0", "child-1", "child-2"]
    finally:
        await store.aclose()


async def test_the_file_and_its_folders_are_created_on_first_use(tmp_path: Path) -> None:
    path = tmp_path / "a" / "b" / "cp.sqlite"
    store = SqliteCheckpointStore(path)
    assert not path.parent.exists()  # nothing happens before the first call
    try:
        await store.save("run", "graph:g", b"")
    finally:
        await store.aclose()
    with sqlite3.connect(path) as connection:
        tables = {row[0] for row in connection.execute("SELECT name FROM sqlite_master")}
        assert connection.execute("PRAGMA journal_mode").fetchone() == ("wal",)
    connection.close()
    assert {"checkpoints", "checkpoint_records"} <= tables


async def test_a_read_before_any_write_sees_an_empty_store(tmp_path: Path) -> None:
    store = SqliteCheckpointStore(tmp_path / "new" / "cp.sqlite")
    try:
        assert await store.list() == []
        assert await store.load("run") is None
    finally:
        await store.aclose()


async def test_a_file_that_is_not_a_database_is_corrupt_and_its_path_is_not_shown(
    tmp_path: Path,
) -> None:
    path = tmp_path / "secret-name.sqlite"
    path.write_bytes(b"this is not an SQLite database, not at all" * 100)
    store = SqliteCheckpointStore(path)
    try:
        for call in (store.save("run", "graph:g", b""), store.load("run")):
            with pytest.raises(CheckpointError) as raised:
                await call
            assert raised.value.code == "CHECKPOINT_CORRUPT"
            assert "secret-name" not in str(raised.value)
            assert isinstance(raised.value.__cause__, sqlite3.DatabaseError)
    finally:
        await store.aclose()


async def test_a_path_that_cannot_be_created_is_unavailable(tmp_path: Path) -> None:
    blocker = tmp_path / "private-file"
    blocker.write_text("a file where a folder should be")
    store = SqliteCheckpointStore(blocker / "cp.sqlite")
    try:
        with pytest.raises(CheckpointError) as raised:
            await store.save("run", "graph:g", b"")
        assert raised.value.code == "CHECKPOINT_STORE_UNAVAILABLE"
        assert raised.value.retryable is True
        assert "private-file" not in str(raised.value)
        with pytest.raises(CheckpointError) as raised:  # the writer is still there to answer
            await store.append("run", [("t", b"")])
        assert raised.value.code == "CHECKPOINT_STORE_UNAVAILABLE"
    finally:
        await store.aclose()


async def test_a_write_blocked_by_another_process_lock_is_retryable(tmp_path: Path) -> None:
    path = tmp_path / "cp.sqlite"
    store = SqliteCheckpointStore(path, busy_timeout_ms=50)
    try:
        await store.save("run", "graph:g", b"")
        locker = sqlite3.connect(path, isolation_level=None)
        try:
            locker.execute("BEGIN IMMEDIATE")
            with pytest.raises(CheckpointError) as raised:
                await store.append("run", [("t", b"")])
            assert raised.value.code == "CHECKPOINT_STORE_UNAVAILABLE"
            assert raised.value.retryable is True
            locker.execute("ROLLBACK")
        finally:
            locker.close()
        await store.append("run", [("t", b"after")])
        stored = await store.load("run")
        assert stored is not None
        assert stored.records == (("t", b"after"),)
    finally:
        await store.aclose()


async def test_the_writer_thread_ends_on_close_and_on_garbage_collection(tmp_path: Path) -> None:
    before = set(_writer_threads())
    store = SqliteCheckpointStore(tmp_path / "closed.sqlite")
    await store.save("run", "graph:g", b"")
    [closing] = set(_writer_threads()) - before
    await store.aclose()
    assert not closing.is_alive()

    dropped = SqliteCheckpointStore(tmp_path / "dropped.sqlite")
    await dropped.save("run", "graph:g", b"")
    [orphan] = set(_writer_threads()) - before
    assert orphan.daemon
    del dropped
    gc.collect()
    orphan.join(timeout=10)  # returns as soon as the thread ends
    assert not orphan.is_alive()
