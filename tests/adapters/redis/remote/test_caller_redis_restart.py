"""Calls lost to a Redis restart: a Redis without persistence that restarts forgets every call
in flight, so the caller fails them at once — ``TRANSPORT_UNAVAILABLE``, retryable — instead of
waiting for their deadlines to report ``TIMEOUT``."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from ditto import ErrorCode, NodeResult
from tests.adapters.redis.remote.processes import WORK, Cluster, PrivateRedis, eventually

pytestmark = [pytest.mark.anyio, pytest.mark.redis]

TIMEOUT = 20.0
CALLS = 4


async def test_calls_in_flight_when_redis_restarts_come_back_unavailable_before_their_deadline(
    restartable_cluster: Cluster, restartable_redis: PrivateRedis
) -> None:
    cluster = restartable_cluster
    await cluster.start_all(["w1", "w2"], concurrency=4)
    results: list[NodeResult[Any]] = []
    async with cluster.caller() as runtime:

        async def call(n: int) -> None:
            results.append(await runtime.invoke(WORK, {"n": n, "sleep": 60}, timeout=TIMEOUT))

        async with anyio.create_task_group() as group:
            for n in range(CALLS):
                group.start_soon(call, n)
            await eventually(
                lambda: len(cluster.runs()) == CALLS, message="every call running on a worker"
            )
            await restartable_redis.kill()
            restartable_redis.start()
            await restartable_redis.wait_ready()

        assert len(results) == CALLS
        for result in results:
            assert result.status == "failed", result
            assert result.error is not None
            assert result.error.code == ErrorCode.TRANSPORT_UNAVAILABLE.value
            assert result.error.retryable is True
            assert result.duration_ms < TIMEOUT * 1000  # noticed, not waited out

        async def serves_again() -> bool:
            again = await runtime.invoke(WORK, {"n": 7}, timeout=2.0)
            return again.status == "success"

        await eventually(serves_again, within=15, message="a call succeeds after the restart")
