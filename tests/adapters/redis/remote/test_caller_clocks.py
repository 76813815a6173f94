"""Clock skew seen from the caller: a live worker whose heartbeat says its clock runs 10 s ahead
is reported once (WARNING), and the calls sent to it carry their deadline on its clock, so it
does not answer them ``timeout`` at once. The worker is a heartbeat written as a worker writes
it (its description with ``clock_offset``); the test reads the sealed call from the stream as
that worker would."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import AsyncIterator

import anyio
import pytest
import redis.asyncio as aioredis

from ditto import create_ditto
from ditto.adapters.redis.keys import calls_key, keyed_nodes_key, nodes_key, worker_key
from ditto.adapters.redis.streams import RedisStreamsTransport
from ditto.runtime.transports.envelope import CallEnvelope, Signer
from tests.adapters.redis.remote.processes import SECRET, eventually
from tests.services import RedisSpace

pytestmark = [pytest.mark.anyio, pytest.mark.redis]

NODE = "PROBE.SKEWED"
AHEAD = 10.0
BUDGET = 3.0


@pytest.fixture
async def client(anyio_backend: str, redis_space: RedisSpace) -> AsyncIterator[aioredis.Redis]:
    made = aioredis.Redis.from_url(redis_space.url)
    try:
        yield made
    finally:
        await made.aclose()


async def announce_fast_worker(client: aioredis.Redis, prefix: str) -> None:
    """A live worker (reading nothing) whose heartbeat reports its clock 10 s ahead of Redis's."""
    fingerprint = Signer(SECRET).fingerprint
    await client.zadd(nodes_key(prefix, NODE), {"fast": 2**50})
    await client.zadd(keyed_nodes_key(prefix, NODE, fingerprint), {"fast": 2**50})
    description = {"id": "fast", "clock": time.time() + AHEAD, "clock_offset": AHEAD}
    await client.set(worker_key(prefix, "fast"), json.dumps(description))


async def test_a_worker_clock_ahead_is_reported_once_and_gets_the_budget_on_its_clock(
    client: aioredis.Redis, redis_space: RedisSpace, caplog: pytest.LogCaptureFixture
) -> None:
    prefix = redis_space.prefix
    await announce_fast_worker(client, prefix)
    signer = Signer(SECRET)
    transport = RedisStreamsTransport.from_url(redis_space.url, signer, prefix=prefix)
    caplog.set_level(logging.WARNING, logger="ditto.remote")

    def reported() -> list[str]:
        return [r.getMessage() for r in caplog.records if "clock" in r.getMessage()]

    async with create_ditto() as runtime:
        runtime.register_remote([NODE], transport=transport)
        await runtime.invoke(NODE, {"n": 0}, timeout=0.2)  # the caller starts watching
        await eventually(reported, message="the skew reported")

        async def call() -> None:
            await runtime.invoke(NODE, {"n": 1}, timeout=BUDGET)

        async def both_sent() -> list[tuple[bytes, dict[bytes, bytes]]] | None:
            entries = await client.xrange(calls_key(prefix, NODE))
            return entries if len(entries) == 2 else None

        async with anyio.create_task_group() as group:
            group.start_soon(call)
            entries = await eventually(both_sent, message="the call sent")
            envelopes = [signer.open(fields[b"e"], CallEnvelope) for _, fields in entries]
            group.cancel_scope.cancel()
    assert len(reported()) == 1, reported()
    assert "fast" in reported()[0]
    assert "ahead" in reported()[0]
    sent = max(envelopes, key=lambda envelope: envelope.deadline)
    # What the fast worker's clock says is left: most of the budget, not a deadline 7 s past.
    left_on_its_clock = sent.deadline - (time.time() + AHEAD)
    assert left_on_its_clock > BUDGET / 2
