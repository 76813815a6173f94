"""Lease renewal that does not depend on the handler yielding: a handler that blocks its
worker's event loop for longer than ``claim_idle_ms`` keeps its calls (the renewal runs on a
thread), and the watchdog names it; a killed worker's calls are taken over well inside the
default node deadline."""

from __future__ import annotations

from collections import Counter
from typing import Any

import anyio
import pytest

from ditto import NodeResult
from ditto.adapters.redis.server import DEFAULT_CLAIM_IDLE_MS
from tests.adapters.redis.remote.processes import CLAIM_IDLE_MS, WORK, Cluster, eventually

pytestmark = [pytest.mark.anyio, pytest.mark.redis]


async def test_a_handler_blocking_the_loop_is_not_run_twice(cluster: Cluster) -> None:
    """Six calls, each blocking its worker's loop for three times ``claim_idle_ms``, on two live
    workers: six executions (it was twelve when renewal ran on the blocked loop)."""
    block = 3 * CLAIM_IDLE_MS / 1000
    await cluster.start_all(["w1", "w2"], concurrency=8)
    results: list[NodeResult[Any]] = []
    async with cluster.caller() as runtime:

        async def call(n: int) -> None:
            results.append(await runtime.invoke(WORK, {"n": n, "block": block}, timeout=60))

        async with anyio.create_task_group() as group:
            for n in range(6):
                group.start_soon(call, n)
    assert [result.status for result in results] == ["success"] * 6, results
    runs = Counter(run.execution_id for run in cluster.runs())
    assert runs == Counter({result.execution_id: 1 for result in results})
    assert {run.attempt for run in cluster.runs()} == {1}
    blamed = [
        line
        for worker in cluster.workers.values()
        for line in worker.output().splitlines()
        if "blocked" in line and "PROBE.WORK" in line
    ]
    assert blamed, "the watchdog named the blocking handler"


async def test_a_killed_workers_call_succeeds_under_default_deadlines(cluster: Cluster) -> None:
    """With the default claim_idle_ms and the default 30 s node deadline, a call whose worker is
    killed mid-run is taken over and answered (with the old 30 s it ended ``timeout``)."""
    assert DEFAULT_CLAIM_IDLE_MS == 5_000
    cluster.use_default_claim_idle()
    await cluster.start_all(["w1", "w2"], concurrency=1)
    results: list[NodeResult[Any]] = []
    async with cluster.caller() as runtime:

        async def call() -> None:
            results.append(await runtime.invoke(WORK, {"n": 1, "sleep": 2.0}))

        async with anyio.create_task_group() as group:
            group.start_soon(call)
            (first,) = await eventually(cluster.runs, message="the call started")
            await cluster.kill(first.worker)
    (result,) = results
    assert result.status == "success", result.error
    assert result.worker_id != first.worker
    assert [run.attempt for run in cluster.runs(result.execution_id)] == [1, 2]
