"""``runtime.loop``: state-machine and plan loops, their limits, events, timeouts and
checkpoints."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, cast

import anyio
import pytest

from ditto import (
    DittoError,
    ErrorCode,
    Graph,
    GraphRunError,
    InvalidInputError,
    LoopEvent,
    NodeResult,
    RunResult,
    Settings,
    create_ditto,
    graph,
    loop,
)
from ditto.app.config.settings import RuntimeSettings
from ditto.runtime.loops import LoopStep, PlanLoop, StateLoop
from tests.runtime.probes import Probe, work

pytestmark = pytest.mark.anyio

Deps = Mapping[str, NodeResult[Any]]


class Boom(Exception):
    """A callback's own failure, to check it propagates unchanged."""


def counting(name: str = "g", *, delay: float = 0.0) -> Graph:
    """One task ``t`` whose work is named after the run input (the loop state): ``n<state>``."""
    return graph(name).node(
        "t", "PROBE.WORK", [], lambda state, deps: work(f"n{state}", delay=delay)
    )


def fan(name: str, width: int, delay: float) -> Graph:
    def binder(n: int) -> Callable[[Any, Deps], dict[str, Any]]:
        return lambda run_input, deps: work(f"{name}-{n}", delay=delay)

    plan = graph(name)
    for n in range(width):
        plan = plan.node(f"t{n}", "PROBE.WORK", [], binder(n))
    return plan


def raising_binder(run_input: Any, deps: Deps) -> Any:
    raise ValueError("binder bug")


def broken(name: str = "broken") -> Graph:
    """A graph whose only task's binder raises: running it raises GraphRunError."""
    return graph(name).node("t", "PROBE.WORK", [], raising_binder)


def step_up(state: int, result: RunResult) -> int:
    return state + 1


def never(state: Any, result: RunResult) -> bool:
    return False


def until(limit: int) -> Callable[[int, RunResult], bool]:
    def done(state: int, result: RunResult) -> bool:
        return state >= limit

    return done


def settings_with(loop_max_iterations: int | None) -> Settings | None:
    if loop_max_iterations is None:
        return None
    return Settings(runtime=RuntimeSettings(loop_max_iterations=loop_max_iterations))


# ----------------------------------------------------------------- state machine


async def test_a_loop_runs_once_even_when_done_holds_from_the_start() -> None:
    probe = Probe()
    definition = loop(
        graph=counting(), update=step_up, done=lambda state, result: True, max_iterations=5
    )
    async with create_ditto(workers=[probe.worker()]) as runtime:
        final = await runtime.loop(definition, 0)
    assert final == 1
    assert probe.calls == ["n0"]


async def test_update_sees_the_run_result_and_done_sees_the_updated_state() -> None:
    probe = Probe()
    updates: list[tuple[int, RunResult]] = []
    checks: list[tuple[int, RunResult]] = []

    def update(state: int, result: RunResult) -> int:
        updates.append((state, result))
        return state + 1

    def done(state: int, result: RunResult) -> bool:
        checks.append((state, result))
        return state >= 3

    definition = loop(graph=counting(), update=update, done=done)
    async with create_ditto(workers=[probe.worker()]) as runtime:
        final = await runtime.loop(definition, 0)
    assert final == 3
    assert probe.calls == ["n0", "n1", "n2"]
    assert [state for state, _ in updates] == [0, 1, 2]
    assert [state for state, _ in checks] == [1, 2, 3]  # the updated state, not the old one
    for (old, result), (_, checked) in zip(updates, checks, strict=True):
        assert isinstance(result, RunResult)
        assert result.status == "completed"
        assert result["t"].unwrap().name == f"n{old}"
        assert checked is result  # done sees the same result as update


async def test_the_final_state_is_whatever_update_returned_last() -> None:
    probe = Probe()
    definition = loop(
        graph=counting(),
        update=lambda state, result: [*state, result["t"].unwrap().name],
        done=lambda state, result: len(state) == 2,
        bind=lambda state: len(state),
    )
    async with create_ditto(workers=[probe.worker()]) as runtime:
        final = await runtime.loop(definition, [])
    assert final == ["n0", "n1"]


