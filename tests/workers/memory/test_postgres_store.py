"""What only the PostgreSQL store promises: safe failures and no half-written batch."""

from __future__ import annotations

from typing import Any
from uuid import uuid4

import pytest

from ditto import InvalidInputError, create_ditto
from tests.services import PostgresSpace
from workers.memory import (
    MemoryDraft,
    MemoryFilter,
    MemoryPatch,
    MemoryStoreError,
    OrderBy,
    create_memory_worker,
)

pytestmark = [pytest.mark.anyio, pytest.mark.postgres]

asyncpg = pytest.importorskip("asyncpg", reason="PostgreSQL tests need asyncpg")

from workers.memory.stores.postgres import PostgresMemoryStore  # noqa: E402


async def count(space: PostgresSpace) -> int:
    async with PostgresMemoryStore.from_url(space.url, schema=space.schema) as store:
        return len(await store.query(MemoryFilter(), OrderBy(), 10_000, None))


async def test_a_connection_killed_inside_a_batch_leaves_nothing_half_written(
    postgres_space: PostgresSpace, monkeypatch: pytest.MonkeyPatch
) -> None:
    from workers.memory.stores.postgres import store as store_module

    real = store_module.write_batch

    async def dying(connection: Any, *args: Any) -> Any:
        written = await real(connection, *args)  # the rows are in, the batch not committed
        await connection.execute("SELECT pg_terminate_backend(pg_backend_pid())")
        return written

    async with PostgresMemoryStore.from_url(postgres_space.url, schema=postgres_space.schema) as s:
        await s.write([MemoryDraft(content="before")], "create")
    monkeypatch.setattr(store_module, "write_batch", dying)
    store = PostgresMemoryStore.from_url(postgres_space.url, schema=postgres_space.schema)
    try:
        async with create_ditto(workers=[create_memory_worker(store)]) as runtime:
            result = await runtime.invoke(
                "MEMORY.WRITE", {"memories": [{"content": n, "key": f"k{n}"} for n in range(200)]}
            )
    finally:
        await store.aclose()
    assert result.error is not None
    assert result.error.code == "STORE_UNAVAILABLE"
    assert result.error.retryable
    assert await count(postgres_space) == 1


async def test_an_unreachable_server_is_store_unavailable_without_the_url() -> None:
    url = "postgresql://admin:hunter2@127.0.0.1:1/nowhere"
    store = PostgresMemoryStore.from_url(url)
    async with create_ditto(workers=[create_memory_worker(store)]) as runtime:
        result = await runtime.invoke("MEMORY.QUERY", {})
    await store.aclose()
    assert result.error is not None
    assert result.error.code == "STORE_UNAVAILABLE"
    assert result.error.retryable
    for secret in ("hunter2", "admin", "127.0.0.1", "nowhere"):
        assert secret not in result.error.message
    assert "hunter2" not in repr(store)


async def test_a_statement_timeout_is_a_clean_error(postgres_space: PostgresSpace) -> None:
    class SlowStore(PostgresMemoryStore):
        async def record_usage(self, ids: Any, at: Any) -> None:
            async with self._translated_call():
                await self.pool.execute("SELECT pg_sleep(5)")

        def _translated_call(self) -> Any:
            from workers.memory.stores.postgres.errors import postgres_errors

            return postgres_errors()

    store = SlowStore.from_url(
        postgres_space.url, schema=postgres_space.schema, statement_timeout_ms=1_000
    )
    try:
        async with create_ditto(workers=[create_memory_worker(store)]) as runtime:
            written = await runtime.invoke("MEMORY.WRITE", {"memories": [{"content": "espresso"}]})
            assert written.ok, written.error  # well inside the timeout, even on a busy machine
            result = await runtime.invoke("MEMORY.SEARCH", {"query": "espresso"})
            after = await runtime.invoke("MEMORY.QUERY", {})
    finally:
        await store.aclose()
    assert result.error is not None
    assert result.error.code == "STORE_TIMEOUT"
    assert after.ok  # the pool recovered: the next call works


async def test_a_record_over_postgres_limits_is_a_clean_error_and_stores_nothing(
    postgres_space: PostgresSpace,
) -> None:
    # About 1.3 MB of distinct words: over the 1 MB a tsvector holds.
    huge = " ".join(f"w{n:07d}x" for n in range(130_000))
    store = PostgresMemoryStore.from_url(postgres_space.url, schema=postgres_space.schema)
    try:
        async with create_ditto(workers=[create_memory_worker(store)]) as runtime:
            written = await runtime.invoke(
                "MEMORY.WRITE", {"memories": [{"content": "small"}, {"content": huge}]}
            )
    finally:
        await store.aclose()
    assert written.error is not None
    assert written.error.code == "INVALID_INPUT"
    assert "too large" in written.error.message
    assert await count(postgres_space) == 0


