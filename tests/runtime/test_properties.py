"""Property tests: any DAG runs every task exactly once, after all of its dependencies."""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ditto import NodeContext, create_ditto, define_worker, graph


@st.composite
def dags(draw: st.DrawFn) -> tuple[int, list[list[int]], int | None]:
    size = draw(st.integers(min_value=1, max_value=200))
    deps = [
        sorted(draw(st.sets(st.integers(min_value=0, max_value=n - 1), max_size=min(n, 6))))
        if n
        else []
        for n in range(size)
    ]
    concurrency = draw(st.one_of(st.none(), st.integers(min_value=1, max_value=16)))
    return size, deps, concurrency


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(dag=dags(), delays=st.lists(st.sampled_from([0, 0, 0.0005]), min_size=200, max_size=200))
def test_random_dags_run_each_task_once_after_its_dependencies(
    dag: tuple[int, list[list[int]], int | None], delays: list[float]
) -> None:
    size, deps, concurrency = dag
    order: list[str] = []
    in_flight = 0
    peak = 0

    async def step(request: Any, ctx: NodeContext) -> str:
        nonlocal in_flight, peak
        in_flight += 1
        peak = max(peak, in_flight)
        delay = delays[int(ctx.execution.task_id[1:])]  # type: ignore[union-attr]
        await (anyio.sleep(delay) if delay else anyio.lowlevel.checkpoint())
        in_flight -= 1
        order.append(ctx.execution.task_id)  # type: ignore[union-attr]
        return ctx.execution.task_id  # type: ignore[union-attr]

    plan = graph("random")
    for n in range(size):
        plan = plan.node(f"t{n}", "STEP.RUN", [f"t{d}" for d in deps[n]], lambda i, d: {})

    async def main() -> Any:
        async with create_ditto(workers=[define_worker("step", {"STEP.RUN": step})]) as runtime:
            return await runtime.run(plan, concurrency=concurrency)

    result = anyio.run(main)

    assert list(result) == [f"t{n}" for n in range(size)]
    assert result.ok
    assert sorted(order) == sorted(result)  # each task ran exactly once
    finished_at = {task: position for position, task in enumerate(order)}
    for n in range(size):
        for d in deps[n]:
            assert finished_at[f"t{d}"] < finished_at[f"t{n}"]
    if concurrency is not None:
        assert peak <= concurrency


@pytest.mark.anyio
async def test_a_long_chain_does_not_grow_the_stack() -> None:
    async def step(request: Any, ctx: NodeContext) -> None:
        return None

    plan = graph("chain").node("t0", "STEP.RUN", [], lambda i, d: {})
    for n in range(1, 3000):
        plan = plan.node(f"t{n}", "STEP.RUN", [f"t{n - 1}"], lambda i, d: {})
    async with create_ditto(workers=[define_worker("step", {"STEP.RUN": step})]) as runtime:
        result = await runtime.run(plan)
    assert result.ok
    assert len(result) == 3000
