"""Graphs over several worker processes: the work is shared, and a worker killed mid-run loses
no node and runs none twice on live workers (at-least-once, redelivered with ``attempt`` + 1)."""

from __future__ import annotations

from collections import Counter, defaultdict
from functools import partial
from typing import Any

import anyio
import pytest

from ditto import Graph, RunResult, graph
from tests.adapters.redis.remote.processes import WORK, Cluster, Effect, eventually

pytestmark = [pytest.mark.anyio, pytest.mark.redis]

SLOW = 0.5


def _bind(n: int, sleep: float, run_input: object, deps: object) -> dict[str, Any]:
    return {"n": n, "sleep": sleep}


def fan_out(name: str, count: int, sleep: float, *, slow: float | None = None) -> Graph:
    """``count`` independent ``PROBE.WORK`` tasks; with ``slow``, every tenth one sleeps that
    long instead."""
    plan = graph(name)
    for n in range(count):
        took = slow if slow is not None and n % 10 == 0 else sleep
        plan = plan.node(f"t{n}", WORK, [], partial(_bind, n, took))
    return plan


def failures(run: RunResult) -> Counter[str]:
    return Counter(
        result.error.code if result.error else result.status
        for result in run.values()
        if result.status != "success"
    )


async def test_a_thousand_node_fan_out_is_shared_by_three_workers(cluster: Cluster) -> None:
    workers = {"w1", "w2", "w3"}
    await cluster.start_all(sorted(workers), concurrency=8)
    async with cluster.caller() as runtime:
        run = await runtime.run(fan_out("fan-out", 1000, 0.005))
    assert run.ok, failures(run)
    assert len(run) == 1000
    assert all(run[f"t{n}"].unwrap()["n"] == n for n in range(1000))
    shares = Counter(result.worker_id for result in run.values())
    assert set(shares) <= workers, shares
    assert all(shares[worker] >= 100 for worker in workers), shares
    runs = Counter(effect.execution_id for effect in cluster.runs())
    assert set(runs) == {result.execution_id for result in run.values()}
    assert set(runs.values()) == {1}  # no worker died: every node ran exactly once


async def test_a_worker_killed_mid_run_loses_no_node(cluster: Cluster) -> None:
    victim, live = "w2", {"w1", "w3"}
    await cluster.start_all(["w1", "w2", "w3"], concurrency=8)
    outcome: list[RunResult] = []

    def victim_busy() -> bool:
        """A hundred calls started, and the victim is inside a slow one: it cannot finish
        between this check and the kill."""
        effects = cluster.effects()
        done = {effect.execution_id for effect in effects if effect.event == "done"}
        started = [effect for effect in effects if effect.event == "run"]
        return len(started) >= 100 and any(
            effect.worker == victim and effect.sleep == SLOW and effect.execution_id not in done
            for effect in started
        )

    async with cluster.caller() as runtime:

        async def run_graph() -> None:
            outcome.append(await runtime.run(fan_out("survivor", 600, 0.02, slow=SLOW), timeout=60))

        async with anyio.create_task_group() as group:
            group.start_soon(run_graph)
            await eventually(victim_busy, within=30, message=f"{victim} is running calls")
            await cluster.kill(victim)
    (run,) = outcome
    assert run.ok, failures(run)
    assert len(run) == 600

    effects = cluster.effects()
    runs: dict[str, list[Effect]] = defaultdict(list)
    finished_on_victim: set[str] = set()
    for effect in effects:
        if effect.event == "run":
            runs[effect.execution_id].append(effect)
        elif effect.event == "done" and effect.worker == victim:
            finished_on_victim.add(effect.execution_id)
    assert set(runs) == {result.execution_id for result in run.values()}
    taken_over = 0
    for execution_id, attempts in runs.items():
        on_live = [effect for effect in attempts if effect.worker in live]
        assert len(on_live) <= 1, f"{execution_id} ran on live workers {on_live}"
        if len(attempts) > 1:
            first, *later = attempts
            assert first.worker == victim, attempts
            assert all(effect.attempt >= 2 and effect.worker in live for effect in later), attempts
        # Every attempt of a call sees the same idempotency key, and no other call has it: the
        # key by which a side effect happens once.
        assert len({effect.idempotency_key for effect in attempts}) == 1, attempts
        if attempts[0].worker == victim and execution_id not in finished_on_victim:
            # Started on the victim and never finished there: it must have been run again.
            assert len(attempts) == 2, attempts
            taken_over += 1
        elif attempts[0].attempt >= 2:
            # Taken by the victim but killed before its handler started.
            assert attempts[0].worker in live, attempts
    assert taken_over >= 1, "the victim was inside a slow call when it was killed"
    keys = {attempts[0].idempotency_key for attempts in runs.values()}
    assert None not in keys
    assert len(keys) == len(runs)
    for result in run.values():
        if result.execution_id in finished_on_victim:
            continue
        assert result.worker_id in live, result