async def test_a_graph_selector_picks_the_graph_from_the_state_each_iteration() -> None:
    probe = Probe()
    selected: list[int] = []
    even, odd = counting("even"), counting("odd")

    def select(state: int) -> Graph:
        selected.append(state)
        return even if state % 2 == 0 else odd

    definition = loop(graph=select, update=step_up, done=until(3))
    async with create_ditto(workers=[probe.worker()]) as runtime:
        assert await runtime.loop(definition, 0) == 3
    assert selected == [0, 1, 2]
    graphs = [ctx.execution.graph_id for ctx in probe.contexts if ctx.execution is not None]
    assert graphs == ["even", "odd", "even"]


async def test_a_selector_that_returns_no_graph_is_refused() -> None:
    probe = Probe()
    definition = loop(graph=cast(Any, lambda state: "not a graph"), update=step_up, done=until(3))
    async with create_ditto(workers=[probe.worker()]) as runtime:
        with pytest.raises(InvalidInputError):
            await runtime.loop(definition, 0)
    assert probe.calls == []


async def test_without_bind_the_state_is_the_graph_input() -> None:
    probe = Probe()
    inputs: list[Any] = []

    def bind_task(run_input: Any, deps: Deps) -> dict[str, Any]:
        inputs.append(run_input)
        return work("t")

    definition = loop(
        graph=graph("g").node("t", "PROBE.WORK", [], bind_task),
        update=lambda state, result: {"n": state["n"] + 1},
        done=lambda state, result: state["n"] >= 2,
    )
    async with create_ditto(workers=[probe.worker()]) as runtime:
        final = await runtime.loop(definition, {"n": 0})
    assert final == {"n": 2}
    assert inputs == [{"n": 0}, {"n": 1}]


async def test_bind_builds_the_graph_input_from_the_state() -> None:
    probe = Probe()
    inputs: list[Any] = []

    def bind_task(run_input: Any, deps: Deps) -> dict[str, Any]:
        inputs.append(run_input)
        return work("t")

    definition = loop(
        graph=graph("g").node("t", "PROBE.WORK", [], bind_task),
        bind=lambda state: {"wrapped": state},
        update=step_up,
        done=until(2),
    )
    async with create_ditto(workers=[probe.worker()]) as runtime:
        assert await runtime.loop(definition, 0) == 2
    assert inputs == [{"wrapped": 0}, {"wrapped": 1}]


@pytest.mark.parametrize(
    ("defined", "configured", "expected"),
    [
        (2, 5, 2),  # the definition wins over the settings
        (None, 5, 5),  # then runtime.loop_max_iterations
        (None, None, 32),  # then 32
    ],
)
async def test_the_iteration_limit_comes_from_definition_then_settings_then_32(
    defined: int | None, configured: int | None, expected: int
) -> None:
    probe = Probe()
    definition = loop(graph=counting(), update=step_up, done=never, max_iterations=defined)
    async with create_ditto(config=settings_with(configured), workers=[probe.worker()]) as runtime:
        with pytest.raises(DittoError) as raised:
            await runtime.loop(definition, 0)
    assert raised.value.code == ErrorCode.LOOP_LIMIT_REACHED
    assert raised.value.details is not None
    assert raised.value.details["max_iterations"] == expected
    assert probe.calls == [f"n{n}" for n in range(expected)]


async def test_done_on_the_last_allowed_iteration_is_not_a_limit_error() -> None:
    probe = Probe()
    definition = loop(graph=counting(), update=step_up, done=until(3), max_iterations=3)
    async with create_ditto(workers=[probe.worker()]) as runtime:
        assert await runtime.loop(definition, 0) == 3
    assert len(probe.calls) == 3


