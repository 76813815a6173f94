"""``runtime.invoke``: input validation, error mapping, timeouts and cancellation."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import anyio
import msgspec
import pytest

from ditto import (
    ConfigError,
    DittoError,
    ErrorCode,
    InvalidInputError,
    NodeContext,
    NodeFailedError,
    NodeSpec,
    RuntimeClosedError,
    Settings,
    UnknownNodeError,
    create_ditto,
    define_worker,
    graph,
)
from ditto.app.config.settings import RuntimeSettings
from tests.runtime.probes import Done, Probe, Work, work

pytestmark = pytest.mark.anyio


async def test_dict_input_is_converted_to_the_contract_struct() -> None:
    probe = Probe()
    async with create_ditto(workers=[probe.worker()]) as runtime:
        result = await runtime.invoke("PROBE.WORK", work("a"))
    assert result.ok
    assert result.unwrap() == Done("a", "probe-1")
    assert result.node == "PROBE.WORK"
    assert result.worker_id == "probe-1"
    assert result.duration_ms >= 0
    assert result.queue_ms is None  # a local call: no stream, no remote run time
    assert result.run_ms is None
    assert len(result.execution_id) == 36


async def test_struct_input_is_accepted_as_is() -> None:
    probe = Probe()
    async with create_ditto(workers=[probe.worker()]) as runtime:
        result = await runtime.invoke("PROBE.WORK", Work("b"))
    assert result.unwrap().name == "b"


@pytest.mark.parametrize(
    "bad_input",
    [
        {"delay": 1},  # missing required field
        {"name": 5},  # wrong type
        "not a mapping",
        None,
        Work(name=5),  # type: ignore[arg-type]  # a Struct built with a wrong field type
    ],
)
async def test_invalid_input_fails_without_calling_the_handler(bad_input: Any) -> None:
    probe = Probe()
    async with create_ditto(workers=[probe.worker()]) as runtime:
        result = await runtime.invoke("PROBE.WORK", bad_input)
    assert result.status == "failed"
    assert result.error is not None
    assert result.error.code == ErrorCode.INVALID_INPUT
    assert "PROBE.WORK" in result.error.message
    assert probe.calls == []


async def test_ditto_error_from_a_handler_keeps_its_code() -> None:
    probe = Probe()
    async with create_ditto(workers=[probe.worker()]) as runtime:
        result = await runtime.invoke("PROBE.WORK", work("x", fail_with="NOT_FOUND"))
    assert result.status == "failed"
    assert result.error is not None
    assert result.error.code == "NOT_FOUND"
    assert result.error.message == "x failed on purpose"
    with pytest.raises(NodeFailedError) as raised:
        result.unwrap()
    assert raised.value.code == "NOT_FOUND"
    assert raised.value.error == result.error


async def test_unexpected_exception_is_internal_error_with_a_generic_message(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def leaky(request: Any, ctx: NodeContext) -> None:
        raise RuntimeError("password=hunter2 at db.internal")

    worker = define_worker("leaky", {"LEAKY.RUN": leaky})
    with caplog.at_level(logging.ERROR, logger="ditto.runtime"):
        async with create_ditto(workers=[worker]) as runtime:
            result = await runtime.invoke("LEAKY.RUN", {})
    assert result.status == "failed"
    assert result.error is not None
    assert result.error.code == ErrorCode.INTERNAL_ERROR
    assert "hunter2" not in msgspec.json.encode(result).decode()
    # The traceback goes to the log for the operator, not into the result.
    assert any(
        record.exc_info and "hunter2" in str(record.exc_info[1]) for record in caplog.records
    )


async def test_output_off_contract_is_invalid_output() -> None:
    async def wrong(request: Any, ctx: NodeContext) -> Done:
        return {"name": 1}  # type: ignore[return-value]

    worker = define_worker("wrong", {"WRONG.RUN": wrong})
    async with create_ditto(workers=[worker]) as runtime:
        result = await runtime.invoke("WRONG.RUN", {})
    assert result.error is not None
    assert result.error.code == ErrorCode.INVALID_OUTPUT


async def test_dict_output_is_converted_to_the_output_struct() -> None:
    async def as_dict(request: Any, ctx: NodeContext) -> Done:
        return {"name": "n", "worker_id": ctx.worker_id}  # type: ignore[return-value]

    worker = define_worker("dicty", {"DICTY.RUN": as_dict})
    async with create_ditto(workers=[worker]) as runtime:
        result = await runtime.invoke("DICTY.RUN", {})
    assert result.unwrap() == Done("n", "dicty-1")


async def test_node_spec_gives_an_explicit_contract() -> None:
    async def handler(request, ctx):  # type: ignore[no-untyped-def]
        return {"name": request.name, "worker_id": ctx.worker_id}

    worker = define_worker(
        "spec", {"SPEC.RUN": NodeSpec(handler, input_type=Work, output_type=Done)}
    )
    async with create_ditto(workers=[worker]) as runtime:
        good = await runtime.invoke("SPEC.RUN", {"name": "s"})
        bad = await runtime.invoke("SPEC.RUN", {})
    assert good.unwrap() == Done("s", "spec-1")
    assert bad.error is not None
    assert bad.error.code == ErrorCode.INVALID_INPUT


async def test_timeout_gives_status_timeout_and_cancels_the_handler() -> None:
    probe = Probe()
    async with create_ditto(workers=[probe.worker()]) as runtime:
        result = await runtime.invoke("PROBE.WORK", work("slow", delay=5), timeout=0.05)
    assert result.status == "timeout"
    assert result.error is not None
    assert result.error.code == ErrorCode.TIMEOUT
    assert result.error.retryable
    assert probe.cancelled == ["slow"]
    assert probe.finished == []


async def test_a_handler_that_swallows_its_deadline_still_times_out_cleanly() -> None:
    async def stubborn(request: Any, ctx: NodeContext) -> str:
        try:
            await anyio.sleep(5)
        except asyncio.CancelledError:
            return "pretending all is well"
        return "finished"

    worker = define_worker("stubborn", {"STUBBORN.RUN": stubborn})
    async with create_ditto(workers=[worker]) as runtime:
        result = await runtime.invoke("STUBBORN.RUN", {}, timeout=0.05)
        task = asyncio.current_task()
        assert task is not None
        assert task.cancelling() == 0  # no stray cancellation left on the caller
        await anyio.sleep(0.01)  # and the caller keeps running normally
    assert result.status == "timeout"


async def test_timeout_inside_a_caller_cancel_scope_that_is_not_cancelled() -> None:
    probe = Probe()
    async with create_ditto(workers=[probe.worker()]) as runtime:
        with anyio.CancelScope() as outer:
            result = await runtime.invoke("PROBE.WORK", work("slow", delay=5), timeout=0.05)
        assert not outer.cancel_called
    assert result.status == "timeout"


async def test_configured_timeout_applies_when_the_call_sets_none() -> None:
    probe = Probe()
    settings = Settings(runtime=RuntimeSettings(timeout_ms=50))
    async with create_ditto(config=settings, workers=[probe.worker()]) as runtime:
        result = await runtime.invoke("PROBE.WORK", work("slow", delay=5))
    assert result.status == "timeout"


async def test_a_longer_call_or_task_timeout_cannot_extend_the_configured_one() -> None:
    seen: list[float | None] = []

    async def slow(request: Any, ctx: NodeContext) -> None:
        seen.append(ctx.remaining())
        await asyncio.sleep(5)

    worker = define_worker("slow", {"SLOW.RUN": slow})
    settings = Settings(runtime=RuntimeSettings(timeout_ms=100))
    plan = graph("long").node("t", "SLOW.RUN", [], lambda _, deps: {}, timeout=30)
    async with create_ditto(config=settings, workers=[worker]) as runtime:
        called = await runtime.invoke("SLOW.RUN", {}, timeout=30)
        ran = await runtime.run(plan, timeout=30)
    assert called.status == "timeout"
    assert ran["t"].status == "timeout"
    assert all(left is not None and left <= 0.1 for left in seen), seen


async def test_handler_sees_its_remaining_deadline() -> None:
    seen: list[float | None] = []

    async def look(request: Any, ctx: NodeContext) -> None:
        seen.append(ctx.remaining())

    worker = define_worker("look", {"LOOK.RUN": look})
    async with create_ditto(workers=[worker]) as runtime:
        await runtime.invoke("LOOK.RUN", {}, timeout=10)
    assert seen[0] is not None
    assert 9 < seen[0] <= 10


async def test_a_cancellation_raised_inside_the_node_is_status_cancelled() -> None:
    async def gives_up(request: Any, ctx: NodeContext) -> None:
        raise asyncio.CancelledError()

    worker = define_worker("quitter", {"QUITTER.RUN": gives_up})
    async with create_ditto(workers=[worker]) as runtime:
        result = await runtime.invoke("QUITTER.RUN", {})
    assert result.status == "cancelled"
    assert result.error is not None
    assert result.error.code == ErrorCode.CANCELLED


async def test_caller_cancellation_by_a_cancel_scope_propagates() -> None:
    probe = Probe()
    outcome: list[Any] = []
    async with create_ditto(workers=[probe.worker()]) as runtime:
        async with anyio.create_task_group() as group:
            scope = anyio.CancelScope()
            group.start_soon(probe.cancel_once_started, scope, "slow")
            with scope:
                outcome.append(await runtime.invoke("PROBE.WORK", work("slow", hold=True)))
        assert scope.cancelled_caught
        assert outcome == []  # never turned into a result
        assert probe.cancelled == ["slow"]
        assert runtime.workers()[0].active == 0


async def test_caller_task_cancel_propagates() -> None:
    probe = Probe()
    async with create_ditto(workers=[probe.worker()]) as runtime:
        task = asyncio.ensure_future(runtime.invoke("PROBE.WORK", work("slow", hold=True)))
        await probe.started("slow")
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert probe.cancelled == ["slow"]


async def test_unknown_node_type_raises() -> None:
    probe = Probe()
    async with create_ditto(workers=[probe.worker()]) as runtime:
        with pytest.raises(UnknownNodeError) as raised:
            await runtime.invoke("MEMORY.WRITE", {})
    assert raised.value.code == ErrorCode.UNKNOWN_NODE


@pytest.mark.parametrize("timeout", [0, -1, float("nan"), float("inf"), True, "1"])
async def test_invalid_timeout_is_rejected_before_any_call(timeout: Any) -> None:
    probe = Probe()
    async with create_ditto(workers=[probe.worker()]) as runtime:
        with pytest.raises(InvalidInputError):
            await runtime.invoke("PROBE.WORK", work("a"), timeout=timeout)
    assert probe.calls == []


async def test_principal_and_no_execution_scope_reach_the_handler() -> None:
    probe = Probe()
    async with create_ditto(workers=[probe.worker()]) as runtime:
        await runtime.invoke("PROBE.WORK", work("a"), principal="alice")
    ctx = probe.contexts[0]
    assert ctx.principal == "alice"
    assert ctx.execution is None
    assert ctx.node == "PROBE.WORK"


async def test_nested_invoke_inherits_principal_and_deadline() -> None:
    probe = Probe()
    seen: dict[str, Any] = {}

    async def outer(request: Any, ctx: NodeContext) -> None:
        seen["deadline"] = ctx.deadline
        seen["quick"] = await ctx.invoke("PROBE.WORK", work("quick"))
        # A longer timeout cannot extend the outer deadline.
        await ctx.invoke("PROBE.WORK", work("slow", delay=5), timeout=60)

    worker = define_worker("outer", {"OUTER.RUN": outer})
    async with create_ditto(workers=[worker, probe.worker()]) as runtime:
        result = await runtime.invoke("OUTER.RUN", {}, principal="bob", timeout=0.1)
    quick_ctx, slow_ctx = probe.contexts
    assert seen["quick"].ok
    assert quick_ctx.principal == slow_ctx.principal == "bob"
    assert quick_ctx.deadline == slow_ctx.deadline == seen["deadline"]
    assert probe.cancelled == ["slow"]
    assert result.status == "timeout"


async def test_closed_runtime_refuses_invoke() -> None:
    probe = Probe()
    runtime = create_ditto(workers=[probe.worker()])
    await runtime.close()
    with pytest.raises(RuntimeClosedError) as raised:
        await runtime.invoke("PROBE.WORK", work("late"))
    assert raised.value.code == ErrorCode.RUNTIME_CLOSED
    assert probe.calls == []


def test_errors_share_one_root() -> None:
    for error_type in (ConfigError, InvalidInputError, UnknownNodeError, RuntimeClosedError):
        assert issubclass(error_type, DittoError)


async def test_a_handler_that_swallows_the_callers_cancellation_still_propagates_it() -> None:
    swallowed: list[bool] = []
    entered = anyio.Event()

    async def stubborn(request: Any, ctx: NodeContext) -> str:
        entered.set()
        try:
            await anyio.sleep(5)
        except asyncio.CancelledError:
            swallowed.append(True)
            return "pretending all is well"
        return "finished"

    worker = define_worker("stubborn", {"STUBBORN.RUN": stubborn})
    async with create_ditto(workers=[worker]) as runtime:
        task = asyncio.ensure_future(runtime.invoke("STUBBORN.RUN", {}))
        await entered.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    assert swallowed == [True]


def test_deadline_wheels_do_not_keep_finished_loops_alive() -> None:
    import gc

    from ditto.runtime import deadlines

    async def one_call() -> None:
        async with create_ditto(workers=[Probe().worker()]) as runtime:
            await runtime.invoke("PROBE.WORK", work("a"))

    for _ in range(3):
        asyncio.run(one_call())
    gc.collect()
    assert not any(loop.is_closed() for loop in list(deadlines._wheels.keys()))
