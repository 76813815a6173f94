"""Routing: round-robin per node type, fail-fast on capacity, pinning without fallback."""

from __future__ import annotations

from functools import partial

import anyio
import pytest

from ditto import (
    ErrorCode,
    NodeSpec,
    UnknownWorkerError,
    WorkerDefinitionError,
    create_ditto,
    define_worker,
)
from tests.runtime.probes import Probe, work

pytestmark = pytest.mark.anyio


async def test_calls_rotate_round_robin_over_replicas() -> None:
    probe = Probe()
    async with create_ditto() as runtime:
        handle = runtime.register(probe.worker(), replicas=3, id="p")
        assert handle.ids == ("p-1", "p-2", "p-3")
        workers = [(await runtime.invoke("PROBE.WORK", work(str(n)))).worker_id for n in range(6)]
    assert workers == ["p-1", "p-2", "p-3", "p-1", "p-2", "p-3"]


async def test_round_robin_is_kept_per_node_type() -> None:
    probe = Probe()

    async def other(request: object, ctx: object) -> None:
        return None

    worker = define_worker("two", {"PROBE.WORK": probe.work, "OTHER.WORK": other})
    async with create_ditto() as runtime:
        runtime.register(worker, replicas=2, id="w")
        first = await runtime.invoke("PROBE.WORK", work("a"))
        other_result = await runtime.invoke("OTHER.WORK", {})
        second = await runtime.invoke("PROBE.WORK", work("b"))
    assert (first.worker_id, other_result.worker_id, second.worker_id) == ("w-1", "w-1", "w-2")


async def test_busy_replicas_spill_over_and_full_capacity_fails_at_once() -> None:
    probe = Probe()
    async with create_ditto() as runtime:
        runtime.register(probe.worker(concurrency=1), replicas=2, id="p")
        results = {}
        async with anyio.create_task_group() as group:

            async def call(name: str) -> None:
                results[name] = await runtime.invoke("PROBE.WORK", work(name, hold=True))

            group.start_soon(call, "long-1")
            await probe.started("long-1")
            group.start_soon(call, "long-2")
            await probe.started("long-2")
            with anyio.fail_after(0.1):  # fails fast: no waiting for capacity
                rejected = await runtime.invoke("PROBE.WORK", work("third"))
            probe.release("long-1", "long-2")
    assert {results["long-1"].worker_id, results["long-2"].worker_id} == {"p-1", "p-2"}
    assert rejected.status == "failed"
    assert rejected.error is not None
    assert rejected.error.code == ErrorCode.NO_WORKER_AVAILABLE
    assert rejected.error.retryable
    assert "third" not in probe.calls


async def test_pinned_worker_is_honoured_with_no_fallback() -> None:
    probe = Probe()
    async with create_ditto() as runtime:
        runtime.register(probe.worker(concurrency=1), replicas=2, id="p")
        pinned = await runtime.invoke("PROBE.WORK", work("a"), worker="p-2")
        assert pinned.worker_id == "p-2"
        async with anyio.create_task_group() as group:
            hold = partial(runtime.invoke, "PROBE.WORK", work("hold", hold=True), worker="p-2")
            group.start_soon(hold)
            await probe.started("hold")
            busy = await runtime.invoke("PROBE.WORK", work("b"), worker="p-2")
            probe.release("hold")
    assert busy.error is not None
    assert busy.error.code == ErrorCode.NO_WORKER_AVAILABLE  # p-1 was free: no fallback
    assert "b" not in probe.calls


async def test_pin_to_an_unknown_worker_raises() -> None:
    probe = Probe()
    async with create_ditto(workers=[probe.worker()]) as runtime:
        with pytest.raises(UnknownWorkerError):
            await runtime.invoke("PROBE.WORK", work("a"), worker="ghost")


async def test_paused_replicas_are_skipped_and_all_paused_is_no_worker() -> None:
    probe = Probe()
    async with create_ditto() as runtime:
        first = runtime.register(probe.worker(), id="first")
        runtime.register(probe.worker(), id="second")
        first.set_available(False)
        results = [await runtime.invoke("PROBE.WORK", work(str(n))) for n in range(3)]
        assert {result.worker_id for result in results} == {"second"}
        for info in runtime.workers():
            assert info.available == (info.id == "second")


async def test_all_replicas_paused_gives_no_worker_available() -> None:
    probe = Probe()
    async with create_ditto() as runtime:
        runtime.register(probe.worker(), replicas=2).set_available(False)
        result = await runtime.invoke("PROBE.WORK", work("a"))
    assert result.error is not None
    assert result.error.code == ErrorCode.NO_WORKER_AVAILABLE


async def test_registration_errors() -> None:
    probe = Probe()
    async with create_ditto() as runtime:
        runtime.register(probe.worker(), id="same")
        with pytest.raises(WorkerDefinitionError, match="already registered"):
            runtime.register(probe.worker(), id="same")
        with pytest.raises(WorkerDefinitionError):
            runtime.register(probe.worker(), replicas=0)

        async def different(request: int, ctx: object) -> int:
            return request

        clash = define_worker("clash", {"PROBE.WORK": different})
        with pytest.raises(WorkerDefinitionError, match="another contract"):
            runtime.register(clash)
        assert [info.id for info in runtime.workers()] == ["same"]


def test_worker_definitions_are_validated() -> None:
    async def handler(request: object, ctx: object) -> None:
        return None

    def sync_handler(request: object, ctx: object) -> None:
        return None

    with pytest.raises(WorkerDefinitionError):
        define_worker("", {"A.B": handler})
    with pytest.raises(WorkerDefinitionError):
        define_worker("w", {})
    with pytest.raises(WorkerDefinitionError, match="invalid node type"):
        define_worker("w", {"lower.case": handler})
    define_worker("w", {"A.B": sync_handler})  # a plain function runs on a thread
    with pytest.raises(WorkerDefinitionError, match="plain module-level function"):
        define_worker("w", {"A.B": NodeSpec(handler, cpu_bound=True)})
    with pytest.raises(WorkerDefinitionError, match="function"):
        define_worker("w", {"A.B": "not callable"})  # type: ignore[dict-item]
    with pytest.raises(WorkerDefinitionError, match="concurrency"):
        define_worker("w", {"A.B": handler}, concurrency=0)