@pytest.mark.parametrize("limit", [0, -1, True, 1.5, "3"])
async def test_an_invalid_max_iterations_is_refused_before_any_callback(limit: Any) -> None:
    probe = Probe()
    called: list[str] = []

    def select(state: Any) -> Graph:
        called.append("select")
        return counting()

    def bind(state: Any) -> Any:
        called.append("bind")
        return state

    def update(state: Any, result: RunResult) -> Any:
        called.append("update")
        return state

    def done(state: Any, result: RunResult) -> bool:
        called.append("done")
        return True

    async def plan(step: LoopStep, plan_input: Any) -> Any:
        called.append("plan")
        return None

    with pytest.raises(InvalidInputError) as raised:
        loop(graph=select, bind=bind, update=update, done=done, max_iterations=limit)
    assert raised.value.code == ErrorCode.INVALID_INPUT
    with pytest.raises(InvalidInputError):
        loop(plan=plan, max_iterations=limit)

    # A definition built around loop() is checked again by runtime.loop, before any callback.
    async with create_ditto(workers=[probe.worker()]) as runtime:
        with pytest.raises(InvalidInputError):
            await runtime.loop(StateLoop("bad", select, bind, update, done, limit), 0)
        with pytest.raises(InvalidInputError):
            await runtime.loop(PlanLoop("bad", plan, limit), 0)
    assert called == []
    assert probe.calls == []


@pytest.mark.parametrize(
    ("failing", "graph_runs"),
    [("select", 1), ("bind", 1), ("update", 2), ("done", 2)],
)
async def test_a_raising_callback_propagates_as_is_and_nothing_runs_after_it(
    failing: str, graph_runs: int
) -> None:
    """Each callback raises at iteration 1 (state 1); the loop has room for 10 iterations."""
    probe = Probe()
    boom = Boom(failing)
    the_graph = counting()

    def hook(name: str, state: int) -> None:
        if name == failing and state == 1:
            raise boom

    def select(state: int) -> Graph:
        hook("select", state)
        return the_graph

    def bind(state: int) -> int:
        hook("bind", state)
        return state

    def update(state: int, result: RunResult) -> int:
        hook("update", state)
        return state + 1

    def done(state: int, result: RunResult) -> bool:
        hook("done", state - 1)  # state is already updated: fail during iteration 1
        return False

    definition = loop(graph=select, bind=bind, update=update, done=done, max_iterations=10)
    async with create_ditto(workers=[probe.worker()]) as runtime:
        with pytest.raises(Boom) as raised:
            await runtime.loop(definition, 0)
    assert raised.value is boom
    assert len(probe.calls) == graph_runs


async def test_events_report_each_graph_starting_and_completing() -> None:
    probe = Probe()
    events: list[LoopEvent] = []
    two_tasks = (
        graph("pair")
        .node("a", "PROBE.WORK", [], lambda state, deps: work("a"))
        .node("b", "PROBE.WORK", ["a"], lambda state, deps: work("b"))
    )
    definition = loop(graph=two_tasks, update=step_up, done=until(2), id="counter")
    async with create_ditto(workers=[probe.worker()]) as runtime:
        assert await runtime.loop(definition, 0, on_event=events.append) == 2
    nodes = ("a", "b")
    assert events == [
        LoopEvent("counter", 0, "pair", nodes, "started"),
        LoopEvent("counter", 0, "pair", nodes, "completed"),
        LoopEvent("counter", 1, "pair", nodes, "started"),
        LoopEvent("counter", 1, "pair", nodes, "completed"),
    ]


async def test_a_graph_whose_binder_raises_is_reported_failed_and_ends_the_loop() -> None:
    probe = Probe()
    events: list[LoopEvent] = []
    good, bad = counting("good"), broken("bad")
    definition = loop(
        graph=lambda state: good if state == 0 else bad,
        update=step_up,
        done=never,
        max_iterations=10,
        id="flaky",
    )
    async with create_ditto(workers=[probe.worker()]) as runtime:
        with pytest.raises(GraphRunError) as raised:
            await runtime.loop(definition, 0, on_event=events.append)
    assert isinstance(raised.value.__cause__, ValueError)
    assert raised.value.task_id == "t"
    assert [(e.iteration, e.graph_id, e.status) for e in events] == [
        (0, "good", "started"),
        (0, "good", "completed"),
        (1, "bad", "started"),
        (1, "bad", "failed"),
    ]
    assert probe.calls == ["n0"]