async def test_a_schema_from_a_newer_version_is_refused(postgres_space: PostgresSpace) -> None:
    async with PostgresMemoryStore.from_url(postgres_space.url, schema=postgres_space.schema):
        pass
    connection = await asyncpg.connect(postgres_space.url)
    try:
        await connection.execute(
            f'UPDATE "{postgres_space.schema}".ditto_meta SET value = $1 '
            "WHERE name = 'schema_version'",
            b"99",
        )
    finally:
        await connection.close()
    store = PostgresMemoryStore.from_url(postgres_space.url, schema=postgres_space.schema)
    with pytest.raises(MemoryStoreError, match="Upgrade Ditto") as raised:
        await store.open()
    assert raised.value.code == "STORE_CORRUPT"
    await store.aclose()


async def test_two_stores_opening_at_once_migrate_once(postgres_space: PostgresSpace) -> None:
    import anyio

    stores = [
        PostgresMemoryStore.from_url(postgres_space.url, schema=postgres_space.schema)
        for _ in range(4)
    ]
    async with anyio.create_task_group() as group:
        for store in stores:
            group.start_soon(store.open)
    secrets = {store.cursor_secret for store in stores}
    for store in stores:
        await store.aclose()
    assert len(secrets) == 1  # one migration created the signing key; all read the same


def test_a_bad_schema_name_is_refused() -> None:
    with pytest.raises(InvalidInputError, match="schema must match"):
        PostgresMemoryStore.from_url("postgresql://x@localhost/db", schema='x"; DROP TABLE y; --')


async def test_an_upsert_never_overwrites_a_concurrent_update(
    postgres_space: PostgresSpace, monkeypatch: pytest.MonkeyPatch
) -> None:
    import anyio

    from workers.memory.stores.postgres import writes

    read_done = anyio.Event()
    real_replace = writes._replace

    async def blocked_replace(connection: Any, s: str, item: Any) -> None:
        if item.content == "upserted" and not read_done.is_set():
            read_done.set()
            # The record is read and locked: hold it until the UPDATE waits for that lock.
            # Watched from another connection: a transaction sees one snapshot of pg_locks.
            watcher = await asyncpg.connect(postgres_space.url)
            try:
                while not await watcher.fetchval(
                    "SELECT count(*) FROM pg_locks WHERE NOT granted AND pid <> pg_backend_pid()"
                ):
                    await anyio.lowlevel.checkpoint()
            finally:
                await watcher.close()
        await real_replace(connection, s, item)

    monkeypatch.setattr(writes, "_replace", blocked_replace)
    store = PostgresMemoryStore.from_url(postgres_space.url, schema=postgres_space.schema)
    try:
        async with create_ditto(workers=[create_memory_worker(store)]) as runtime:
            (item,) = (
                (
                    await runtime.invoke(
                        "MEMORY.WRITE", {"memories": [{"key": "k", "content": "v1"}]}
                    )
                )
                .unwrap()
                .items
            )
            results: dict[str, Any] = {}

            async def upsert() -> None:
                results["upsert"] = await runtime.invoke(
                    "MEMORY.WRITE",
                    {"memories": [{"key": "k", "content": "upserted"}], "mode": "upsert"},
                )

            async def update() -> None:
                await read_done.wait()
                results["update"] = await runtime.invoke(
                    "MEMORY.UPDATE", {"updates": [{"id": item.id, "tags": ["from-update"]}]}
                )

            async with anyio.create_task_group() as group:
                group.start_soon(upsert)
                group.start_soon(update)
            final = (await runtime.invoke("MEMORY.GET", {"ids": [item.id]})).unwrap().items[0]
    finally:
        await store.aclose()
    assert results["upsert"].ok
    assert results["update"].ok
    assert (final.content, final.tags, final.version) == ("upserted", ["from-update"], 3)


async def test_usage_pending_when_a_write_fails_is_not_lost(postgres_space: PostgresSpace) -> None:
    import time

    async with PostgresMemoryStore.from_url(postgres_space.url, schema=postgres_space.schema) as s:
        (item,) = await s.write([MemoryDraft(content="espresso")], "create")
        s._usage._applied_at = time.monotonic() + 60  # keep both uses pending (white-box)
        now = item.created_at
        await s.record_usage([item.id], now)
        await s.record_usage([item.id], now)
        with pytest.raises(MemoryStoreError, match="no record") as raised:
            await s.update([MemoryPatch(id="missing", content=1)])
        assert raised.value.code == "NOT_FOUND"
        await s.flush()
        (stored,) = await s.get([item.id], [], "default")
    assert stored.usage_count == 2


