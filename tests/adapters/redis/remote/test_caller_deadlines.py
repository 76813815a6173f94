"""Mass timeouts on the caller: every call that times out gets its ``timeout`` result and its
cancel notice, and the notices go out in batches (one ``MULTI``/``EXEC`` pipeline per batch),
not one round trip per call. Counted by Redis itself (``INFO commandstats`` of a private
server), never by timing."""

from __future__ import annotations

import asyncio
import math
from collections.abc import AsyncIterator
from typing import Any

import anyio
import pytest
import redis.asyncio as aioredis

from ditto import ErrorCode, create_ditto
from ditto.adapters.redis.cancels import CANCEL_BATCH
from ditto.adapters.redis.keys import cancel_channel, keyed_nodes_key, nodes_key
from ditto.adapters.redis.streams import RedisStreamsTransport
from ditto.runtime.transports.envelope import CancelNotice, Signer
from tests.adapters.redis.remote.processes import SECRET, PrivateRedis, eventually

pytestmark = [pytest.mark.anyio, pytest.mark.redis]

STUCK = "PROBE.STUCK"
PREFIX = "caller-deadlines:"
CALLS = 3 * CANCEL_BATCH + 17


@pytest.fixture
async def private(restartable_redis: PrivateRedis) -> AsyncIterator[aioredis.Redis]:
    """A client of a Redis server of this test alone, with a worker that is alive (its
    heartbeat never expires) and reads nothing: every call sent to it times out."""
    await restartable_redis.wait_ready()
    client = aioredis.Redis.from_url(restartable_redis.url)
    fingerprint = Signer(SECRET).fingerprint
    await client.zadd(nodes_key(PREFIX, STUCK), {"stuck": 2**50})
    await client.zadd(keyed_nodes_key(PREFIX, STUCK, fingerprint), {"stuck": 2**50})
    try:
        yield client
    finally:
        await client.aclose()


async def calls_of(client: aioredis.Redis, command: str) -> int:
    stats: dict[str, Any] = await client.info("commandstats")
    return int(stats.get(f"cmdstat_{command}", {}).get("calls", 0))


async def test_mass_timeouts_each_get_a_result_and_their_notices_go_out_in_batches(
    restartable_redis: PrivateRedis, private: aioredis.Redis
) -> None:
    heard: list[str] = []
    signer = Signer(SECRET)
    pubsub = private.pubsub(ignore_subscribe_messages=True)
    await pubsub.subscribe(cancel_channel(PREFIX))

    async def listen() -> None:
        async for message in pubsub.listen():
            notice: CancelNotice = signer.open(message["data"], CancelNotice)
            heard.append(notice.execution_id)

    transport = RedisStreamsTransport.from_url(
        restartable_redis.url, signer, prefix=PREFIX, max_pending=CALLS + 1
    )
    async with anyio.create_task_group() as group, create_ditto() as runtime:
        group.start_soon(listen)
        runtime.register_remote([STUCK], transport=transport)
        await runtime.invoke(STUCK, {"n": -1}, timeout=0.05)  # the script loaded, the link up
        await eventually(lambda: len(heard) == 1, message="the warm-up call's notice")
        await private.config_resetstat()
        # One deadline for every call, as for the tasks of one run: they all pass together.
        deadline = asyncio.get_running_loop().time() + 1.0
        results = await asyncio.gather(
            *(
                runtime.engine.invoke_nested(
                    STUCK,
                    {"n": n},
                    timeout=None,
                    principal=None,
                    worker=None,
                    execution=None,
                    outer_deadline=deadline,
                )
                for n in range(CALLS)
            )
        )
        assert {(r.status, r.error.code if r.error else None) for r in results} == {
            ("timeout", ErrorCode.TIMEOUT.value)
        }
        timed_out = {result.execution_id for result in results}
        assert len(timed_out) == CALLS
        await eventually(
            lambda: len(heard) >= CALLS + 1, message="a cancel notice for every timed-out call"
        )
        group.cancel_scope.cancel()
    await pubsub.aclose()  # type: ignore[no-untyped-call]
    assert sorted(heard[1:]) == sorted(timed_out)  # each notice once, none for another call
    assert await calls_of(private, "publish") == CALLS
    pipelines = await calls_of(private, "exec")
    assert 1 <= pipelines <= math.ceil(CALLS / CANCEL_BATCH)
