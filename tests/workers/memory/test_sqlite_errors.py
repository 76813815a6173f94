"""The SQLite store's driver-error boundary, on real files: every broken file or lock gives its
own code, names the file, keeps the driver's exception as the cause, and changes nothing."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from ditto import create_ditto
from ditto.errors import ErrorCode
from workers.memory import (
    MemoryDraft,
    MemoryFilter,
    MemoryStoreError,
    OrderBy,
    SqliteMemoryStore,
    create_memory_worker,
)

pytestmark = pytest.mark.anyio


async def fill_store(path: Path, records: int = 300) -> None:
    async with SqliteMemoryStore(path) as store:
        drafts = [MemoryDraft(content="x" * 100, key=f"k{n}") for n in range(records)]
        await store.write(drafts, "create")


async def query_code(path: Path, **options: object) -> tuple[str | None, bool, str]:
    """The code, retryability and message of a MEMORY.QUERY on the store at ``path``."""
    store = SqliteMemoryStore(path, **options)  # type: ignore[arg-type]
    try:
        async with create_ditto(workers=[create_memory_worker(store)]) as runtime:
            result = await runtime.invoke("MEMORY.QUERY", {})
    finally:
        await store.aclose()
    assert result.error is not None, "a broken store must not answer"
    return result.error.code, result.error.retryable, result.error.message


@contextmanager
def write_locked(path: Path) -> Iterator[None]:
    """Another connection holds the file's write lock inside the block."""
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        yield
    finally:
        holder.execute("ROLLBACK")
        holder.close()


async def test_a_locked_database_is_a_retryable_store_timeout(tmp_path: Path) -> None:
    path = tmp_path / "locked.sqlite"
    await fill_store(path, 3)
    async with SqliteMemoryStore(path, busy_timeout_ms=50) as store:
        async with create_ditto(workers=[create_memory_worker(store)]) as runtime:
            with write_locked(path):
                written = await runtime.invoke("MEMORY.WRITE", {"memories": [{"content": "new"}]})
                read = await runtime.invoke("MEMORY.QUERY", {})  # WAL: readers go on
            retried = await runtime.invoke("MEMORY.WRITE", {"memories": [{"content": "new"}]})
    assert written.error is not None
    assert (written.error.code, written.error.retryable) == ("STORE_TIMEOUT", True)
    assert str(path) in written.error.message
    assert len(read.unwrap().items) == 3
    assert retried.ok  # once the lock is gone the same call succeeds, once
    async with SqliteMemoryStore(path) as store:
        assert await store.count(MemoryFilter()) == 4


