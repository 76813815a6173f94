"""``runtime.run``: binders, concurrency, fail-fast drain, timeouts and cancellation of graphs."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import anyio
import pytest

from ditto import (
    ErrorCode,
    GraphRunError,
    InvalidInputError,
    NodeResult,
    Settings,
    UnknownNodeError,
    UnknownWorkerError,
    create_ditto,
    graph,
)
from ditto.app.config.settings import RuntimeSettings
from tests.runtime.probes import Probe, work

pytestmark = pytest.mark.anyio


def fan_out(width: int, delay: float = 0.01) -> Any:
    plan = graph("fan")
    for n in range(width):
        plan = plan.node(f"t{n}", "PROBE.WORK", [], lambda _, deps, n=n: work(f"t{n}", delay=delay))
    return plan


async def test_binder_gets_the_run_input_and_only_its_declared_deps() -> None:
    probe = Probe()
    seen: dict[str, Any] = {}

    def bind_c(run_input: str, deps: Mapping[str, NodeResult[Any]]) -> dict[str, Any]:
        seen["input"] = run_input
        seen["deps"] = dict(deps)
        with pytest.raises(TypeError):
            deps["x"] = deps["a"]  # type: ignore[index]  # read-only
        return work("c")

    plan = (
        graph("g")
        .node("a", "PROBE.WORK", [], lambda i, d: work("a"))
        .node("b", "PROBE.WORK", [], lambda i, d: work("b"))
        .node("c", "PROBE.WORK", ["a"], bind_c)
    )
    async with create_ditto(workers=[probe.worker()]) as runtime:
        result = await runtime.run(plan, "the input")
    assert result.ok
    assert seen["input"] == "the input"
    assert list(seen["deps"]) == ["a"]
    assert seen["deps"]["a"] is result["a"]


async def test_a_failed_node_is_a_result_and_its_dependent_binder_decides() -> None:
    probe = Probe()

    def fallback(run_input: Any, deps: Mapping[str, NodeResult[Any]]) -> dict[str, Any]:
        first = deps["first"]
        return work("used-output" if first.ok else f"fallback-after-{first.error.code}")  # type: ignore[union-attr]

    plan = (
        graph("g")
        .node("first", "PROBE.WORK", [], lambda i, d: work("first", fail_with="NOT_FOUND"))
        .node("second", "PROBE.WORK", ["first"], fallback)
    )
    async with create_ditto(workers=[probe.worker()]) as runtime:
        result = await runtime.run(plan)
    assert not result.ok
    assert result["first"].status == "failed"
    assert result["second"].unwrap().name == "fallback-after-NOT_FOUND"
    assert set(result.failed) == {"first"}


async def test_an_invalid_bound_input_fails_that_node_only() -> None:
    probe = Probe()
    plan = graph("g").node("bad", "PROBE.WORK", [], lambda i, d: {"name": 42})
    async with create_ditto(workers=[probe.worker()]) as runtime:
        result = await runtime.run(plan)
    assert result["bad"].error is not None
    assert result["bad"].error.code == ErrorCode.INVALID_INPUT
    assert probe.calls == []


async def test_each_task_sees_its_execution_scope() -> None:
    probe = Probe()
    plan = graph("scoped").node("a", "PROBE.WORK", [], lambda i, d: work("a"))
    async with create_ditto(workers=[probe.worker()]) as runtime:
        first = await runtime.run(plan, principal="carol")
        second = await runtime.run(plan)
    scope = probe.contexts[0].execution
    assert scope is not None
    assert (scope.graph_id, scope.run_id, scope.task_id) == ("scoped", first.run_id, "a")
    assert probe.contexts[0].principal == "carol"
    assert first.run_id != second.run_id


@pytest.mark.parametrize(
    ("option", "configured", "expected_peak"),
    [
        (2, None, 2),
        (None, 3, 3),
        (1, 3, 1),  # the call option wins over config
        (None, None, 8),  # unlimited
    ],
)
async def test_concurrency_limit_is_honoured(
    option: int | None, configured: int | None, expected_peak: int
) -> None:
    probe = Probe()
    settings = Settings(runtime=RuntimeSettings(graph_concurrency=configured))
    async with create_ditto(config=settings, workers=[probe.worker()]) as runtime:
        result = await runtime.run(fan_out(8), concurrency=option)
    assert result.ok
    assert probe.peak == expected_peak
    assert sorted(probe.calls) == sorted(f"t{n}" for n in range(8))


@pytest.mark.parametrize("concurrency", [0, -1, 1.5, True, float("nan"), "2"])
async def test_invalid_concurrency_is_rejected_before_any_task_runs(concurrency: Any) -> None:
    probe = Probe()
    async with create_ditto(workers=[probe.worker()]) as runtime:
        with pytest.raises(InvalidInputError):
            await runtime.run(fan_out(2), concurrency=concurrency)
    assert probe.calls == []


async def test_a_raising_binder_drains_started_tasks_and_reports_the_partial_result() -> None:
    probe = Probe()

    def explode(run_input: Any, deps: Any) -> Any:
        raise ValueError("binder bug")

    plan = (
        graph("g")
        .node("slow", "PROBE.WORK", [], lambda i, d: work("slow", delay=0.1))
        .node("broken", "PROBE.WORK", [], explode)
        .node("after-broken", "PROBE.WORK", ["broken"], lambda i, d: work("after-broken"))
        .node("queued", "PROBE.WORK", [], lambda i, d: work("queued"))
        .node("after-slow", "PROBE.WORK", ["slow"], lambda i, d: work("after-slow"))
    )
    async with create_ditto(workers=[probe.worker()]) as runtime:
        with pytest.raises(GraphRunError) as raised:
            await runtime.run(plan, concurrency=2)
    error = raised.value
    assert error.code == ErrorCode.GRAPH_RUN_FAILED
    assert error.task_id == "broken"
    assert isinstance(error.__cause__, ValueError)
    # The started task finished; nothing was admitted after the binder raised.
    assert probe.finished == ["slow"]
    assert list(error.partial) == ["slow"]
    assert error.partial["slow"].ok
    assert not error.partial.ok
    assert error.partial.task_count == 5
    assert "binder bug" not in error.message


async def test_task_timeout_gives_status_timeout_and_dependents_still_decide() -> None:
    probe = Probe()
    plan = (
        graph("g")
        .node("slow", "PROBE.WORK", [], lambda i, d: work("slow", delay=5), timeout=0.05)
        .node("next", "PROBE.WORK", ["slow"], lambda i, d: work(d["slow"].status))
    )
    async with create_ditto(workers=[probe.worker()]) as runtime:
        result = await runtime.run(plan)
    assert result["slow"].status == "timeout"
    assert result["next"].unwrap().name == "timeout"


async def test_run_timeout_bounds_every_node_and_later_tasks_time_out_without_running() -> None:
    probe = Probe()
    plan = (
        graph("g")
        .node("slow", "PROBE.WORK", [], lambda i, d: work("slow", delay=5))
        .node("later", "PROBE.WORK", ["slow"], lambda i, d: work("later"))
    )
    async with create_ditto(workers=[probe.worker()]) as runtime:
        result = await runtime.run(plan, timeout=0.05)
    assert result["slow"].status == "timeout"
    assert result["later"].status == "timeout"
    assert probe.calls == ["slow"]


async def test_cancelling_the_caller_cancels_the_run_and_propagates() -> None:
    probe = Probe()
    outcome: list[Any] = []
    async with create_ditto(workers=[probe.worker()]) as runtime:
        async with anyio.create_task_group() as group:
            scope = anyio.CancelScope()
            group.start_soon(probe.cancel_once_started, scope, "t0", "t1", "t2")
            with scope:
                outcome.append(await runtime.run(fan_out(3, delay=5)))
        assert scope.cancelled_caught
        assert outcome == []
        assert sorted(probe.cancelled) == ["t0", "t1", "t2"]
        assert all(info.active == 0 for info in runtime.workers())


async def test_unknown_node_type_is_rejected_before_any_task_runs() -> None:
    probe = Probe()
    plan = (
        graph("g")
        .node("a", "PROBE.WORK", [], lambda i, d: work("a"))
        .node("b", "NOBODY.HOME", [], lambda i, d: {})
    )
    async with create_ditto(workers=[probe.worker()]) as runtime:
        with pytest.raises(UnknownNodeError):
            await runtime.run(plan)
    assert probe.calls == []


async def test_unknown_pinned_worker_is_rejected_before_any_task_runs() -> None:
    probe = Probe()
    plan = (
        graph("g")
        .node("a", "PROBE.WORK", [], lambda i, d: work("a"))
        .node("b", "PROBE.WORK", [], lambda i, d: work("b"), worker="nope")
    )
    async with create_ditto(workers=[probe.worker()]) as runtime:
        with pytest.raises(UnknownWorkerError):
            await runtime.run(plan)
    assert probe.calls == []


async def test_pinned_task_runs_on_its_worker() -> None:
    probe = Probe()
    plan = graph("g").node("a", "PROBE.WORK", [], lambda i, d: work("a"), worker="probe-2")
    async with create_ditto(workers=[probe.worker()]) as runtime:
        runtime.register(probe.worker())
        result = await runtime.run(plan)
    assert result["a"].worker_id == "probe-2"
