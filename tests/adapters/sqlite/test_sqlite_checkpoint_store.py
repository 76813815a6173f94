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
from typing import Any

import anyio
import pytest
from anyio.streams.buffered import BufferedByteReceiveStream

from ditto.adapters.sqlite import SqliteCheckpointStore
from ditto.runtime.checkpoints import CheckpointError
from tests.runtime.checkpoints.conftest import FakeClock

pytestmark = pytest.mark.anyio

REPO = Path(__file__).resolve().parents[3]

APPENDER = textwrap.dedent(
    """
    import sys, anyio
    from ditto.adapters.sqlite import SqliteCheckpointStore

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


class GatedClock(FakeClock):
    """A clock that can hold the writer thread inside its transaction (it reads the clock
    there), so the test knows exactly which jobs queue up behind it and commit together."""

    def __init__(self) -> None:
        super().__init__()
        self.open = threading.Event()
        self.open.set()
        self.entered = threading.Event()

    def __call__(self) -> float:
        if not self.open.is_set():
            self.entered.set()
            self.open.wait(30)
        return super().__call__()


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


@pytest.mark.parametrize(
    "edit",
    [
        "UPDATE checkpoints SET records = 0",
        "UPDATE checkpoints SET records = 5",
        "DELETE FROM checkpoint_records WHERE seq = 0",
    ],
    ids=["count lowered", "count raised", "a record gone"],
)
async def test_an_edited_record_count_is_corrupt_not_an_outage(tmp_path: Path, edit: str) -> None:
    path = tmp_path / "cp.sqlite"
    store = SqliteCheckpointStore(path)
    try:
        await store.save("run", "graph:g", b"envelope")
        await store.append("run", [("a", b"1"), ("b", b"2")])
        assert [key for key, _ in (await store.load("run")).records] == ["a", "b"]
        with sqlite3.connect(path) as connection:
            connection.execute(edit)
        connection.close()
        with pytest.raises(CheckpointError) as raised:
            await store.load("run")
        assert raised.value.code == "CHECKPOINT_CORRUPT"
        assert not raised.value.retryable
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


async def test_one_batch_answers_each_job_in_queue_order(tmp_path: Path) -> None:
    """Jobs queued while the writer is busy commit in one transaction, each seeing the effects
    of the jobs before it: a delete hides the records appended just before it, a save after an
    append moves ``updated_at`` again, and a job that fails fails alone."""
    clock = GatedClock()
    store = SqliteCheckpointStore(tmp_path / "cp.sqlite", clock=clock)
    outcomes: dict[str, object] = {}

    async def run(name: str, call: Any) -> None:
        try:
            outcomes[name] = await call
        except CheckpointError as exc:
            outcomes[name] = exc.code

    try:
        await store.save("run", "graph:g", b"")
        await store.append("run", [("r0", b"0")])
        await store.save("other", "graph:o", b"")
        clock.open.clear()
        async with anyio.create_task_group() as group:
            group.start_soon(run, "blocker", store.save("blocker", "graph:b", b""))
            await anyio.to_thread.run_sync(clock.entered.wait, 30)  # the writer is held
            start = clock.now
            for name, call in (
                ("append other", store.append("other", [("w", b"")])),
                ("append run", store.append("run", [("a", b"1")])),
                ("save run", store.save("run", "graph:g2", b"env2")),
                ("delete other", store.delete("other")),
                ("append deleted", store.append("other", [("x", b"")])),
                ("save other", store.save("other", "graph:o", b"")),
                ("append new other", store.append("other", [("y", b"2")])),
            ):
                group.start_soon(run, name, call)
            await anyio.wait_all_tasks_blocked()  # every job is queued behind the blocker
            clock.open.set()
        assert outcomes == {
            "blocker": None,
            "append other": None,
            "append run": None,
            "save run": None,
            "delete other": True,
            "append deleted": "CHECKPOINT_NOT_FOUND",
            "save other": None,
            "append new other": None,
        }
        run_checkpoint = await store.load("run")
        assert run_checkpoint is not None
        assert run_checkpoint.records == (("r0", b"0"), ("a", b"1"))
        assert (run_checkpoint.scope, run_checkpoint.envelope) == ("graph:g2", b"env2")
        # Clock readings in job order: blocker, append other, append run, save run, save
        # other, append new other (a delete and a failed append read none).
        assert run_checkpoint.updated_at == start + 3
        other = await store.load("other")
        assert other is not None
        assert (other.records, other.updated_at) == ((("y", b"2"),), start + 5)
        infos = {info.id: info.records for info in await store.list()}
        assert infos == {"run": 2, "other": 1, "blocker": 0}
    finally:
        clock.open.set()
        await store.aclose()
