"""OpenTelemetry spans (``runtime.tracing``): a run, each task under it, each checkpoint write,
recorded by the SDK's in-memory exporter; none at all when tracing is off."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

otel_sdk = pytest.importorskip("opentelemetry.sdk.trace", reason="the otel extra is not installed")

from opentelemetry import trace  # noqa: E402
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (  # noqa: E402
    InMemorySpanExporter,
)

from ditto import NodeContext, define_worker, graph  # noqa: E402
from ditto.errors import DittoError  # noqa: E402
from ditto.runtime import Ditto  # noqa: E402
from ditto.runtime.limits import RuntimeLimits  # noqa: E402

pytestmark = pytest.mark.anyio

_EXPORTER = InMemorySpanExporter()


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    """The global tracer provider (set once per process, as an application does), its spans
    cleared around each test."""
    if not isinstance(trace.get_tracer_provider(), otel_sdk.TracerProvider):
        provider = otel_sdk.TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(_EXPORTER))
        trace.set_tracer_provider(provider)
    _EXPORTER.clear()
    yield _EXPORTER
    _EXPORTER.clear()


async def _echo(value: Any, ctx: NodeContext) -> Any:
    return value


async def _fail(value: Any, ctx: NodeContext) -> Any:
    raise DittoError("no", code="W_FAILED")


WORKER = define_worker("w", {"W.ECHO": _echo, "W.FAIL": _fail})
PLAN = (
    graph("traced")
    .node("a", "W.ECHO", [], lambda i, d: 1)
    .node("b", "W.FAIL", ["a"], lambda i, d: 2)
)


def traced_runtime(enabled: bool = True) -> Ditto:
    runtime = Ditto(RuntimeLimits(tracing=enabled))
    runtime.register(WORKER)
    return runtime


async def test_a_run_is_a_span_with_a_child_per_task_and_per_checkpoint_write(
    spans: InMemorySpanExporter,
) -> None:
    async with traced_runtime() as runtime:
        result = await runtime.run(PLAN, None, checkpoint="job-1", principal="ann")
    by_name = {span.name: span for span in spans.get_finished_spans()}
    run = by_name["ditto.run traced"]
    assert run.attributes is not None
    assert run.attributes["ditto.run_id"] == result.run_id
    assert run.attributes["ditto.checkpoint_id"] == "job-1"
    assert run.attributes["ditto.principal"] == "ann"
    assert run.attributes["ditto.status"] == result.status
    echo, fail = by_name["ditto.task W.ECHO"], by_name["ditto.task W.FAIL"]
    for task, task_id in ((echo, "a"), (fail, "b")):
        assert task.parent is not None
        assert task.parent.span_id == run.context.span_id
        assert task.attributes is not None
        assert task.attributes["ditto.task_id"] == task_id
        assert task.attributes["ditto.run_id"] == result.run_id
        assert task.attributes["ditto.principal"] == "ann"
    assert echo.attributes is not None
    assert echo.attributes["ditto.status"] == "success"
    assert fail.attributes is not None
    assert fail.attributes["ditto.error_code"] == "W_FAILED"
    assert not fail.status.is_ok
    appends = [
        span for span in spans.get_finished_spans() if span.name == "ditto.checkpoint.append"
    ]
    assert len(appends) == 2, "one record per finished task"
    assert all(span.parent is not None for span in appends)
    names = {span.name for span in spans.get_finished_spans()}
    assert {"ditto.checkpoint.acquire", "ditto.checkpoint.save"} <= names


async def test_a_retried_task_shows_each_earlier_attempt_as_an_event(
    spans: InMemorySpanExporter,
) -> None:
    from ditto import RetryPolicy

    failures = [2]

    async def flaky(value: Any, ctx: NodeContext) -> Any:
        if failures[0]:
            failures[0] -= 1
            raise DittoError("later", code="STORE_UNAVAILABLE", retryable=True)
        return value

    policy = RetryPolicy(max_attempts=3, initial=0.001, jitter=False)
    plan = graph("flaky").node("f", "W.FLAKY", [], lambda i, d: 1, retry=policy)
    runtime = Ditto(RuntimeLimits(tracing=True))
    runtime.register(define_worker("flaky", {"W.FLAKY": flaky}))
    async with runtime:
        assert (await runtime.run(plan, None)).ok
    (task,) = [span for span in spans.get_finished_spans() if span.name == "ditto.task W.FLAKY"]
    assert task.attributes is not None
    assert task.attributes["ditto.attempts"] == 3
    events = [event for event in task.events if event.name == "ditto.attempt"]
    assert [event.attributes["ditto.attempt"] for event in events if event.attributes] == [1, 2]
    assert all(
        event.attributes and event.attributes["ditto.error_code"] == "STORE_UNAVAILABLE"
        for event in events
    )


async def test_no_span_when_tracing_is_off(spans: InMemorySpanExporter) -> None:
    async with traced_runtime(enabled=False) as runtime:
        assert (await runtime.run(PLAN, None, checkpoint="job-2")).status == "completed"
    assert spans.get_finished_spans() == ()


def test_a_remote_results_queue_and_run_time_are_on_its_span(spans: InMemorySpanExporter) -> None:
    from ditto import NodeResult
    from ditto.runtime.tracing import end_span

    remote = NodeResult("e-1", "W.ECHO", "success", 1, None, "w-9", 5.0, queue_ms=1.5, run_ms=2.5)
    with trace.get_tracer("test").start_as_current_span("hop") as span:
        end_span(span, remote)
    (hop,) = spans.get_finished_spans()
    assert hop.attributes is not None
    assert hop.attributes["ditto.queue_ms"] == 1.5
    assert hop.attributes["ditto.run_ms"] == 2.5
    assert hop.attributes["ditto.worker_id"] == "w-9"
