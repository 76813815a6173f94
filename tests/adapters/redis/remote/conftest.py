"""Fixtures of the remote-worker tests: a cluster of worker processes on the test's own Redis key
prefix (or on a private Redis server the test may restart), every process ended afterwards."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import redis.asyncio as aioredis

from tests.adapters.redis.remote.processes import Cluster, PrivateRedis, private_redis
from tests.services import RedisSpace


@pytest.fixture
async def cluster(
    anyio_backend: str, tmp_path: Path, redis_space: RedisSpace
) -> AsyncIterator[Cluster]:
    """Worker processes on the test's key prefix; ended before the prefix is deleted."""
    client = aioredis.Redis.from_url(redis_space.url)
    workers = Cluster(tmp_path, redis_space.url, redis_space.prefix, client)
    try:
        yield workers
    finally:
        workers.close()
        await client.aclose()


@pytest.fixture
def restartable_redis(tmp_path: Path) -> Iterator[PrivateRedis]:
    """A redis-server of this test alone, started; killed at the end whatever its state."""
    directory = tmp_path / "redis"
    directory.mkdir()
    with private_redis(directory) as server:
        server.start()
        yield server


@pytest.fixture
async def restartable_cluster(
    anyio_backend: str, tmp_path: Path, restartable_redis: PrivateRedis
) -> AsyncIterator[Cluster]:
    """Worker processes on :func:`restartable_redis`."""
    await restartable_redis.wait_ready()
    client = aioredis.Redis.from_url(restartable_redis.url)
    workers = Cluster(tmp_path, restartable_redis.url, f"ditto-test:{uuid.uuid4().hex}:", client)
    try:
        yield workers
    finally:
        workers.close()
        await client.aclose()