async def test_a_graph_with_a_failed_node_still_completes_and_update_decides() -> None:
    probe = Probe()
    events: list[LoopEvent] = []
    failing = graph("f").node("t", "PROBE.WORK", [], lambda s, d: work("t", fail_with="NOPE"))
    seen: list[str | None] = []

    def update(state: int, result: RunResult) -> int:
        error = result["t"].error
        seen.append(None if error is None else error.code)
        return state + 1

    definition = loop(graph=failing, update=update, done=until(1))
    async with create_ditto(workers=[probe.worker()]) as runtime:
        assert await runtime.loop(definition, 0, on_event=events.append) == 1
    assert seen == ["NOPE"]
    assert [e.status for e in events] == ["started", "completed"]


@pytest.mark.parametrize("kind", ["sync", "async"])
@pytest.mark.parametrize(("status", "graph_runs"), [("started", 1), ("completed", 2)])
async def test_an_observer_that_raises_ends_the_loop_with_its_exception(
    kind: str, status: str, graph_runs: int
) -> None:
    probe = Probe()
    boom = Boom("observer")
    seen: list[LoopEvent] = []

    def check(event: LoopEvent) -> None:
        seen.append(event)
        if event.iteration == 1 and event.status == status:
            raise boom

    async def check_async(event: LoopEvent) -> None:
        await anyio.lowlevel.checkpoint()
        check(event)

    observer = check if kind == "sync" else check_async
    definition = loop(graph=counting(), update=step_up, done=never, max_iterations=10)
    async with create_ditto(workers=[probe.worker()]) as runtime:
        with pytest.raises(Boom) as raised:
            await runtime.loop(definition, 0, on_event=observer)
    assert raised.value is boom
    assert len(probe.calls) == graph_runs
    assert (seen[-1].iteration, seen[-1].status) == (1, status)


async def test_every_graph_run_has_a_fresh_run_id() -> None:
    probe = Probe()
    result_ids: list[str] = []

    def update(state: int, result: RunResult) -> int:
        result_ids.append(result.run_id)
        return state + 1

    definition = loop(graph=counting(), update=update, done=until(3))
    async with create_ditto(workers=[probe.worker()]) as runtime:
        await runtime.loop(definition, 0)
    handler_ids = [ctx.execution.run_id for ctx in probe.contexts if ctx.execution is not None]
    assert handler_ids == result_ids
    assert len(set(result_ids)) == 3


async def test_the_timeout_covers_the_whole_loop() -> None:
    """Each graph takes 20 ms, well inside the 60 ms timeout, and 50 of them are allowed: only a
    timeout over the whole loop ends it with LOOP_TIMEOUT (a per-graph one would let all 50 run
    into LOOP_LIMIT_REACHED). Nothing here depends on how fast the machine is: a slower one only
    runs fewer graphs before the deadline."""
    probe = Probe()
    definition = loop(graph=counting(delay=0.02), update=step_up, done=never, max_iterations=50)
    async with create_ditto(workers=[probe.worker()]) as runtime:
        with pytest.raises(DittoError) as raised:
            await runtime.loop(definition, 0, timeout=0.06)
    assert raised.value.code == ErrorCode.LOOP_TIMEOUT
    assert len(probe.calls) < 50
    # The graph running at the deadline, if one was, is the one cancelled.
    assert set(probe.cancelled) <= set(probe.calls[-1:])


async def test_a_plan_loop_times_out_as_a_whole_too() -> None:
    probe = Probe()
    quick = counting(delay=0.02)

    async def plan(step: LoopStep, plan_input: int) -> int:
        n = plan_input
        while True:
            await step(quick, n)
            n += 1

    async with create_ditto(workers=[probe.worker()]) as runtime:
        with pytest.raises(DittoError) as raised:
            await runtime.loop(loop(plan=plan, max_iterations=50), 0, timeout=0.06)
    assert raised.value.code == ErrorCode.LOOP_TIMEOUT
    assert len(probe.calls) < 50


