"""``runtime.stream``: each task's result as it finishes, backpressure, early exit, errors, and
loops."""

from __future__ import annotations

import gc
import warnings
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import anyio
import pytest

from ditto import (
    DittoError,
    ErrorCode,
    Graph,
    GraphRunError,
    InvalidInputError,
    LoopEvent,
    NodeContext,
    NodeResult,
    RunEnd,
    RunResult,
    TaskDone,
    TaskInterrupted,
    create_ditto,
    define_worker,
    graph,
    loop,
)
from ditto.runtime.streams import StreamEvent
from tests.runtime.probes import Probe, work

pytestmark = pytest.mark.anyio

Deps = Mapping[str, NodeResult[Any]]


def fan_out(width: int, **options: Any) -> Graph:
    def binder(n: int) -> Callable[[Any, Deps], dict[str, Any]]:
        return lambda run_input, deps: work(f"t{n}", **options)

    plan = graph("fan")
    for n in range(width):
        plan = plan.node(f"t{n}", "PROBE.WORK", [], binder(n))
    return plan


async def drain(stream: AsyncIterator[StreamEvent], into: list[StreamEvent]) -> None:
    """Read ``stream`` to its end (or its exception) into ``into``."""
    async for event in stream:
        into.append(event)


def raising_binder(run_input: Any, deps: Deps) -> Any:
    raise ValueError("binder bug")


def counting() -> Graph:
    return graph("count").node("t", "PROBE.WORK", [], lambda state, deps: work(f"n{state}"))


async def test_each_task_is_streamed_once_in_completion_order_then_the_run_end() -> None:
    probe = Probe()
    plan = (
        graph("g")
        .node("late", "PROBE.WORK", [], lambda i, d: work("late", delay=0.04))
        .node("early", "PROBE.WORK", [], lambda i, d: work("early", delay=0.0))
        .node("middle", "PROBE.WORK", [], lambda i, d: work("middle", delay=0.02))
        .node("after-early", "PROBE.WORK", ["early"], lambda i, d: work("after-early"))
    )
    events: list[StreamEvent] = []
    async with create_ditto(workers=[probe.worker()]) as runtime:
        async with runtime.stream(plan, "input") as stream:
            async for event in stream:
                events.append(event)
    assert len(events) == 5
    done = events[:-1]
    end = events[-1]
    assert all(isinstance(event, TaskDone) for event in done)
    order = [event.task_id for event in done if isinstance(event, TaskDone)]
    assert order == ["early", "after-early", "middle", "late"]
    assert order == probe.finished  # the order the handlers finished in
    assert isinstance(end, RunEnd)
    result = end.result
    assert isinstance(result, RunResult)
    assert result.ok
    assert list(result) == ["late", "early", "middle", "after-early"]  # declaration order
    for event in done:
        assert isinstance(event, TaskDone)
        assert event.result is result[event.task_id]


async def test_a_failed_node_is_streamed_like_any_other_result() -> None:
    probe = Probe()
    plan = graph("g").node("bad", "PROBE.WORK", [], lambda i, d: work("bad", fail_with="NOPE"))
    async with create_ditto(workers=[probe.worker()]) as runtime:
        async with runtime.stream(plan) as stream:
            events = [event async for event in stream]
    first, end = events
    assert isinstance(first, TaskDone)
    assert first.result.status == "failed"
    assert isinstance(end, RunEnd)
    assert not end.result.ok


async def test_an_interrupted_task_is_streamed_as_waiting_not_as_failed() -> None:
    async def ask(request: dict[str, Any], ctx: NodeContext) -> dict[str, Any]:
        return {"answer": ctx.interrupt({"question": "send it?"})}

    desk = define_worker("desk", {"DESK.ASK": ask})
    plan = graph("g").node("review", "DESK.ASK", [], lambda i, d: {})
    async with create_ditto(workers=[desk]) as runtime:
        async with runtime.stream(plan) as stream:
            events = [event async for event in stream]
    asked, end = events
    assert asked == TaskInterrupted("review", {"question": "send it?"})
    assert isinstance(end, RunEnd)
    assert end.result.status == "interrupted"


@pytest.mark.parametrize(("buffer", "most_finished"), [(1, 3), (64, 50)])
async def test_a_consumer_that_does_not_read_holds_the_run_back(
    buffer: int, most_finished: int
) -> None:
    probe = Probe()
    async with create_ditto(workers=[probe.worker()]) as runtime:
        async with runtime.stream(fan_out(50), buffer=buffer, concurrency=1) as stream:
            await anyio.sleep(0.05)  # not reading
            held = len(probe.finished)
            events = [event async for event in stream]
    assert 1 <= held <= most_finished
    if buffer == 64:
        assert held == 50  # the bound above comes from the buffer, not from a slow run
    tasks = [event.task_id for event in events if isinstance(event, TaskDone)]
    assert sorted(tasks) == sorted(f"t{n}" for n in range(50))
    assert len(tasks) == 50
    assert isinstance(events[-1], RunEnd)
    assert events[-1].result.ok


