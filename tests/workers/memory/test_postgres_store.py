"""What only the PostgreSQL store promises: safe failures and no half-written batch."""

from __future__ import annotations

from typing import Any

import pytest

from ditto import create_ditto
from tests.services import PostgresSpace
from workers.memory import MemoryDraft, MemoryFilter, OrderBy, create_memory_worker

pytestmark = [pytest.mark.anyio, pytest.mark.postgres]

asyncpg = pytest.importorskip("asyncpg", reason="PostgreSQL tests need asyncpg")

from workers.memory.stores.postgres import PostgresMemoryStore  # noqa: E402


async def count(space: PostgresSpace) -> int:
    async with PostgresMemoryStore.from_url(space.url, schema=space.schema) as store:
        return len(await store.query(MemoryFilter(), OrderBy(), 10_000, None))


async def test_a_connection_killed_inside_a_batch_leaves_nothing_half_written(
    postgres_space: PostgresSpace,
) -> None:
    class DyingStore(PostgresMemoryStore):
        async def _insert(self, connection: Any, rows: list[tuple[Any, ...]]) -> None:
            await super()._insert(connection, rows)  # the rows are in, the batch not committed
            await connection.execute("SELECT pg_terminate_backend(pg_backend_pid())")

    async with PostgresMemoryStore.from_url(postgres_space.url, schema=postgres_space.schema) as s:
        await s.write([MemoryDraft(content="before")], "create")
    store = DyingStore.from_url(postgres_space.url, schema=postgres_space.schema)
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
            from workers.memory.stores.postgres import _translated

            return _translated()

    store = SlowStore.from_url(
        postgres_space.url, schema=postgres_space.schema, statement_timeout_ms=50
    )
    try:
        async with create_ditto(workers=[create_memory_worker(store)]) as runtime:
            await runtime.invoke("MEMORY.WRITE", {"memories": [{"content": "espresso"}]})
            result = await runtime.invoke("MEMORY.SEARCH", {"query": "espresso"})
            after = await runtime.invoke("MEMORY.QUERY", {})
    finally:
        await store.aclose()
    assert result.error is not None
    assert result.error.code == "STORE_TIMEOUT"
    assert after.ok  # the pool recovered: the next call works


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
    with pytest.raises(Exception, match="Upgrade Ditto"):
        await store.open()
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
    with pytest.raises(Exception, match="schema must match"):
        PostgresMemoryStore.from_url("postgresql://x@localhost/db", schema='x"; DROP TABLE y; --')
