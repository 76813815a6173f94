"""Dead letters: a call that cannot be opened or names another node type, and one delivered more
than ``max_deliveries`` times, go to ``{prefix}dead`` with their reason — still sealed — and are
acknowledged; the caller of an exhausted call is answered ``DEAD_LETTERED``."""

from __future__ import annotations

import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import msgspec
import pytest
import redis.asyncio as aioredis

from ditto import ErrorCode, create_ditto, define_worker
from ditto.adapters.redis.dead_letters import read_dead_letters
from ditto.adapters.redis.keys import GROUP, calls_key, dead_key, replies_key
from ditto.adapters.redis.server import RemoteWorkerServer
from ditto.runtime.transports.envelope import CallEnvelope, ReplyEnvelope, Signer
from tests.adapters.redis.remote.processes import eventually
from tests.services import RedisSpace

pytestmark = [pytest.mark.anyio, pytest.mark.redis]

SECRET = b"dead-letter-tests-secret-0123456789"
NODE = "PROBE.ECHO"
OTHER = "PROBE.OTHER"
runs: list[str] = []


async def echo(request: dict[str, Any], ctx: Any) -> dict[str, Any]:
    runs.append(ctx.execution_id)
    return request


@asynccontextmanager
async def serving(
    space: RedisSpace, client: aioredis.Redis, **options: Any
) -> AsyncIterator[RemoteWorkerServer]:
    """An in-process worker serving ``PROBE.ECHO`` and ``PROBE.OTHER``."""
    runtime = create_ditto(workers=[define_worker("probe", {NODE: echo, OTHER: echo})])
    server = RemoteWorkerServer(
        runtime.engine.invoke_nested,
        [NODE, OTHER],
        client,
        Signer(SECRET),
        worker_id="w1",
        prefix=space.prefix,
        heartbeat_ms=100,
        **options,
    )
    async with runtime, anyio.create_task_group() as group:
        group.start_soon(server.serve)
        try:
            yield server
        finally:
            server.stop()


def envelope(space: RedisSpace, node_type: str = NODE, marker: str = "x") -> CallEnvelope:
    return CallEnvelope(
        uuid.uuid4().hex,
        node_type,
        msgspec.Raw(msgspec.msgpack.encode({"text": marker})),
        time.time() + 30,
        "principal-of-the-call",
        None,
        1,
        replies_key(space.prefix, "caller"),
    )


@pytest.fixture
async def client(redis_space: RedisSpace) -> AsyncIterator[aioredis.Redis]:
    made = aioredis.Redis.from_url(redis_space.url)
    runs.clear()
    try:
        yield made
    finally:
        await made.aclose()


async def test_unopenable_and_misrouted_calls_are_dead_lettered_sealed(
    redis_space: RedisSpace, client: aioredis.Redis
) -> None:
    stream = calls_key(redis_space.prefix, NODE)
    forged = Signer(b"another-secret-0123456789abcdef").seal(envelope(redis_space))
    misrouted_call = envelope(redis_space, OTHER, marker="secret-marker")
    misrouted = Signer(SECRET).seal(misrouted_call)
    async with serving(redis_space, client):
        for sealed in (forged, b"garbage", misrouted):
            await client.xadd(stream, {"e": sealed})

        async def buried() -> bool:
            return int(await client.xlen(dead_key(redis_space.prefix))) == 3

        await eventually(buried, message="three dead letters")
        await eventually(lambda: _empty(client, stream), message="the calls were acknowledged")
    letters, total = await read_dead_letters(client, redis_space.prefix)
    assert total == 3
    by_reason = sorted((letter.reason, letter.sealed_bytes) for letter in letters)
    assert by_reason == sorted(
        [("rejected", len(forged)), ("rejected", len(b"garbage")), ("misrouted", len(misrouted))]
    )
    assert all(letter.worker == "w1" and letter.stream == stream for letter in letters)
    assert all(letter.execution_id is None for letter in letters)  # never trusted
    raw: Any = await client.xrange(dead_key(redis_space.prefix))
    stored = {fields[b"e"] for _, fields in raw}
    assert stored == {forged, b"garbage", misrouted}
    for _, fields in raw:
        for value in fields.values():
            assert b"secret-marker" not in value
            assert b"principal-of-the-call" not in value
    assert runs == []


async def _empty(client: aioredis.Redis, stream: str) -> bool:
    return int(await client.xlen(stream)) == 0


async def test_a_call_delivered_too_often_is_dead_lettered_and_answered(
    redis_space: RedisSpace, client: aioredis.Redis
) -> None:
    """A holder that died with the call (a ghost consumer read it and never answered): the
    takeover is its second delivery, over ``max_deliveries=1``."""
    call = envelope(redis_space)
    stream = calls_key(redis_space.prefix, NODE)
    await client.xadd(call.reply_to, {"open": "1"}, maxlen=0)  # the caller's reply stream
    await client.xgroup_create(stream, GROUP, id="0", mkstream=True)
    await client.xadd(stream, {"e": Signer(SECRET).seal(call)})
    taken: Any = await client.xreadgroup(GROUP, "ghost", {stream: ">"}, count=1)
    assert taken
    async with serving(redis_space, client, max_deliveries=1, claim_idle_ms=200):
        answer: Any = await client.xread({call.reply_to: "0-0"}, count=1, block=10_000)
        assert answer, "no reply within 10 s"
        await eventually(lambda: _empty(client, stream), message="the call was acknowledged")
    reply = Signer(SECRET).open(answer[0][1][0][1][b"e"], ReplyEnvelope)
    assert reply.execution_id == call.execution_id
    assert reply.status == "failed"
    assert reply.error is not None
    assert reply.error.code == ErrorCode.DEAD_LETTERED
    (letter,), _ = await read_dead_letters(client, redis_space.prefix)
    assert (letter.reason, letter.node_type, letter.execution_id) == (
        "exhausted",
        NODE,
        call.execution_id,
    )
    assert letter.deliveries == 2
    assert letter.deadline == call.deadline
    assert runs == []
