"""Heartbeats carry the worker's clock: its Unix time (``clock``) and its offset from the Redis
server's ``TIME`` (``clock_offset``), beside the fingerprints of every secret it opens; a worker
whose clock is more than 2 s off warns once (and once more when it is back)."""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Callable
from typing import Any

import pytest
import redis.asyncio as aioredis

from ditto.adapters.redis.keys import keyed_nodes_key, worker_key
from ditto.adapters.redis.presence import Presence
from tests.adapters.redis.remote.processes import eventually
from tests.services import RedisSpace

pytestmark = [pytest.mark.anyio, pytest.mark.redis]

NODE = "PROBE.WORK"


async def beating(space: RedisSpace, clock: Callable[[], float], beats: int = 2) -> dict[str, Any]:
    """Run a presence until it has beaten ``beats`` times; its last description."""
    client = aioredis.Redis.from_url(space.url)
    presence = Presence(client, space.prefix, "w-clock", [NODE], 50, ("aaaa", "bbbb"), clock=clock)
    stopping = asyncio.Event()
    count = 0

    def describe() -> dict[str, Any]:
        nonlocal count
        count += 1
        return {"node_types": [NODE]}

    task = asyncio.create_task(presence.beat(describe, stopping))
    try:
        await eventually(lambda: count > beats, message="the presence beat")
        raw = await client.get(worker_key(space.prefix, "w-clock"))
        assert raw is not None
        for fingerprint in ("aaaa", "bbbb"):
            key = keyed_nodes_key(space.prefix, NODE, fingerprint)
            assert await client.zscore(key, "w-clock") is not None
        description: dict[str, Any] = json.loads(raw)
        return description
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await client.aclose()


async def test_a_heartbeat_carries_the_workers_clock_and_fingerprints(
    redis_space: RedisSpace, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="ditto.remote"):
        description = await beating(redis_space, time.time)
    assert abs(description["clock"] - time.time()) < 60
    assert isinstance(description["clock_offset"], float)
    assert abs(description["clock_offset"]) < 2.0
    assert description["fingerprints"] == ["aaaa", "bbbb"]
    assert not [record for record in caplog.records if "clock" in record.getMessage()]


async def test_a_clock_ten_seconds_ahead_is_reported(
    redis_space: RedisSpace, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="ditto.remote"):
        description = await beating(redis_space, lambda: time.time() + 10, beats=4)
    assert 8 < description["clock_offset"] < 12
    assert description["clock"] > time.time() + 8
    warnings = [record for record in caplog.records if "clock" in record.getMessage()]
    assert len(warnings) == 1, warnings  # once, not on every beat
    assert warnings[0].levelno == logging.WARNING
    assert "ahead of" in warnings[0].getMessage()