async def test_a_plan_that_swallows_the_timeout_still_ends_with_loop_timeout() -> None:
    probe = Probe()
    slow = graph("slow").node("t", "PROBE.WORK", [], lambda s, d: work("slow", delay=5))

    async def plan(step: LoopStep, plan_input: Any) -> str:
        try:
            await step(slow, plan_input)
        except asyncio.CancelledError:
            return "swallowed"
        return "finished"

    async with create_ditto(workers=[probe.worker()]) as runtime:
        with pytest.raises(DittoError) as raised:
            await runtime.loop(loop(plan=plan), None, timeout=0.03)
    assert raised.value.code == ErrorCode.LOOP_TIMEOUT
    assert probe.cancelled == ["slow"]


async def test_a_plan_that_swallows_the_timeout_cannot_run_another_graph() -> None:
    probe = Probe()
    slow = graph("slow").node("t", "PROBE.WORK", [], lambda s, d: work("slow", delay=5))
    after = graph("after").node("t", "PROBE.WORK", [], lambda s, d: work("after"))

    async def plan(step: LoopStep, plan_input: Any) -> str:
        with contextlib.suppress(asyncio.CancelledError):
            await step(slow, plan_input)
        await step(after, plan_input)
        return "ran past the deadline"

    async with create_ditto(workers=[probe.worker()]) as runtime:
        with pytest.raises(DittoError) as raised:
            await runtime.loop(loop(plan=plan), None, timeout=0.03)
    assert raised.value.code == ErrorCode.LOOP_TIMEOUT
    assert probe.calls == ["slow"]


@pytest.mark.parametrize("how", ["move_on_after", "cancel_scope"])
async def test_cancelling_the_caller_stops_the_loop(how: str) -> None:
    probe = Probe()
    definition = loop(graph=counting(delay=0.01), update=step_up, done=never, max_iterations=50)
    outcome: list[Any] = []
    async with create_ditto(workers=[probe.worker()]) as runtime:
        if how == "move_on_after":
            with anyio.move_on_after(0.035) as scope:
                outcome.append(await runtime.loop(definition, 0))
        else:
            async with anyio.create_task_group() as group:
                scope = anyio.CancelScope()
                group.start_soon(probe.cancel_once_started, scope, "n2")
                with scope:
                    outcome.append(await runtime.loop(definition, 0))
        assert scope.cancelled_caught
        calls = list(probe.calls)
        await anyio.sleep(0.03)
    assert outcome == []
    assert probe.calls == calls  # nothing ran after the cancellation
    assert 1 <= len(calls) <= 5
    if how == "move_on_after":
        # The deadline lands in a node (cancelled) or, now and then, between two iterations
        # (the last node had finished): either way nothing runs after it.
        assert probe.cancelled in ([calls[-1]], [])
    else:
        assert probe.cancelled == [calls[-1]]


@pytest.mark.parametrize(("concurrency", "peak"), [(2, 2), (None, 6)])
async def test_concurrency_applies_to_every_graph_of_the_loop(
    concurrency: int | None, peak: int
) -> None:
    probe = Probe()
    peaks: list[int] = []
    first, second = fan("first", 6, 0.005), fan("second", 6, 0.005)

    def update(state: int, result: RunResult) -> int:
        assert result.ok
        peaks.append(probe.peak)
        probe.peak = 0
        return state + 1

    definition = loop(graph=lambda s: first if s == 0 else second, update=update, done=until(2))
    async with create_ditto(workers=[probe.worker()]) as runtime:
        await runtime.loop(definition, 0, concurrency=concurrency)
    assert peaks == [peak, peak]


