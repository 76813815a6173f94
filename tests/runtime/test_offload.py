"""Handlers that must not block the event loop: plain functions run on threads, CPU-bound nodes
in a process pool; a late result is a timeout; a loop-stall watchdog names the culprit."""

from __future__ import annotations

import logging
import threading
import time

import anyio
import pytest

from ditto import NodeContext, NodeSpec, create_ditto, define_worker
from ditto.app.config.settings import RuntimeSettings, Settings
from tests.runtime.offload_handlers import cpu_double, cpu_forever

pytestmark = pytest.mark.anyio


def blocking_sleep(request: float, ctx: NodeContext) -> str:
    """A plain function that blocks for ``request`` seconds (a thread keeps the loop free)."""
    time.sleep(request)
    return threading.current_thread().name


async def quick(request: int, ctx: NodeContext) -> int:
    await anyio.sleep(0.05)
    return request


async def test_a_plain_function_runs_on_a_thread_and_blocks_no_one() -> None:
    worker = define_worker("slow", {"SLOW.SLEEP": blocking_sleep, "SLOW.QUICK": quick})
    results = {}
    async with create_ditto(workers=[worker]) as runtime:

        async def slow() -> None:
            results["slow"] = await runtime.invoke("SLOW.SLEEP", 2.0, timeout=0.2)

        async def innocent() -> None:
            results["quick"] = await runtime.invoke("SLOW.QUICK", 7, timeout=1.0)

        async with anyio.create_task_group() as group:
            group.start_soon(slow)
            group.start_soon(innocent)
        threaded = await runtime.invoke("SLOW.SLEEP", 0.0)
    assert results["slow"].status == "timeout"  # at its deadline, not after 2 s of work
    assert results["quick"].unwrap() == 7  # the concurrent call never noticed
    assert threaded.unwrap() != threading.current_thread().name


async def test_a_result_that_arrives_after_its_deadline_is_a_timeout() -> None:
    async def hog(request: float, ctx: NodeContext) -> str:
        time.sleep(request)  # noqa: ASYNC251 - blocking the loop is what this test is about
        return "done"

    worker = define_worker("hog", {"HOG.RUN": hog})
    async with create_ditto(workers=[worker]) as runtime:
        late = await runtime.invoke("HOG.RUN", 0.3, timeout=0.1)
        in_time = await runtime.invoke("HOG.RUN", 0.0, timeout=1.0)
    assert late.status == "timeout"
    assert in_time.unwrap() == "done"


async def test_a_cpu_bound_node_runs_in_a_process_pool() -> None:
    worker = define_worker(
        "cpu",
        {
            "CPU.DOUBLE": NodeSpec(cpu_double, int, int, cpu_bound=True),
            "CPU.FOREVER": NodeSpec(cpu_forever, int, int, cpu_bound=True),
        },
        concurrency=2,
    )
    async with create_ditto(workers=[worker]) as runtime:
        doubled = await runtime.invoke("CPU.DOUBLE", 21)
        wrong = await runtime.invoke("CPU.DOUBLE", "21")
        stuck = await runtime.invoke("CPU.FOREVER", 1, timeout=0.2)
    assert doubled.unwrap() == 42
    assert wrong.error is not None
    assert wrong.error.code == "INVALID_INPUT"  # validated here, before any process sees it
    assert stuck.status == "timeout"


async def test_the_watchdog_names_the_handler_that_blocks_the_loop(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def hog(request: float, ctx: NodeContext) -> str:
        time.sleep(request)  # noqa: ASYNC251 - the stall the watchdog must see
        return "done"

    settings = Settings(runtime=RuntimeSettings(stall_warning_ms=50))
    worker = define_worker("hog", {"HOG.RUN": hog})
    with caplog.at_level(logging.WARNING, logger="ditto.runtime.watchdog"):
        async with create_ditto(config=settings, workers=[worker]) as runtime:
            await runtime.invoke("HOG.RUN", 0.4)
            await anyio.sleep(0.05)  # the loop beats again: the stall's length is logged
    messages = [record.getMessage() for record in caplog.records]
    assert any("HOG.RUN" in m and "has been blocked" in m and "hog" in m for m in messages)
    assert any(m.startswith("the event loop was blocked for") for m in messages)


def test_a_stopped_watchdog_keeps_no_finished_loop_alive() -> None:
    """A runtime object that outlives its event loop (kept by the application) must not keep
    the loop alive through its watchdog."""
    import asyncio
    import gc
    import weakref

    from ditto.runtime.watchdog import LoopWatchdog

    watchdog = LoopWatchdog(60.0, dict)

    async def watch() -> None:
        watchdog.start()
        watchdog.stop()

    loop = asyncio.new_event_loop()
    loop.run_until_complete(watch())
    loop.close()
    gone = weakref.ref(loop)
    del loop
    gc.collect()
    assert gone() is None


async def test_an_idle_loop_whose_beat_is_late_is_not_reported_as_blocked(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """On a busy machine the loop thread may not be scheduled in time while it waits in its
    selector: its heartbeat is late, yet nothing blocks it. The watchdog must not blame code
    (it used to report ``selectors.py`` and advise changing a handler)."""
    from time import monotonic

    from ditto.runtime.watchdog import LoopWatchdog

    watchdog = LoopWatchdog(0.05, dict)
    with caplog.at_level(logging.WARNING, logger="ditto.runtime.watchdog"):
        watchdog.start()
        try:
            # Silence the loop's own beat and make it look late, while the loop idles in its
            # selector for many of the watchdog's checks.
            assert watchdog._timer is not None
            watchdog._timer.cancel()
            watchdog._beat = monotonic() - 10
            await anyio.sleep(0.5)
        finally:
            watchdog.stop()
    assert [record.getMessage() for record in caplog.records] == []


async def test_code_outside_a_handler_is_named_without_advice_about_handlers(
    caplog: pytest.LogCaptureFixture,
) -> None:
    from ditto.runtime.watchdog import LoopWatchdog

    watchdog = LoopWatchdog(0.05, dict)
    with caplog.at_level(logging.WARNING, logger="ditto.runtime.watchdog"):
        watchdog.start()
        try:
            time.sleep(0.4)  # noqa: ASYNC251 - the stall the watchdog must see
            await anyio.sleep(0.05)
        finally:
            watchdog.stop()
    blocked = [m for m in (r.getMessage() for r in caplog.records) if "has been blocked" in m]
    assert blocked, caplog.records
    assert all("code outside any handler" in m and "plain def" not in m for m in blocked)
