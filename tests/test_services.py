"""The service fixtures give each test a private, working space and clean it up."""

from __future__ import annotations

import asyncio

import pytest

from tests.services import PostgresSpace, RedisSpace


@pytest.mark.redis
def test_redis_space_gives_a_private_prefix(redis_space: RedisSpace) -> None:
    import redis

    client = redis.Redis.from_url(redis_space.url)
    try:
        client.set(f"{redis_space.prefix}probe", b"1")
        assert client.get(f"{redis_space.prefix}probe") == b"1"
        assert redis_space.prefix.startswith("ditto-test:")
    finally:
        client.close()


@pytest.mark.postgres
def test_postgres_space_is_a_private_schema(postgres_space: PostgresSpace) -> None:
    import asyncpg

    async def probe() -> str | None:
        connection = await asyncpg.connect(postgres_space.url)
        try:
            await connection.execute(f'CREATE TABLE "{postgres_space.schema}".probe (x int)')
            return await connection.fetchval(
                "SELECT table_schema FROM information_schema.tables WHERE table_name = 'probe' "
                "AND table_schema = $1",
                postgres_space.schema,
            )
        finally:
            await connection.close()

    assert asyncio.run(probe()) == postgres_space.schema