@pytest.mark.parametrize("concurrency", [0, -1, True, 1.5])
async def test_an_invalid_concurrency_is_refused_before_any_graph(concurrency: Any) -> None:
    probe = Probe()
    definition = loop(graph=counting(), update=step_up, done=until(1))
    async with create_ditto(workers=[probe.worker()]) as runtime:
        with pytest.raises(InvalidInputError):
            await runtime.loop(definition, 0, concurrency=concurrency)
    assert probe.calls == []


async def test_the_principal_covers_every_graph() -> None:
    probe = Probe()
    definition = loop(graph=counting(), update=step_up, done=until(2))
    async with create_ditto(workers=[probe.worker()]) as runtime:
        await runtime.loop(definition, 0, principal="dana")
    assert [ctx.principal for ctx in probe.contexts] == ["dana", "dana"]


# ----------------------------------------------------------------- plans


async def test_a_plan_steps_through_graphs_and_returns_its_value() -> None:
    probe = Probe()
    events: list[LoopEvent] = []
    first, second = counting("first"), counting("second")

    async def plan(step: LoopStep, plan_input: int) -> list[str]:
        names = []
        for n in range(plan_input):
            result = await step(first if n % 2 == 0 else second, n)
            assert isinstance(result, RunResult)
            names.append(result["t"].unwrap().name)
        return names

    async with create_ditto(workers=[probe.worker()]) as runtime:
        value = await runtime.loop(loop(plan=plan, id="planner"), 3, on_event=events.append)
    assert value == ["n0", "n1", "n2"]
    assert [(e.loop_id, e.iteration, e.graph_id, e.status) for e in events] == [
        ("planner", 0, "first", "started"),
        ("planner", 0, "first", "completed"),
        ("planner", 1, "second", "started"),
        ("planner", 1, "second", "completed"),
        ("planner", 2, "first", "started"),
        ("planner", 2, "first", "completed"),
    ]


async def test_a_plan_can_catch_a_graph_run_error_at_the_step_and_go_on() -> None:
    probe = Probe()
    events: list[LoopEvent] = []
    caught: list[GraphRunError] = []

    async def plan(step: LoopStep, plan_input: int) -> str:
        try:
            await step(broken(), plan_input)
        except GraphRunError as exc:
            caught.append(exc)
        result = await step(counting("fallback"), plan_input)
        return f"recovered with {result['t'].unwrap().name}"

    async with create_ditto(workers=[probe.worker()]) as runtime:
        value = await runtime.loop(loop(plan=plan), 7, on_event=events.append)
    assert value == "recovered with n7"
    assert len(caught) == 1
    assert isinstance(caught[0].__cause__, ValueError)
    assert [(e.iteration, e.graph_id, e.status) for e in events] == [
        (0, "broken", "started"),
        (0, "broken", "failed"),
        (1, "fallback", "started"),
        (1, "fallback", "completed"),
    ]


async def test_an_uncaught_graph_run_error_ends_the_plan() -> None:
    probe = Probe()
    reached: list[str] = []

    async def plan(step: LoopStep, plan_input: Any) -> str:
        await step(broken(), plan_input)
        reached.append("after")
        return "unreachable"

    async with create_ditto(workers=[probe.worker()]) as runtime:
        with pytest.raises(GraphRunError):
            await runtime.loop(loop(plan=plan), None)
    assert reached == []


async def test_max_iterations_counts_failed_steps_too() -> None:
    probe = Probe()
    failures: list[int] = []

    async def plan(step: LoopStep, plan_input: Any) -> str:
        while True:
            try:
                await step(broken(), plan_input)
            except GraphRunError:
                failures.append(len(failures))

    async with create_ditto(workers=[probe.worker()]) as runtime:
        with pytest.raises(DittoError) as raised:
            await runtime.loop(loop(plan=plan, max_iterations=3), None)
    assert raised.value.code == ErrorCode.LOOP_LIMIT_REACHED
    assert failures == [0, 1, 2]


