"""A remote pool at its ``concurrency`` (``runtime.remote.concurrency``) makes further calls
wait for a free slot, first come first served, within their deadlines — instead of failing them
at once with ``NO_WORKER_AVAILABLE`` while the workers behind it have room to queue."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import pytest

from ditto import Ditto, ErrorCode, NodeResult, create_ditto, graph
from tests.adapters.redis.remote.processes import MEASURE, WORK, Cluster, eventually

pytestmark = [pytest.mark.anyio, pytest.mark.redis]

NODES = 20


@asynccontextmanager
async def limited_caller(cluster: Cluster, concurrency: int) -> AsyncIterator[Ditto]:
    async with create_ditto() as runtime:
        runtime.register_remote(
            [WORK, MEASURE], transport=cluster.transport(), concurrency=concurrency
        )
        yield runtime


async def test_a_fan_out_wider_than_the_pool_waits_for_slots_and_succeeds(
    cluster: Cluster,
) -> None:
    await cluster.start_all(["w1", "w2"], concurrency=8)
    plan = graph("fan-out")
    for n in range(NODES):
        plan = plan.node(f"n{n}", WORK, [], lambda text, deps, n=n: {"n": n, "sleep": 0.2})
    async with limited_caller(cluster, concurrency=8) as runtime:
        run = await runtime.run(plan, "go", timeout=20.0)
    outcomes = {task: (result.status, result.error) for task, result in run.items()}
    assert all(status == "success" for status, _ in outcomes.values()), outcomes
    assert len(run) == NODES
    assert len({effect.execution_id for effect in cluster.runs()}) == NODES


async def test_a_call_waiting_for_a_slot_times_out_by_its_deadline_without_being_sent(
    cluster: Cluster,
) -> None:
    await cluster.start("w1", concurrency=4)
    results: dict[str, NodeResult[Any]] = {}
    async with limited_caller(cluster, concurrency=1) as runtime:

        async def call(name: str, sleep: float, timeout: float) -> None:
            results[name] = await runtime.invoke(WORK, {"sleep": sleep}, timeout=timeout)

        async with anyio.create_task_group() as group:
            group.start_soon(call, "holder", 3.0, 10.0)
            await eventually(lambda: len(cluster.runs()) == 1, message="the holder runs")
            group.start_soon(call, "waiter", 0.0, 0.5)
    assert results["holder"].status == "success", results["holder"].error
    waited = results["waiter"]
    assert waited.status == "timeout"
    assert waited.error is not None
    assert waited.error.code == ErrorCode.TIMEOUT.value
    assert waited.error.retryable is True
    assert [effect.execution_id for effect in cluster.runs()] == [results["holder"].execution_id]


async def test_the_readmes_fan_out_succeeds_with_every_default(cluster: Cluster) -> None:
    """The README's set-up as a user runs it: two ``ditto worker serve`` processes taking the
    concurrency their worker declares (3 each here), a caller with no limit of its own and the
    default deadline, a fan-out wider than the pool — every node succeeds, each run once."""
    for worker_id in ("w1", "w2"):
        cluster.spawn(worker_id, concurrency=None, worker="probe_worker:limited")
    for worker_id in ("w1", "w2"):
        await cluster.wait_serving(worker_id)
    plan = graph("fan-out")
    for n in range(NODES):
        plan = plan.node(f"n{n}", WORK, [], lambda text, deps, n=n: {"n": n, "sleep": 0.1})
    async with create_ditto() as runtime:
        runtime.register_remote([WORK, MEASURE], transport=cluster.transport())
        run = await runtime.run(plan, "go")
    assert [result.status for result in run.values()] == ["success"] * NODES
    assert len({effect.execution_id for effect in cluster.runs()}) == NODES
