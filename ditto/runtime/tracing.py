"""OpenTelemetry spans of a runtime, when ``runtime.tracing`` asks for them.

Off by default, and then nothing of OpenTelemetry is imported and the hot path pays one
``is None`` test per task: a span costs microseconds, a no-op node about twenty. On, the
runtime takes its tracer from the global tracer provider (``opentelemetry.trace``), as
instrumented libraries do, so spans go wherever the application's OpenTelemetry set-up sends
them. Spans and their attributes (all under ``ditto.``):

* ``ditto.run <graph>``: ``graph_id``, ``run_id``, ``checkpoint_id``, ``principal``,
  ``tasks``, then ``status``;
* ``ditto.task <node type>``: ``run_id``, ``task_id``, ``node_type``, ``principal``, then
  ``status``, ``worker_id``, ``attempts``, ``error_code``, for a remote call ``queue_ms`` and
  ``run_ms`` (its wait in the stream, its time on the worker), and an event ``ditto.attempt``
  per retried attempt (its execution id, status, error code, duration and the pause after it);
* ``ditto.checkpoint.<operation>``: ``checkpoint_id``, and ``records`` for an append.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version
from typing import TYPE_CHECKING, Any

from ditto.errors import DittoError, ErrorCode
from ditto.extras import DISTRIBUTION, install_hint

if TYPE_CHECKING:
    from opentelemetry.trace import Span, Tracer

    from ditto.contracts.result import NodeResult

__all__ = ("end_span", "runtime_tracer")

TRACER_NAME = "ditto"


def runtime_tracer(enabled: bool) -> Tracer | None:
    """The tracer a runtime records its spans with, or ``None`` when tracing is off.

    Raises:
        DittoError: ``INVALID_CONFIG`` when tracing is on and OpenTelemetry is not installed
            (the message names the command that installs it).
    """
    if not enabled:
        return None
    try:
        from opentelemetry import trace
    except ImportError as exc:
        raise DittoError(
            f"runtime.tracing is on but OpenTelemetry is not installed: {install_hint('otel')}",
            code=ErrorCode.INVALID_CONFIG,
        ) from exc
    return trace.get_tracer(TRACER_NAME, _version())


def _version() -> str:
    try:
        return version(DISTRIBUTION)
    except PackageNotFoundError:  # a bare source tree
        return "0+unknown"


def end_span(span: Span, result: NodeResult[Any]) -> None:
    """Put a node's outcome on its span: status, replica, attempts, and the error code of a
    result that is not a success (which also marks the span as an error)."""
    span.set_attribute("ditto.status", result.status)
    if result.worker_id is not None:
        span.set_attribute("ditto.worker_id", result.worker_id)
    span.set_attribute("ditto.attempts", result.attempts)
    if result.queue_ms is not None:  # a remote hop: its wait in the stream, its run there
        span.set_attribute("ditto.queue_ms", result.queue_ms)
    if result.run_ms is not None:
        span.set_attribute("ditto.run_ms", result.run_ms)
    for number, earlier in enumerate(result.retries, start=1):
        # One event per attempt that was retried: when it ended, how, and the pause after it.
        attributes: dict[str, str | float | int] = {
            "ditto.attempt": number,
            "ditto.execution_id": earlier.execution_id,
            "ditto.status": earlier.status,
            "ditto.duration_ms": earlier.duration_ms,
            "ditto.delay_ms": earlier.delay_ms,
            "ditto.error_code": earlier.error.code,
        }
        span.add_event("ditto.attempt", attributes)
    error = result.error
    if error is not None:
        from opentelemetry.trace import Status, StatusCode

        span.set_attribute("ditto.error_code", error.code)
        span.set_status(Status(StatusCode.ERROR, error.code))
