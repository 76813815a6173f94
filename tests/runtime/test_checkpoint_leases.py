"""A run holds its checkpoint's lease: a second run or resume of the same checkpoint gets
``CHECKPOINT_BUSY`` (or waits with ``wait=``) instead of running every unfinished task again,
and a run that stalled past its lease writes nothing over the run that took it over."""

from __future__ import annotations

from collections import Counter
from typing import Any

import anyio
import anyio.lowlevel
import pytest

from ditto import DittoError, ErrorCode, InvalidInputError, NodeContext, define_worker, graph, loop
from ditto.runtime import Ditto
from ditto.runtime.checkpoints import InProcessCheckpointStore
from ditto.runtime.limits import RuntimeLimits

pytestmark = pytest.mark.anyio


class Clock:
    """The store's clock, moved by the test: a lease expires without anyone sleeping."""

    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


class Effects:
    """Side effects counted by ``ctx.idempotency_key``; ``W.GATE`` waits for :attr:`gate`."""

    def __init__(self) -> None:
        self.by_key: Counter[str] = Counter()
        self.gate = anyio.Event()
        self.entered = anyio.Event()

    def worker(self) -> Any:
        async def effect(value: Any, ctx: NodeContext) -> Any:
            await anyio.lowlevel.checkpoint()
            self.by_key[ctx.idempotency_key] += 1
            return value

        async def gate(value: Any, ctx: NodeContext) -> Any:
            self.entered.set()
            await self.gate.wait()
            self.by_key[ctx.idempotency_key] += 1
            return value

        return define_worker("w", {"W.EFFECT": effect, "W.GATE": gate})


def chain(length: int, gate_at: int | None = None) -> Any:
    plan = graph("leased")
    for step in range(length):
        node_type = "W.GATE" if step == gate_at else "W.EFFECT"
        deps = [f"t{step - 1}"] if step else []
        plan = plan.node(f"t{step}", node_type, deps, lambda i, d, step=step: step)
    return plan


def runtime(effects: Effects, store: InProcessCheckpointStore, lease_ms: int = 15_000) -> Ditto:
    rt = Ditto(RuntimeLimits(checkpoint_lease_ms=lease_ms), checkpoints=store)
    rt.register(effects.worker())
    return rt


async def busy(call: Any) -> DittoError:
    with pytest.raises(DittoError) as raised:
        await call
    assert raised.value.code == ErrorCode.CHECKPOINT_BUSY
    return raised.value


async def test_a_second_run_of_a_running_checkpoint_is_busy_naming_the_holder() -> None:
    effects = Effects()
    plan = chain(3, gate_at=1)
    async with runtime(effects, InProcessCheckpointStore()) as rt, anyio.create_task_group() as tg:
        tg.start_soon(lambda: rt.run(plan, None, checkpoint="job"))
        await effects.entered.wait()
        refused = await busy(rt.run(plan, None, checkpoint="job"))
        assert refused.retryable
        assert refused.details is not None
        assert refused.details["holder"]
        assert 0 < refused.details["expires_in"] <= 15
        await busy(rt.resume("job", plan=plan))
        effects.gate.set()
    assert sorted(effects.by_key.values()) == [1, 1, 1]


async def test_two_resumes_at_once_run_every_unfinished_task_once() -> None:
    """The issue's case: a run abandoned mid-way, then two resumes at the same time."""
    effects = Effects()
    plan = chain(40, gate_at=20)
    store = InProcessCheckpointStore()
    async with runtime(effects, store) as rt:
        with anyio.move_on_after(1):  # t20 waits for the gate: the run is abandoned (a crash)
            await rt.run(plan, None, checkpoint="job")
        assert sum(effects.by_key.values()) == 20
        # The abandoned run gave its lease up when it was cancelled.
        effects.gate.set()
        results: list[Any] = []

        async def resume() -> None:
            try:
                results.append(await rt.resume("job", plan=plan))
            except DittoError as exc:
                results.append(exc)

        async with anyio.create_task_group() as tg:
            tg.start_soon(resume)
            tg.start_soon(resume)
    done = [r for r in results if not isinstance(r, DittoError)]
    refused = [r for r in results if isinstance(r, DittoError)]
    assert len(done) == 1
    assert done[0].ok
    assert [error.code for error in refused] == [ErrorCode.CHECKPOINT_BUSY]
    assert len(effects.by_key) == 40
    assert set(effects.by_key.values()) == {1}


async def test_with_wait_the_second_resume_waits_and_gets_the_stored_result() -> None:
    effects = Effects()
    plan = chain(10, gate_at=5)
    async with runtime(effects, InProcessCheckpointStore()) as rt:
        results: list[Any] = []

        async def resume_when_running() -> None:
            await effects.entered.wait()
            results.append(await rt.resume("job", plan=plan, wait=30))

        async with anyio.create_task_group() as tg:
            tg.start_soon(resume_when_running)
            tg.start_soon(lambda: rt.run(plan, None, checkpoint="job"))
            await effects.entered.wait()
            await anyio.sleep(0.05)  # the resume is waiting for the lease now
            effects.gate.set()
    (second,) = results
    assert second.ok
    assert len(second) == 10
    assert set(effects.by_key.values()) == {1}
    assert len(effects.by_key) == 10


