"""What only the SQLite store promises: a durable file, migrations, atomic batches."""

from __future__ import annotations

import signal
import sqlite3
import subprocess
import sys
import textwrap
from datetime import UTC, datetime
from pathlib import Path

import anyio
import pytest

from ditto import InvalidInputError, create_ditto
from workers.memory import (
    MemoryDraft,
    MemoryFilter,
    MemoryStoreError,
    OrderBy,
    SqliteMemoryStore,
    create_memory_worker,
)
from workers.memory.stores.sqlite import writes as sqlite_module
from workers.memory.stores.sqlite.schema import SCHEMA_VERSION

pytestmark = pytest.mark.anyio

ALL = MemoryFilter()


async def count(path: Path) -> int:
    async with SqliteMemoryStore(path) as store:
        return len(await store.query(ALL, OrderBy(), 10_000, None))


async def test_reopening_the_file_returns_everything(tmp_path: Path) -> None:
    path = tmp_path / "m.sqlite"
    async with SqliteMemoryStore(path) as store:
        async with create_ditto(workers=[create_memory_worker(store)]) as runtime:
            written = await runtime.invoke(
                "MEMORY.WRITE",
                {
                    "memories": [
                        {"key": f"k{n}", "content": {"n": n}, "tags": ["t"]} for n in range(50)
                    ]
                },
            )
            await runtime.invoke("MEMORY.SEARCH", {"query": "t"})  # no hit: tags are not text
            page = await runtime.invoke("MEMORY.QUERY", {"limit": 10})
    async with SqliteMemoryStore(path) as reopened:
        async with create_ditto(workers=[create_memory_worker(reopened)]) as runtime:
            everything = (await runtime.invoke("MEMORY.QUERY", {"limit": 100})).unwrap().items
            # A cursor issued before the restart still works: the signing key lives in the file.
            rest = await runtime.invoke(
                "MEMORY.QUERY", {"limit": 100, "cursor": page.unwrap().next_cursor}
            )
    assert everything == sorted(written.unwrap().items, key=lambda item: item.id)
    assert len(rest.unwrap().items) == 40


async def test_usage_queued_before_close_is_kept(tmp_path: Path) -> None:
    path = tmp_path / "m.sqlite"
    async with SqliteMemoryStore(path) as store:
        async with create_ditto(workers=[create_memory_worker(store)]) as runtime:
            await runtime.invoke("MEMORY.WRITE", {"memories": [{"content": "espresso"}]})
            await runtime.invoke("MEMORY.SEARCH", {"query": "espresso"})
    async with SqliteMemoryStore(path) as reopened:
        (item,) = await reopened.query(ALL, OrderBy(), 10, None)
    assert item.usage_count == 1


@pytest.mark.parametrize("path", [":memory:", "", "file::memory:?cache=shared"])
def test_an_in_memory_database_is_refused(path: str) -> None:
    with pytest.raises(InvalidInputError, match="file path"):
        SqliteMemoryStore(path)


async def test_the_schema_is_versioned_and_the_journal_is_wal(tmp_path: Path) -> None:
    path = tmp_path / "m.sqlite"
    async with SqliteMemoryStore(path):
        pass
    connection = sqlite3.connect(path)
    try:
        assert connection.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        assert connection.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    finally:
        connection.close()


async def test_a_file_from_a_newer_version_is_refused_untouched(tmp_path: Path) -> None:
    path = tmp_path / "m.sqlite"
    async with SqliteMemoryStore(path):
        pass
    connection = sqlite3.connect(path)
    connection.execute("PRAGMA user_version = 99")
    connection.close()
    with pytest.raises(MemoryStoreError, match="Upgrade Ditto"):
        async with SqliteMemoryStore(path):
            pass
    connection = sqlite3.connect(path)
    assert connection.execute("PRAGMA user_version").fetchone()[0] == 99
    connection.close()


async def test_a_failure_mid_batch_leaves_no_partial_batch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = sqlite_module.fts_row
    seen = 0

    def failing(item):  # type: ignore[no-untyped-def]
        nonlocal seen
        seen += 1
        if seen == 50:
            raise OSError("disk full")
        return real(item)

    monkeypatch.setattr(sqlite_module, "fts_row", failing)
    path = tmp_path / "m.sqlite"
    async with SqliteMemoryStore(path) as store:
        async with create_ditto(workers=[create_memory_worker(store)]) as runtime:
            result = await runtime.invoke(
                "MEMORY.WRITE", {"memories": [{"content": n} for n in range(100)]}
            )
    assert result.error is not None
    assert result.error.code == "MEMORY_BACKEND_ERROR"
    assert "disk" not in result.error.message
    monkeypatch.setattr(sqlite_module, "fts_row", real)
    assert await count(path) == 0