async def test_usage_counters_caught_in_a_deadlock_stay_pending_and_never_fail_a_write(
    postgres_space: PostgresSpace,
) -> None:
    """Another transaction holds one usage row and then asks for the one the store's apply
    holds: PostgreSQL ends the apply as a deadlock (it waited first, so it checks first). The
    write that applied the counters on its way goes on, and the counters are stored later."""
    import time

    import anyio

    space = postgres_space
    async with PostgresMemoryStore.from_url(space.url, schema=space.schema) as store:
        first, second = sorted(
            await store.write([MemoryDraft(content="tea"), MemoryDraft(content="cake")], "create"),
            key=lambda item: item.id,
        )
        await store.record_usage([first.id, second.id], first.created_at)
        await store.flush()  # both usage rows exist
        store._usage._applied_at = time.monotonic() + 60  # keep the next uses pending (white-box)
        await store.record_usage([first.id, second.id], first.created_at)
        other = await asyncpg.connect(space.url)
        try:
            await other.execute("SET deadlock_timeout = '10s'")  # the store's apply checks first
            transaction = other.transaction()
            await transaction.start()
            usage = f'"{space.schema}".memory_usage'
            await other.execute(f"UPDATE {usage} SET usage_count = 7 WHERE id = $1", second.id)
            written: list[Any] = []

            async def write() -> None:
                store._usage._applied_at = 0.0
                written.extend(await store.write([MemoryDraft(content="scone")], "create"))

            async with anyio.create_task_group() as group:
                group.start_soon(write)  # its apply locks `first`, then waits for `second`
                for _ in range(3_000):  # until the store's apply waits for `second`
                    if await other.fetchval(
                        "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
                        "AND pid <> pg_backend_pid() AND position($1 in query) > 0",
                        usage,
                    ):
                        break
                    await anyio.sleep(0.01)
                else:
                    pytest.fail("the store's apply never waited for the usage row")
                await other.execute(f"UPDATE {usage} SET usage_count = 7 WHERE id = $1", first.id)
            await transaction.commit()
        finally:
            await other.close()
        assert [item.content for item in written] == ["scone"]
        await store.flush()
        stored = {item.id: item for item in await store.get([first.id, second.id], [], "default")}
    assert stored[first.id].usage_count == 7 + 1
    assert stored[second.id].usage_count == 7 + 1


async def test_concurrent_first_calls_open_one_pool(postgres_space: PostgresSpace) -> None:
    import anyio

    from workers.memory.stores.postgres import PoolRecipe

    created: list[object] = []

    class CountingRecipe(PoolRecipe):
        async def create(self) -> Any:
            pool = await super().create()
            created.append(pool)
            return pool

    store = PostgresMemoryStore(CountingRecipe(postgres_space.url), schema=postgres_space.schema)
    try:
        async with anyio.create_task_group() as group:
            for _ in range(3):
                group.start_soon(store.get, ["x"], [], "default")
    finally:
        await store.aclose()
    assert len(created) == 1


async def test_a_connection_lost_during_commit_is_outcome_unknown_never_retryable(
    postgres_space: PostgresSpace, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_commit = asyncpg.transaction.Transaction.commit

    async def commit_after_losing_the_connection(transaction: Any) -> None:
        # Fault injection in the driver: the connection breaks as COMMIT goes out.
        transaction._connection.terminate()
        await real_commit(transaction)

    store = PostgresMemoryStore.from_url(postgres_space.url, schema=postgres_space.schema)
    try:
        async with create_ditto(workers=[create_memory_worker(store)]) as runtime:
            await runtime.invoke("MEMORY.QUERY", {})  # open the store before the fault
            monkeypatch.setattr(
                asyncpg.transaction.Transaction, "commit", commit_after_losing_the_connection
            )
            result = await runtime.invoke("MEMORY.WRITE", {"memories": [{"content": "x"}]})
    finally:
        monkeypatch.undo()
        await store.aclose()
    assert result.error is not None
    assert (result.error.code, result.error.retryable) == ("OUTCOME_UNKNOWN", False)


@pytest.mark.parametrize("wrong", ["role", "database"])
async def test_a_wrong_role_or_database_is_a_clean_non_retryable_error(
    postgres_space: PostgresSpace, wrong: str
) -> None:
    from urllib.parse import urlsplit

    parts = urlsplit(postgres_space.url)
    host = f"{parts.hostname}:{parts.port or 5432}"
    user, database = parts.username or "postgres", parts.path.lstrip("/")
    if wrong == "role":
        url = f"postgresql://no_such_role_{uuid4().hex[:8]}:pw@{host}/{database}"
    else:
        url = f"postgresql://{user}@{host}/no_such_db_{uuid4().hex[:8]}"
    store = PostgresMemoryStore.from_url(url)
    try:
        async with create_ditto(workers=[create_memory_worker(store)]) as runtime:
            result = await runtime.invoke("MEMORY.QUERY", {})
    finally:
        await store.aclose()
    assert result.error is not None
    assert (result.error.code, result.error.retryable) == ("STORE_UNAVAILABLE", False)
    assert "role" in result.error.message
    for part in ("no_such", "pw", host):
        assert part not in result.error.message