@pytest.mark.parametrize(
    ("defined", "configured", "expected"), [(2, 5, 2), (None, 4, 4), (None, None, 32)]
)
async def test_a_plan_gets_the_same_iteration_limit_and_the_step_raises_at_it(
    defined: int | None, configured: int | None, expected: int
) -> None:
    probe = Probe()
    at_step: list[str] = []

    async def plan(step: LoopStep, plan_input: int) -> int:
        n = plan_input
        try:
            while True:
                await step(counting(), n)
                n += 1
        except DittoError as exc:
            at_step.append(exc.code)
            raise

    async with create_ditto(config=settings_with(configured), workers=[probe.worker()]) as runtime:
        with pytest.raises(DittoError) as raised:
            await runtime.loop(loop(plan=plan, max_iterations=defined), 0)
    assert raised.value.code == ErrorCode.LOOP_LIMIT_REACHED
    assert at_step == [ErrorCode.LOOP_LIMIT_REACHED]
    assert len(probe.calls) == expected


async def test_a_plan_cannot_swallow_the_iteration_limit() -> None:
    probe = Probe()
    swallowed: list[str] = []

    async def plan(step: LoopStep, plan_input: int) -> str:
        try:
            for n in range(10):
                await step(counting(), n)
        except DittoError as exc:
            swallowed.append(exc.code)
            return "escaped the limit"
        return "never"

    async with create_ditto(workers=[probe.worker()]) as runtime:
        with pytest.raises(DittoError) as raised:
            await runtime.loop(loop(plan=plan, max_iterations=2), 0)
    assert raised.value.code == ErrorCode.LOOP_LIMIT_REACHED
    assert swallowed == [ErrorCode.LOOP_LIMIT_REACHED]
    assert probe.calls == ["n0", "n1"]


async def test_a_plan_loop_cannot_be_checkpointed() -> None:
    probe = Probe()
    called: list[str] = []

    async def plan(step: LoopStep, plan_input: Any) -> str:
        called.append("plan")
        await step(counting(), 0)
        return "ran"

    async with create_ditto(workers=[probe.worker()]) as runtime:
        with pytest.raises(InvalidInputError):
            await runtime.loop(loop(plan=plan), 0, checkpoint="plan-cp")
        assert await runtime.checkpoints.load("plan-cp") is None
    assert called == []
    assert probe.calls == []


def test_loop_takes_one_form_or_the_other() -> None:
    async def plan(step: LoopStep, plan_input: Any) -> None:
        return None

    with pytest.raises(InvalidInputError):
        loop(plan=plan, graph=counting(), update=step_up, done=never)
    with pytest.raises(InvalidInputError):
        loop(graph=counting(), update=step_up)  # no done
    with pytest.raises(InvalidInputError):
        loop()


# ----------------------------------------------------------------- checkpoints


@dataclass
class Flaky:
    """A counting loop whose update raises once, at ``fail_at``, while ``armed``."""

    fail_at: int
    armed: bool = True
    updates: int = 0

    def update(self, state: int, result: RunResult) -> int:
        self.updates += 1
        if self.armed and state == self.fail_at:
            self.armed = False
            raise Boom(f"update failed at {state}")
        return state + 1


def graph_runs(probe: Probe) -> int:
    return len(probe.calls)


async def test_a_checkpointed_loop_resumes_at_the_iteration_that_failed() -> None:
    probe = Probe()
    flaky = Flaky(fail_at=3)
    events: list[LoopEvent] = []
    definition = loop(graph=counting(), update=flaky.update, done=until(5), id="count")
    async with create_ditto(workers=[probe.worker()]) as runtime:
        with pytest.raises(Boom):
            await runtime.loop(definition, 0, checkpoint="x")
        assert probe.calls == ["n0", "n1", "n2", "n3"]

        final = await runtime.loop(definition, 0, checkpoint="x", on_event=events.append)
        assert final == 5
        # Iterations 0-2 were saved: only iteration 3 (again) and 4 run.
        assert probe.calls == ["n0", "n1", "n2", "n3", "n3", "n4"]
        assert [(e.iteration, e.status) for e in events] == [
            (3, "started"),
            (3, "completed"),
            (4, "started"),
            (4, "completed"),
        ]


