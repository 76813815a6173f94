"""Replayed envelopes: a captured call added to its stream again is acknowledged and dropped,
never executed a second time; a call taken over from a worker that was killed still runs."""

from __future__ import annotations

import json
from typing import Any

import anyio
import pytest

from ditto import NodeResult
from ditto.adapters.redis.keys import calls_key, seen_key, worker_key
from tests.adapters.redis.remote.processes import WORK, Cluster, eventually

pytestmark = [pytest.mark.anyio, pytest.mark.redis]


async def capture(cluster: Cluster) -> bytes:
    """The sealed bytes of the one call in the ``PROBE.WORK`` stream."""

    async def entries() -> Any:
        return await cluster.client.xrange(calls_key(cluster.prefix, WORK))

    ((_, fields),) = await eventually(entries, message="the call is in its stream")
    return bytes(fields[b"e"])


async def test_a_captured_envelope_added_five_more_times_runs_once(cluster: Cluster) -> None:
    worker = await cluster.start("w1")
    stream = calls_key(cluster.prefix, WORK)
    results: list[NodeResult[Any]] = []
    async with cluster.caller() as runtime:

        async def call() -> None:
            results.append(await runtime.invoke(WORK, {"n": 7, "sleep": 0.5}, timeout=20))

        async with anyio.create_task_group() as group:
            group.start_soon(call)
            sealed = await capture(cluster)
            await eventually(cluster.runs, message="the call started")
            for _ in range(2):  # while the original runs
                await cluster.client.xadd(stream, {"e": sealed})
        (result,) = results
        assert result.status == "success", result.error
        for _ in range(3):  # and after it was answered
            await cluster.client.xadd(stream, {"e": sealed})

        async def drained() -> bool:
            return await cluster.pending(WORK) == 0

        await eventually(drained, message="every replay was acknowledged and deleted")
    assert [run.execution_id for run in cluster.runs()] == [result.execution_id]
    assert await cluster.client.exists(seen_key(cluster.prefix, result.execution_id)) == 1

    async def counted() -> Any:
        raw = await cluster.client.get(worker_key(cluster.prefix, "w1"))
        return raw is not None and json.loads(raw)["replays_dropped"] == 5

    await eventually(counted, message="the worker counts 5 dropped replays")
    warnings = [line for line in worker.output().splitlines() if "replayed call" in line]
    assert len(warnings) == 1, worker.output()
    assert "WARNING" in warnings[0]


async def test_a_call_taken_over_from_a_killed_worker_still_runs(cluster: Cluster) -> None:
    """The one documented second run of an execution id: the same entry, taken over from a
    holder that died. A replay of it is still refused."""
    await cluster.start("w1")
    results: list[NodeResult[Any]] = []
    async with cluster.caller() as runtime:

        async def call() -> None:
            results.append(await runtime.invoke(WORK, {"n": 3, "sleep": 1.0}, timeout=20))

        async with anyio.create_task_group() as group:
            group.start_soon(call)
            sealed = await capture(cluster)
            (first,) = await eventually(cluster.runs, message="the call started on w1")
            await cluster.kill("w1")
            await cluster.start("w2")
        await cluster.client.xadd(calls_key(cluster.prefix, WORK), {"e": sealed})

        async def drained() -> bool:
            return await cluster.pending(WORK) == 0

        await eventually(drained, message="the replay was acknowledged and deleted")
    (result,) = results
    assert result.status == "success", result.error
    assert result.worker_id == "w2"
    runs = cluster.runs(result.execution_id)
    assert [(run.worker, run.attempt) for run in runs] == [("w1", 1), ("w2", 2)]
    assert first.execution_id == result.execution_id