async def test_leaving_the_block_early_cancels_the_run() -> None:
    probe = Probe()
    plan = (
        graph("g")
        .node("first", "PROBE.WORK", [], lambda i, d: work("first"))
        .node("held", "PROBE.WORK", [], lambda i, d: work("held", hold=True))
        .node("never", "PROBE.WORK", [], lambda i, d: work("never"))
    )
    seen: list[StreamEvent] = []
    async with create_ditto(workers=[probe.worker()]) as runtime:
        with anyio.fail_after(2):
            async with runtime.stream(plan, buffer=1, concurrency=1) as stream:
                async for event in stream:
                    seen.append(event)
                    await probe.started("held")
                    break
            await anyio.sleep(0.02)
    assert [event.task_id for event in seen if isinstance(event, TaskDone)] == ["first"]
    assert probe.cancelled == ["held"]
    assert probe.calls == ["first", "held"]


async def test_an_exception_in_the_block_cancels_the_run_and_propagates() -> None:
    probe = Probe()
    plan = fan_out(1, hold=True)
    async with create_ditto(workers=[probe.worker()]) as runtime:

        async def consume() -> None:
            async with runtime.stream(plan):
                await probe.started("t0")
                raise LookupError("consumer bug")

        with pytest.raises(LookupError), anyio.fail_after(2):
            await consume()
    assert probe.cancelled == ["t0"]


async def test_a_raising_binder_streams_the_finished_tasks_then_raises() -> None:
    probe = Probe()
    plan = (
        graph("g")
        .node("quick", "PROBE.WORK", [], lambda i, d: work("quick"))
        .node("slow", "PROBE.WORK", [], lambda i, d: work("slow", delay=0.02))
        .node("broken", "PROBE.WORK", ["quick"], raising_binder)
        .node("after-slow", "PROBE.WORK", ["slow"], lambda i, d: work("after-slow"))
    )
    seen: list[StreamEvent] = []
    async with create_ditto(workers=[probe.worker()]) as runtime:
        async with runtime.stream(plan) as stream:
            with pytest.raises(GraphRunError) as raised:
                await drain(stream, seen)
    assert [event.task_id for event in seen if isinstance(event, TaskDone)] == ["quick", "slow"]
    assert not any(isinstance(event, RunEnd) for event in seen)
    assert raised.value.task_id == "broken"
    assert isinstance(raised.value.__cause__, ValueError)
    assert list(raised.value.partial) == ["quick", "slow"]
    assert probe.calls == ["quick", "slow"]


@contextmanager
def resource_warnings() -> Iterator[list[warnings.WarningMessage]]:
    """Record the ``ResourceWarning``s (an unclosed memory stream) raised inside the block,
    collecting garbage at its end so a leaked stream is finalized in time."""
    gc.collect()  # what earlier tests left behind is not this block's leak
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ResourceWarning)
        leaks: list[warnings.WarningMessage] = []
        try:
            yield leaks
        finally:
            gc.collect()
            leaks.extend(w for w in caught if issubclass(w.category, ResourceWarning))


@pytest.mark.parametrize(
    ("buffer", "options"),
    [
        (0, {}),
        (-1, {}),
        (True, {}),
        (1.5, {}),
        (64, {"bogus": 1}),
        (64, {"checkpoint": ""}),
        (64, {"concurrency": 0}),
        (64, {"timeout": -1}),
    ],
)
async def test_invalid_arguments_raise_on_entry(buffer: Any, options: dict[str, Any]) -> None:
    probe = Probe()
    entered: list[bool] = []
    async with create_ditto(workers=[probe.worker()]) as runtime:
        with resource_warnings() as leaks:
            with pytest.raises(InvalidInputError):
                async with runtime.stream(fan_out(2), buffer=buffer, **options):
                    entered.append(True)
            await anyio.sleep(0.01)
    assert entered == []
    assert probe.calls == []
    assert [str(leak.message) for leak in leaks] == []  # the refused stream left nothing open


