"""``close()``: refuses new work, drains accepted work, disposes once, reports every failure."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from ditto import (
    ErrorCode,
    NodeContext,
    RuntimeClosedError,
    WorkerCleanupError,
    WorkerDefinitionError,
    create_ditto,
    define_worker,
    graph,
)
from tests.runtime.probes import Probe, start_closing, work

pytestmark = pytest.mark.anyio


async def test_close_drains_accepted_invocations_and_runs() -> None:
    probe = Probe()
    runtime = create_ditto(workers=[probe.worker()])
    results: dict[str, Any] = {}
    plan = graph("g").node("a", "PROBE.WORK", [], lambda i, d: work("in-graph", hold=True))
    async with anyio.create_task_group() as group:

        async def invoke() -> None:
            results["invoke"] = await runtime.invoke("PROBE.WORK", work("accepted", hold=True))

        async def run() -> None:
            results["run"] = await runtime.run(plan)

        group.start_soon(invoke)
        group.start_soon(run)
        await probe.started("accepted", "in-graph")
        await start_closing(group, runtime)
        assert results == {}  # close() waits on the accepted work
        probe.release("accepted", "in-graph")
        await runtime.close()  # a second close() returns when the first has
        # close() returned only after the accepted work finished, and before disposing.
        assert results["invoke"].ok
        assert results["run"].ok
        assert probe.disposed == 1
    assert sorted(probe.finished) == ["accepted", "in-graph"]


async def test_new_work_is_refused_once_closing_starts() -> None:
    probe = Probe()
    runtime = create_ditto(workers=[probe.worker()])
    async with anyio.create_task_group() as group:
        group.start_soon(runtime.invoke, "PROBE.WORK", work("accepted", hold=True))
        await probe.started("accepted")
        await start_closing(group, runtime)
        assert runtime.closed
        with pytest.raises(RuntimeClosedError):
            await runtime.invoke("PROBE.WORK", work("late"))
        with pytest.raises(RuntimeClosedError):
            await runtime.run(graph("g").node("a", "PROBE.WORK", [], lambda i, d: work("x")))
        with pytest.raises(RuntimeClosedError) as raised:
            runtime.register(probe.worker())
        assert raised.value.code == ErrorCode.RUNTIME_CLOSED
        probe.release("accepted")
    assert probe.calls == ["accepted"]


async def test_nested_invokes_of_accepted_work_still_run_during_the_drain() -> None:
    probe = Probe()
    entered, closing = anyio.Event(), anyio.Event()

    async def outer(request: Any, ctx: NodeContext) -> str:
        entered.set()
        await closing.wait()  # until close() has begun
        inner = await ctx.invoke("PROBE.WORK", work("nested"))
        return inner.status

    runtime = create_ditto(workers=[define_worker("outer", {"OUTER.RUN": outer}), probe.worker()])
    results: dict[str, Any] = {}
    async with anyio.create_task_group() as group:

        async def call() -> None:
            results["outer"] = await runtime.invoke("OUTER.RUN", {})

        group.start_soon(call)
        await entered.wait()
        await start_closing(group, runtime)
        closing.set()
        await runtime.close()
    assert results["outer"].unwrap() == "success"
    assert probe.finished == ["nested"]


async def test_close_is_idempotent_and_disposes_each_worker_once() -> None:
    probe = Probe()
    other = Probe()
    runtime = create_ditto(workers=[probe.worker()])
    runtime.register(other.worker(), replicas=3)
    await runtime.close()
    await runtime.close()
    async with runtime:  # the context manager closes again: still a no-op
        pass
    assert probe.disposed == 1
    assert other.disposed == 1  # three replicas of one definition: disposed once


async def test_one_definition_registered_twice_is_disposed_once() -> None:
    probe = Probe()
    definition = probe.worker()
    runtime = create_ditto(workers=[definition])
    runtime.register(definition, id="again")
    await runtime.close()
    assert probe.disposed == 1


async def test_every_cleanup_failure_is_reported_together() -> None:
    disposed: list[str] = []

    def make(name: str, fails: bool) -> Any:
        async def handler(request: Any, ctx: NodeContext) -> None:
            return None

        async def dispose() -> None:
            disposed.append(name)
            if fails:
                raise RuntimeError(f"{name} cleanup broke")

        return define_worker(name, {f"{name.upper()}.RUN": handler}, dispose=dispose)

    runtime = create_ditto(workers=[make("a", True), make("b", False), make("c", True)])
    with pytest.raises(WorkerCleanupError) as raised:
        await runtime.close()
    assert sorted(str(error) for error in raised.value.exceptions) == [
        "a cleanup broke",
        "c cleanup broke",
    ]
    assert raised.value.code == ErrorCode.WORKER_CLEANUP_FAILED
    assert sorted(disposed) == ["a", "b", "c"]  # one failure does not skip the others
    # Later calls share the outcome instead of disposing again.
    with pytest.raises(WorkerCleanupError):
        await runtime.close()
    assert sorted(disposed) == ["a", "b", "c"]


async def test_sync_dispose_is_supported() -> None:
    closed: list[bool] = []

    async def handler(request: Any, ctx: NodeContext) -> None:
        return None

    worker = define_worker("s", {"S.RUN": handler}, dispose=lambda: closed.append(True))
    async with create_ditto(workers=[worker]):
        pass
    assert closed == [True]


async def test_a_close_cancelled_while_draining_is_finished_by_the_next_close() -> None:
    probe = Probe()
    runtime = create_ditto(workers=[probe.worker()])
    async with anyio.create_task_group() as group:
        group.start_soon(runtime.invoke, "PROBE.WORK", work("slow", hold=True))
        await probe.started("slow")
        async with anyio.create_task_group() as closing:
            await start_closing(closing, runtime)
            closing.cancel_scope.cancel()  # while it waits on the drain
        assert probe.disposed == 0  # nothing disposed under a running handler
        probe.release("slow")
        await runtime.close()
    assert probe.disposed == 1
    assert probe.finished == ["slow"]


async def test_a_refused_registration_leaves_nothing_behind() -> None:
    async def a(request: int, ctx: NodeContext) -> int:
        return request

    async def b_int(request: int, ctx: NodeContext) -> int:
        return request

    async def b_str(request: str, ctx: NodeContext) -> str:
        return request

    async with create_ditto(workers=[define_worker("first", {"T.B": b_int})]) as runtime:
        with pytest.raises(WorkerDefinitionError, match="another contract") as raised:
            runtime.register(define_worker("clash", {"T.A": a, "T.B": b_str}))
        assert raised.value.code == ErrorCode.INVALID_WORKER
        assert "T.A" not in runtime.node_types
        runtime.register(define_worker("fine", {"T.A": b_str}))  # T.A is still free
        assert "T.A" in runtime.node_types