async def test_a_run_that_stalled_past_its_lease_writes_nothing_over_the_new_holder() -> None:
    clock = Clock()
    effects = Effects()
    plan = chain(4, gate_at=1)
    store = InProcessCheckpointStore(clock=clock)
    async with runtime(effects, store, lease_ms=60_000) as rt:
        stale: list[BaseException] = []

        async def first_run() -> None:
            try:
                await rt.run(plan, None, checkpoint="job")
            except DittoError as exc:
                stale.append(exc)

        async with anyio.create_task_group() as tg:
            tg.start_soon(first_run)
            await effects.entered.wait()
            clock.now += 61  # the first run's lease lapses (its renewal is 20 s away)
            # The second run takes over: it has t0 from the checkpoint, and would run t1 on:
            # let it through the gate, and the first run's t1 with it.
            effects.gate.set()
            second = await rt.run(plan, None, checkpoint="job")
        assert second.ok
        (error,) = stale
        assert isinstance(error, DittoError)
        assert error.code == ErrorCode.CHECKPOINT_LEASE_LOST
        stored = await store.load("job")
        assert stored is not None
        # t1's record is there once (from the holder that finished), and the stale run's t1
        # never landed: nothing beyond what the new holder wrote.
        assert [key for key, _ in stored.records].count("t1") == 1
        again = await rt.resume("job", plan=plan)
        assert again.ok


async def test_a_long_run_keeps_its_lease_renewed() -> None:
    """A lease of 0.3 s on a run of about a second: renewed every 0.1 s, never lost."""
    effects = Effects()
    plan = chain(3, gate_at=1)
    store = InProcessCheckpointStore()
    async with runtime(effects, store, lease_ms=300) as rt, anyio.create_task_group() as tg:
        tg.start_soon(lambda: rt.run(plan, None, checkpoint="job"))
        await effects.entered.wait()
        for _ in range(5):
            await anyio.sleep(0.2)
            await busy(rt.resume("job", plan=plan))
        effects.gate.set()
    assert set(effects.by_key.values()) == {1}


async def test_the_lease_is_given_up_at_the_end_at_an_interrupt_and_on_failure() -> None:
    async def ask(value: Any, ctx: NodeContext) -> Any:
        return ctx.interrupt("go?")

    async def echo(value: Any, ctx: NodeContext) -> Any:
        return value

    store = InProcessCheckpointStore()
    rt = Ditto(checkpoints=store)
    rt.register(define_worker("w", {"W.ASK": ask, "W.ECHO": echo}))
    asking = graph("ask").node("a", "W.ASK", [], lambda i, d: None)
    plain = graph("plain").node("a", "W.ECHO", [], lambda i, d: 1)

    def boom(i: Any, d: Any) -> Any:
        raise RuntimeError("binder")

    failing = graph("failing").node("a", "W.ECHO", [], boom)
    async with rt:
        assert (await rt.run(plain, None, checkpoint="done")).ok
        assert (await rt.run(plain, None, checkpoint="done")).ok  # completed: no lease kept
        interrupted = await rt.run(asking, None, checkpoint="asked")
        assert interrupted.status == "interrupted"
        answered = await rt.resume("asked", "yes", plan=asking)
        assert answered.ok
        with pytest.raises(Exception, match="binder"):
            await rt.run(failing, None, checkpoint="failed")
        # Nothing holds any of them: each lease can be taken at once.
        for checkpoint_id in ("done", "asked", "failed"):
            lease = await store.acquire(checkpoint_id, "probe", 5)
            await store.release(lease)


async def test_a_checkpointed_loop_holds_its_lease_for_the_whole_loop() -> None:
    effects = Effects()
    step = graph("step").node("g", "W.GATE", [], lambda i, d: i)
    definition = loop(graph=step, update=lambda s, run: s + 1, done=lambda s, run: s >= 2)
    async with runtime(effects, InProcessCheckpointStore()) as rt:
        async with anyio.create_task_group() as tg:
            tg.start_soon(lambda: rt.loop(definition, 0, checkpoint="loop-1"))
            await effects.entered.wait()
            await busy(rt.loop(definition, 0, checkpoint="loop-1"))
            effects.gate.set()
        assert await rt.loop(definition, 0, checkpoint="loop-1") == 2  # finished, released


async def test_a_stream_holds_the_lease_until_it_is_left() -> None:
    effects = Effects()
    plan = chain(2, gate_at=0)
    store = InProcessCheckpointStore()
    async with runtime(effects, store) as rt:
        async with rt.stream(plan, None, checkpoint="streamed"):
            await effects.entered.wait()
            await busy(rt.run(plan, None, checkpoint="streamed"))
        # Left early: the run was cancelled and its lease given up.
        lease = await store.acquire("streamed", "probe", 5)
        await store.release(lease)


@pytest.mark.parametrize("wait", [-1, float("nan"), "5", True])
async def test_a_bad_wait_is_invalid_input_before_anything_runs(wait: Any) -> None:
    effects = Effects()
    plan = chain(1)
    async with runtime(effects, InProcessCheckpointStore()) as rt:
        with pytest.raises(InvalidInputError, match="wait"):
            await rt.run(plan, None, checkpoint="job", wait=wait)
        with pytest.raises(InvalidInputError, match="wait"):
            await rt.resume("job", plan=plan, wait=wait)
    assert not effects.by_key
