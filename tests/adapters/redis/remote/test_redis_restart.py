"""Redis restarted under a run: the calls in flight end by their deadlines with an explicit
status, and the same runtime and worker processes serve new calls once Redis is back."""

from __future__ import annotations

import time
from typing import Any

import anyio
import pytest

from ditto import ErrorCode, NodeResult
from tests.adapters.redis.remote.processes import WORK, Cluster, PrivateRedis, eventually

pytestmark = [pytest.mark.anyio, pytest.mark.redis]

TIMEOUT = 3.0
SLACK = 1.5
"""How long after its deadline a call may take to return (scheduling on a busy machine)."""
GAVE_UP = {("timeout", ErrorCode.TIMEOUT.value), ("failed", ErrorCode.TRANSPORT_UNAVAILABLE.value)}


def ending(result: NodeResult[Any]) -> tuple[str, str | None]:
    return result.status, None if result.error is None else result.error.code


async def test_a_redis_restart_ends_calls_in_flight_and_then_heals(
    restartable_cluster: Cluster, restartable_redis: PrivateRedis
) -> None:
    cluster = restartable_cluster
    await cluster.start_all(["w1", "w2"], concurrency=4)
    ended: list[tuple[NodeResult[Any], float]] = []
    async with cluster.caller() as runtime:

        async def call(n: int) -> NodeResult[Any]:
            started = time.monotonic()
            result = await runtime.invoke(WORK, {"n": n, "sleep": 10}, timeout=TIMEOUT)
            ended.append((result, time.monotonic() - started))
            return result

        async with anyio.create_task_group() as group:
            for n in range(4):
                group.start_soon(call, n)

            def all_started() -> bool:
                return len(cluster.runs()) == 4

            await eventually(all_started, message="four calls running on the workers")
            await restartable_redis.kill()
            down = await call(99)  # sent while Redis is down: refused at once, not queued
            assert ending(down) == ("failed", ErrorCode.TRANSPORT_UNAVAILABLE.value)
            assert down.error is not None
            assert down.error.retryable is True
            restartable_redis.start()
            await restartable_redis.wait_ready()

        assert len(ended) == 5
        for result, elapsed in ended:
            assert ending(result) in GAVE_UP, result
            assert elapsed < TIMEOUT + SLACK, f"{ending(result)} after {elapsed:.1f} s"

        async def serves_again() -> bool:
            result = await runtime.invoke(WORK, {"n": 7}, timeout=1.0)
            return result.status == "success"

        await eventually(serves_again, within=15, message="a call succeeds after the restart")
        result = await runtime.invoke(WORK, {"n": 8}, timeout=5.0)
    assert result.status == "success", result.error
    assert result.worker_id in {"w1", "w2"}
    for worker in cluster.workers.values():
        assert worker.process.poll() is None, worker.output()
