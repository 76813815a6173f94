"""Private envelopes across processes: nothing a call leaves in Redis shows its input, its
principal or its reply stream; secrets rotate without downtime (current + previous on either
side), and a worker with a third secret is refused at once."""

from __future__ import annotations

import uuid
from typing import Any

import anyio
import pytest
import redis.asyncio as aioredis

from ditto import ErrorCode, NodeResult, create_ditto
from ditto.adapters.redis.keys import cancel_channel
from ditto.adapters.redis.streams import RedisStreamsTransport
from ditto.runtime.transports.envelope import CancelNotice, Signer
from tests.adapters.redis.remote.processes import SECRET, WORK, Cluster, eventually

pytestmark = [pytest.mark.anyio, pytest.mark.redis]

OLD = b"rotation-old-secret-0123456789abcdef"
NEW = b"rotation-new-secret-0123456789abcdef"
THIRD = b"rotation-third-secret-0123456789abcd"


async def every_value(client: aioredis.Redis, prefix: str) -> list[bytes]:
    """Every key name and every value stored under ``prefix``, whatever its type."""
    found: list[bytes] = []
    async for key in client.scan_iter(match=f"{prefix}*"):
        found.append(key)
        kind = (await client.type(key)).decode()
        if kind == "string":
            found.append(await client.get(key) or b"")
        elif kind == "stream":
            for entry_id, fields in await client.xrange(key):
                found.append(entry_id)
                for name, value in fields.items():
                    found.extend((name, value))
        elif kind == "zset":
            found.extend(member for member, _ in await client.zrange(key, 0, -1, withscores=True))
        elif kind == "hash":
            for name, value in (await client.hgetall(key)).items():
                found.extend((name, value))
        elif kind == "list":
            found.extend(await client.lrange(key, 0, -1))
        elif kind == "set":
            found.extend(await client.smembers(key))
    return found


async def test_redis_holds_no_input_principal_or_reply_stream_in_clear(cluster: Cluster) -> None:
    await cluster.start("w1")
    marker = f"input-marker-{uuid.uuid4().hex}"
    principal = f"principal-marker-{uuid.uuid4().hex}"
    seen: list[bytes] = []
    results: list[NodeResult[Any]] = []
    transport = cluster.transport()
    async with create_ditto() as runtime:
        runtime.register_remote([WORK], transport=transport)

        async def call() -> None:
            request = {"n": 1, "sleep": 0.8, "fail": marker}
            results.append(await runtime.invoke(WORK, request, principal=principal, timeout=20))

        async with anyio.create_task_group() as group:
            group.start_soon(call)
            await eventually(cluster.runs, message="the call is running")
            seen.extend(await every_value(cluster.client, cluster.prefix))
        seen.extend(await every_value(cluster.client, cluster.prefix))
    (result,) = results
    assert result.status == "success", result.error
    (run,) = cluster.runs(result.execution_id)
    assert run.principal == principal  # it did travel, sealed
    calls = [value for value in seen if len(value) > 40]
    assert calls, "the sealed call was in its stream while it ran"
    reply_stream = transport.reply_to.encode()
    for value in seen:
        assert marker.encode() not in value
        assert principal.encode() not in value
        if value != reply_stream:  # the stream's own key name is no secret
            assert reply_stream not in value


def secrets(current: bytes, previous: bytes | None = None) -> dict[str, str | None]:
    return {
        "DITTO_REMOTE_SECRET": current.decode(),
        "DITTO_REMOTE_SECRET_PREVIOUS": None if previous is None else previous.decode(),
    }


async def call_with(cluster: Cluster, signer: Signer, n: int) -> NodeResult[Any]:
    transport = RedisStreamsTransport.from_url(cluster.url, signer, prefix=cluster.prefix)
    async with create_ditto() as runtime:
        runtime.register_remote([WORK], transport=transport)
        return await runtime.invoke(WORK, {"n": n}, timeout=10)


@pytest.mark.parametrize(
    ("caller", "worker"),
    [
        ((NEW, None), (NEW, OLD)),  # workers rotated first, callers follow
        ((OLD, None), (NEW, OLD)),  # a caller not yet rotated, workers already on the new one
        ((NEW, OLD), (NEW, None)),  # the rotation done on workers, a caller still holding OLD
        ((NEW, OLD), (OLD, NEW)),  # either side holds the other's current one as previous
    ],
    ids=["new-to-both", "old-to-both", "both-to-new", "crossed"],
)
async def test_a_rotation_in_progress_keeps_serving(
    cluster: Cluster, caller: tuple[bytes, bytes | None], worker: tuple[bytes, bytes | None]
) -> None:
    cluster.spawn("w1", overrides=secrets(*worker))
    await cluster.wait_serving("w1")
    signer = Signer(caller[0], previous=caller[1])
    result = await call_with(cluster, signer, 4)
    assert result.status == "success", result.error
    assert result.output == {"n": 4, "worker": "w1", "attempt": 1}


async def test_a_worker_with_a_third_secret_is_refused_at_once(cluster: Cluster) -> None:
    cluster.spawn("w1", overrides=secrets(THIRD, OLD))
    await cluster.wait_serving("w1")
    result = await call_with(cluster, Signer(NEW, previous=SECRET), 1)
    assert result.status == "failed"
    assert result.error is not None
    assert result.error.code == ErrorCode.REMOTE_KEY_MISMATCH
    assert cluster.runs() == []


async def test_an_unsealed_cancel_notice_cancels_nothing(cluster: Cluster) -> None:
    """Anyone who can publish on Redis could cancel any call by its id; only a notice sealed
    under the shared secret does."""
    await cluster.start("w1")
    results: list[NodeResult[Any]] = []
    async with cluster.caller() as runtime:

        async def call() -> None:
            results.append(await runtime.invoke(WORK, {"n": 2, "sleep": 1.0}, timeout=20))

        async with anyio.create_task_group() as group:
            group.start_soon(call)
            (started,) = await eventually(cluster.runs, message="the call is running")
            channel = cancel_channel(cluster.prefix)
            await cluster.client.publish(channel, started.execution_id)
            forged = Signer(THIRD).seal(CancelNotice(started.execution_id))
            await cluster.client.publish(channel, forged)
    (result,) = results
    assert result.status == "success", result.error
    assert [effect.event for effect in cluster.effects()] == ["run", "done"]