async def test_a_completed_checkpointed_loop_returns_its_saved_state_without_running() -> None:
    probe = Probe()
    flaky = Flaky(fail_at=-1, armed=False)
    events: list[LoopEvent] = []
    definition = loop(graph=counting(), update=flaky.update, done=until(2))
    async with create_ditto(workers=[probe.worker()]) as runtime:
        assert await runtime.loop(definition, 0, checkpoint="done-loop") == 2
        runs, updates = graph_runs(probe), flaky.updates
        again = await runtime.loop(definition, 0, checkpoint="done-loop", on_event=events.append)
    assert again == 2
    assert graph_runs(probe) == runs == 2
    assert flaky.updates == updates
    assert events == []


async def test_the_limit_still_holds_across_a_resumed_checkpointed_loop() -> None:
    probe = Probe()
    flaky = Flaky(fail_at=2)
    definition = loop(graph=counting(), update=flaky.update, done=never, max_iterations=4)
    async with create_ditto(workers=[probe.worker()]) as runtime:
        with pytest.raises(Boom):
            await runtime.loop(definition, 0, checkpoint="bounded")
        with pytest.raises(DittoError) as raised:
            await runtime.loop(definition, 0, checkpoint="bounded")
    assert raised.value.code == ErrorCode.LOOP_LIMIT_REACHED
    assert probe.calls == ["n0", "n1", "n2", "n2", "n3"]  # 4 iterations in all, one repeated


async def test_another_first_input_or_loop_with_the_same_checkpoint_is_a_mismatch() -> None:
    probe = Probe()
    definition = loop(graph=counting(), update=step_up, done=until(2), id="one")
    other = loop(graph=counting(), update=step_up, done=until(2), id="other")
    async with create_ditto(workers=[probe.worker()]) as runtime:
        assert await runtime.loop(definition, 0, checkpoint="shared") == 2
        runs = graph_runs(probe)
        with pytest.raises(DittoError) as by_input:
            await runtime.loop(definition, 1, checkpoint="shared")
        with pytest.raises(DittoError) as by_loop:
            await runtime.loop(other, 0, checkpoint="shared")
        with pytest.raises(DittoError) as by_principal:
            await runtime.loop(definition, 0, checkpoint="shared", principal="eve")
    assert by_input.value.code == ErrorCode.CHECKPOINT_MISMATCH
    assert by_loop.value.code == ErrorCode.CHECKPOINT_MISMATCH
    assert by_principal.value.code == ErrorCode.CHECKPOINT_MISMATCH
    assert graph_runs(probe) == runs


@dataclass(frozen=True)
class Point:
    x: int


@pytest.mark.parametrize(
    ("first", "update", "graph_runs_before_refusal"),
    [
        ((0, 1), step_up, 0),  # the first input is checked before anything runs
        (0, lambda state, result: (state, state), 1),  # a tuple would come back as a list
        (0, lambda state, result: Point(state), 1),  # a dataclass would come back as a dict
        (0, lambda state, result: {1: state}, 1),  # an int key would come back as a string
    ],
)
async def test_a_checkpointed_loop_refuses_state_that_is_not_plain_json(
    first: Any, update: Callable[[Any, RunResult], Any], graph_runs_before_refusal: int
) -> None:
    probe = Probe()
    definition = loop(graph=counting(), bind=lambda s: 0, update=update, done=never)
    async with create_ditto(workers=[probe.worker()]) as runtime:
        with pytest.raises(InvalidInputError) as raised:
            await runtime.loop(definition, first, checkpoint="plain")
    assert raised.value.code == ErrorCode.INVALID_INPUT
    assert graph_runs(probe) == graph_runs_before_refusal


async def test_a_checkpointed_loop_saves_state_in_the_runtime_store() -> None:
    probe = Probe()
    definition = loop(graph=counting(), update=step_up, done=until(2), id="saved")
    async with create_ditto(workers=[probe.worker()]) as runtime:
        await runtime.loop(definition, 0, checkpoint="where")
        stored = await runtime.checkpoints.load("where")
    assert stored is not None
    assert stored.scope == "loop:saved"