@pytest.mark.parametrize(
    "options", [{"bogus": 1}, {"concurrency": 0}, {"timeout": -1}, {"buffer": 0}]
)
async def test_invalid_arguments_for_a_loop_raise_on_entry(options: dict[str, Any]) -> None:
    probe = Probe()
    entered: list[bool] = []
    definition = loop(graph=counting(), update=lambda s, r: s + 1, done=lambda s, r: s >= 1)
    async with create_ditto(workers=[probe.worker()]) as runtime:

        async def consume() -> None:
            async with runtime.stream(definition, 0, **options) as stream:
                entered.append(True)
                await drain(stream, [])

        with pytest.raises(InvalidInputError):
            await consume()
    assert entered == []
    assert probe.calls == []


async def test_leaving_the_block_at_once_runs_nothing_and_leaves_nothing_open() -> None:
    probe = Probe()
    async with create_ditto(workers=[probe.worker()]) as runtime:
        with resource_warnings() as leaks:
            async with runtime.stream(fan_out(3)):
                pass
            await anyio.sleep(0.01)
    assert probe.calls == []
    assert [str(leak.message) for leak in leaks] == []


async def test_a_stream_of_something_else_is_refused() -> None:
    probe = Probe()
    async with create_ditto(workers=[probe.worker()]) as runtime:
        with pytest.raises(InvalidInputError):
            async with runtime.stream("not a graph"):  # type: ignore[arg-type]
                pass


async def test_a_loop_streams_its_loop_events_then_the_final_state() -> None:
    probe = Probe()
    observed: list[LoopEvent] = []
    definition = loop(
        graph=counting(), update=lambda s, r: s + 1, done=lambda s, r: s >= 2, id="count"
    )
    async with create_ditto(workers=[probe.worker()]) as runtime:
        async with runtime.stream(definition, 0, on_event=observed.append) as stream:
            events = [event async for event in stream]
    nodes = ("t",)
    assert events == [
        LoopEvent("count", 0, "count", nodes, "started"),
        LoopEvent("count", 0, "count", nodes, "completed"),
        LoopEvent("count", 1, "count", nodes, "started"),
        LoopEvent("count", 1, "count", nodes, "completed"),
        RunEnd(2),
    ]
    assert observed == events[:-1]  # a given observer still sees every event
    assert probe.calls == ["n0", "n1"]


async def test_a_loop_stream_raises_the_loop_error_after_its_events() -> None:
    probe = Probe()
    definition = loop(
        graph=counting(), update=lambda s, r: s + 1, done=lambda s, r: False, max_iterations=2
    )
    seen: list[StreamEvent] = []
    async with create_ditto(workers=[probe.worker()]) as runtime:
        async with runtime.stream(definition, 0) as stream:
            with pytest.raises(DittoError) as raised:
                await drain(stream, seen)
    assert raised.value.code == ErrorCode.LOOP_LIMIT_REACHED
    assert [(e.iteration, e.status) for e in seen if isinstance(e, LoopEvent)] == [
        (0, "started"),
        (0, "completed"),
        (1, "started"),
        (1, "completed"),
    ]
    assert len(seen) == 4


async def test_leaving_a_loop_stream_early_stops_the_loop() -> None:
    probe = Probe()
    definition = loop(
        graph=graph("g").node("t", "PROBE.WORK", [], lambda s, d: work(f"n{s}", delay=0.005)),
        update=lambda s, r: s + 1,
        done=lambda s, r: False,
        max_iterations=100,
    )
    async with create_ditto(workers=[probe.worker()]) as runtime:
        with anyio.fail_after(2):
            async with runtime.stream(definition, 0, buffer=1) as stream:
                async for event in stream:
                    assert isinstance(event, LoopEvent)
                    if event.status == "completed":
                        break
            calls = list(probe.calls)
            await anyio.sleep(0.03)
    assert probe.calls == calls
    assert len(calls) <= 3


async def test_a_checkpointed_stream_records_the_run_and_replays_a_completed_one() -> None:
    probe = Probe()
    async with create_ditto(workers=[probe.worker()]) as runtime:
        async with runtime.stream(fan_out(3), checkpoint="streamed") as events:
            first = [event async for event in events]
        calls = len(probe.calls)
        async with runtime.stream(fan_out(3), checkpoint="streamed") as events:
            again = [event async for event in events]
    assert len(probe.calls) == calls, "a completed checkpoint runs nothing again"
    done_first = {e.task_id: e.result for e in first if isinstance(e, TaskDone)}
    done_again = {e.task_id: e.result for e in again if isinstance(e, TaskDone)}
    assert done_again == done_first
    assert len(done_first) == len(fan_out(3))
    assert isinstance(again[-1], RunEnd)
    assert again[-1].result.checkpoint_id == "streamed"