async def test_closing_while_another_connection_holds_the_write_lock_succeeds(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "locked.sqlite"
    await fill_store(path, 2)
    idle = SqliteMemoryStore(path, busy_timeout_ms=10)
    used = SqliteMemoryStore(path, busy_timeout_ms=10)
    await idle.open()
    await used.open()
    (item,) = await used.query(MemoryFilter(), OrderBy("created_at"), 1, None)
    await used.record_usage([item.id], item.created_at)
    with write_locked(path), caplog.at_level("WARNING", "ditto.workers.memory.sqlite"):
        await idle.aclose()  # nothing pending: takes no lock
        assert not caplog.records
        await used.aclose()  # counters pending: they are given up, and said so
    assert [r.getMessage() for r in caplog.records] == [
        "closed the memory store without recording the usage counters of 1 record(s): "
        "another connection held the file's write lock"
    ]
    async with SqliteMemoryStore(path) as store:
        assert await store.count(MemoryFilter()) == 2


async def test_the_driver_error_stays_the_cause(tmp_path: Path) -> None:
    path = tmp_path / "locked.sqlite"
    await fill_store(path, 1)
    async with SqliteMemoryStore(path, busy_timeout_ms=10) as store:
        with write_locked(path), pytest.raises(MemoryStoreError) as raised:
            await store.write([MemoryDraft(content="new")], "create")
    assert raised.value.code == ErrorCode.STORE_TIMEOUT
    assert isinstance(raised.value.__cause__, sqlite3.OperationalError)


async def test_opening_a_locked_new_store_is_a_store_timeout(tmp_path: Path) -> None:
    path = tmp_path / "fresh.sqlite"
    sqlite3.connect(path).close()  # an empty database: opening it must migrate, under the lock
    with write_locked(path):
        code, retryable, _ = await query_code(path, busy_timeout_ms=10)
    assert (code, retryable) == ("STORE_TIMEOUT", True)


async def test_a_file_that_is_not_a_database_is_store_corrupt_and_untouched(
    tmp_path: Path,
) -> None:
    path = tmp_path / "notes.sqlite"
    junk = bytes(range(256)) * 16
    path.write_bytes(junk)
    code, retryable, message = await query_code(path)
    assert (code, retryable) == ("STORE_CORRUPT", False)
    assert str(path) in message
    assert path.read_bytes() == junk


async def test_a_truncated_database_is_store_corrupt(tmp_path: Path) -> None:
    path = tmp_path / "memory.sqlite"
    await fill_store(path)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    code, _, _ = await query_code(path)
    assert code == "STORE_CORRUPT"


async def test_a_directory_is_store_unavailable(tmp_path: Path) -> None:
    path = tmp_path / "memory.sqlite"
    path.mkdir()
    code, retryable, message = await query_code(path)
    assert (code, retryable) == ("STORE_UNAVAILABLE", False)
    assert str(path) in message


async def test_a_folder_that_cannot_be_made_is_store_unavailable(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    code, _, message = await query_code(blocker / "memory.sqlite")
    assert code == "STORE_UNAVAILABLE"
    assert "cannot create" in message


async def test_a_read_only_store_reads_and_refuses_every_change(tmp_path: Path) -> None:
    path = tmp_path / "memory.sqlite"
    await fill_store(path, 2)
    async with SqliteMemoryStore(path, read_only=True) as store:
        async with create_ditto(workers=[create_memory_worker(store)]) as runtime:
            read = await runtime.invoke("MEMORY.QUERY", {})
            found = await runtime.invoke("MEMORY.SEARCH", {"query": "xxx"})
            written = await runtime.invoke("MEMORY.WRITE", {"memories": [{"content": "new"}]})
            deleted = await runtime.invoke(
                "MEMORY.DELETE", {"ids": [item.id for item in read.unwrap().items]}
            )
    assert len(read.unwrap().items) == 2
    assert found.ok
    for refused in (written, deleted):
        assert refused.error is not None
        assert refused.error.code == "STORE_READ_ONLY"
    async with SqliteMemoryStore(path) as store:
        assert await store.count(MemoryFilter(archived="include")) == 2


async def test_a_read_only_store_is_never_created(tmp_path: Path) -> None:
    path = tmp_path / "missing.sqlite"
    code, _, _ = await query_code(path, read_only=True)
    assert code == "STORE_UNAVAILABLE"
    assert not path.exists()


@pytest.mark.parametrize("change", ["unlinked", "moved", "replaced"])
async def test_a_file_that_vanished_while_open_fails_every_call(
    tmp_path: Path, change: str
) -> None:
    path = tmp_path / "m.sqlite"
    async with SqliteMemoryStore(path) as store:
        (kept,) = await store.write([MemoryDraft(content="kept", key="k")], "create")
        if change == "moved":
            path.rename(tmp_path / "elsewhere.sqlite")
        else:
            path.unlink()
            if change == "replaced":
                await fill_store(path, 1)  # another store now lives at the path
        calls = {
            "write": lambda: store.write([MemoryDraft(content="lost")], "create"),
            "delete": lambda: store.delete([kept.id]),
            "get": lambda: store.get([kept.id], [], "default"),
            "query": lambda: store.query(MemoryFilter(), OrderBy(), 10, None),
        }
        for name, call in calls.items():
            with pytest.raises(MemoryStoreError) as failure:
                await call()
            assert failure.value.code == ErrorCode.STORE_UNAVAILABLE, name
            assert str(path) in failure.value.message


async def test_without_create_folder_a_missing_folder_is_store_unavailable(tmp_path: Path) -> None:
    path = tmp_path / "missing" / "m.sqlite"
    with pytest.raises(MemoryStoreError) as failure:
        async with SqliteMemoryStore(path, create_folder=False):
            pass
    assert failure.value.code == ErrorCode.STORE_UNAVAILABLE
    assert not path.parent.exists()