CRASHING_WRITER = textwrap.dedent(
    """
    import sys, time, anyio
    from workers.memory import SqliteMemoryStore, MemoryDraft
    from workers.memory.stores.sqlite import writes as module

    real, seen = module.fts_row, 0
    def slow(item):
        global seen
        seen += 1
        if seen == 500:  # half the batch is inside the open transaction
            print("mid-batch", flush=True)
            time.sleep(60)
        return real(item)
    module.fts_row = slow

    async def main():
        async with SqliteMemoryStore(sys.argv[1]) as store:
            await store.write([MemoryDraft(content=n) for n in range(1000)], "create")
    anyio.run(main)
    """
)


async def test_a_process_killed_mid_batch_leaves_no_partial_batch(tmp_path: Path) -> None:
    path = tmp_path / "m.sqlite"
    async with SqliteMemoryStore(path) as store:
        await store.write([MemoryDraft(content="before")], "create")
    child = subprocess.Popen(  # noqa: ASYNC220 - a child we kill, not one we await
        [sys.executable, "-c", CRASHING_WRITER, str(path)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert child.stdout is not None
        with anyio.fail_after(60):
            line = await anyio.to_thread.run_sync(child.stdout.readline)
        assert line.strip() == "mid-batch"
        child.send_signal(signal.SIGKILL)
    finally:
        child.wait(timeout=30)
        if child.stdout is not None:
            child.stdout.close()
    assert child.returncode == -signal.SIGKILL
    assert await count(path) == 1  # only the record written before the crash


async def test_reads_and_writes_can_run_concurrently(tmp_path: Path) -> None:
    async with SqliteMemoryStore(tmp_path / "m.sqlite", readers=3) as store:
        async with create_ditto(workers=[create_memory_worker(store)]) as runtime:
            results = []

            async def writer(n: int) -> None:
                results.append(
                    await runtime.invoke(
                        "MEMORY.WRITE", {"memories": [{"content": f"espresso {n}"}]}
                    )
                )

            async def reader() -> None:
                results.append(await runtime.invoke("MEMORY.SEARCH", {"query": "espresso"}))
                results.append(await runtime.invoke("MEMORY.QUERY", {}))

            async with anyio.create_task_group() as group:
                for n in range(20):
                    group.start_soon(writer, n)
                    group.start_soon(reader)
        assert all(result.ok for result in results)
        assert len(await store.query(ALL, OrderBy(), 100, None)) == 20


async def test_operations_open_the_store_lazily_and_close_is_final(tmp_path: Path) -> None:
    store = SqliteMemoryStore(tmp_path / "m.sqlite")
    await store.write([MemoryDraft(content=1)], "create")
    await store.aclose()
    with pytest.raises(MemoryStoreError, match="closed"):
        await store.query(ALL, OrderBy(), 10, None)


def test_metadata_filter_keys_built_in_python_are_checked() -> None:
    from workers.memory.stores.sqlite.sql import where_clause

    hostile = MemoryFilter(metadata={"x\"') IS NULL OR 1=1 OR json_type(m.metadata, '$.\"x": None})
    with pytest.raises(MemoryStoreError, match="metadata filter keys"):
        where_clause(hostile, datetime.now(UTC))


async def test_writes_queued_together_commit_together_each_with_its_own_outcome(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Group commit: while the writer is busy, queued writes wait and then commit in one
    transaction; one that fails leaves the others written, one whose caller gave up is not."""
    import threading

    from workers.memory.stores.sqlite import commits

    real_row, real_attempt = sqlite_module.fts_row, commits._attempt
    first_running, release = threading.Event(), threading.Event()
    groups: list[int] = []

    def gated(item):  # type: ignore[no-untyped-def]
        if item.content == "first":
            first_running.set()
            release.wait(10)
        if item.content == "bad":
            raise OSError("disk full")
        return real_row(item)

    def counted(connection, group, *rest):  # type: ignore[no-untyped-def]
        groups.append(len(group))
        return real_attempt(connection, group, *rest)

    monkeypatch.setattr(sqlite_module, "fts_row", gated)
    monkeypatch.setattr(commits, "_attempt", counted)
    outcomes: dict[str, object] = {}
    async with SqliteMemoryStore(tmp_path / "m.sqlite") as store:

        async def write(content: str) -> None:
            try:
                outcomes[content] = await store.write([MemoryDraft(content=content)], "create")
            except OSError as exc:  # the worker's boundary makes it MEMORY_BACKEND_ERROR
                outcomes[content] = exc

        async with anyio.create_task_group() as group:
            group.start_soon(write, "first")
            await anyio.to_thread.run_sync(first_running.wait, 10)
            for name in ("a", "bad", "b", "c"):
                group.start_soon(write, name)
            with anyio.CancelScope() as gave_up:
                gave_up.cancel()  # a caller that leaves while its write is still queued
                await write("left")
            await anyio.sleep(0.05)  # let the four reach the queue
            release.set()
        stored = {item.content for item in await store.query(ALL, OrderBy(), 100, None)}
    assert stored == {"first", "a", "b", "c"}
    assert isinstance(outcomes["bad"], OSError)
    assert "left" not in outcomes
    # The four queued behind "first" shared one transaction; "bad" failing in it made the group
    # run again, each write in a savepoint, so only "bad" failed.
    assert groups[:3] == [1, 4, 4]
