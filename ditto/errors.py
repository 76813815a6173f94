"""Error codes, the error payload carried by results, and the exception tree.

Two channels, kept apart on purpose:

* A node's business failure travels as data: a ``NodeResult`` with ``status="failed"`` and an
  :class:`ErrorInfo`. Handlers raise :class:`DittoError` (or a subclass) and the runtime turns it
  into that payload; every other exception becomes ``INTERNAL_ERROR`` with a generic message.
* Misuse of the runtime itself (a closed runtime, a node type no worker implements, an invalid
  graph, a bad configuration) raises a :class:`DittoError` subclass at the call site.

Codes are a :class:`~enum.StrEnum`: their values are stable API, documented in the README table.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any

import msgspec

__all__ = (
    "ConfigError",
    "DittoError",
    "ErrorCode",
    "ErrorInfo",
    "GraphError",
    "Interrupt",
    "InvalidInputError",
    "NoWorkerAvailableError",
    "NodeFailedError",
    "RuntimeClosedError",
    "UnknownNodeError",
    "UnknownWorkerError",
    "WorkerCleanupError",
    "WorkerDefinitionError",
)


class ErrorCode(StrEnum):
    """Stable error codes of the runtime core.

    Workers add their own codes (``NOT_FOUND``, ``STATE_CONFLICT``, ...); an :class:`ErrorInfo`
    carries any UPPER_SNAKE string, so worker code sets stay open.
    """

    INVALID_INPUT = "INVALID_INPUT"
    """The node input does not match the node type's input contract; the handler was not called."""
    INVALID_OUTPUT = "INVALID_OUTPUT"
    """A handler returned a value that does not match the node type's output contract."""
    INVALID_GRAPH = "INVALID_GRAPH"
    """A graph was built or run with an empty/duplicate task id, an unknown dependency or a bad
    node type."""
    GRAPH_RUN_FAILED = "GRAPH_RUN_FAILED"
    """A binder raised while a graph ran; the partial result is attached to the exception."""
    UNKNOWN_NODE = "UNKNOWN_NODE"
    """No registered worker implements the node type."""
    UNKNOWN_WORKER = "UNKNOWN_WORKER"
    """A pinned worker id is not registered, or does not implement the node type."""
    NO_WORKER_AVAILABLE = "NO_WORKER_AVAILABLE"
    """Every replica that could run the node is paused or at its concurrency limit (retryable)."""
    INVALID_WORKER = "INVALID_WORKER"
    """A worker definition or registration is malformed (bad type, duplicate id, no handlers)."""
    TIMEOUT = "TIMEOUT"
    """The node's deadline passed before it finished."""
    CANCELLED = "CANCELLED"
    """The node was cancelled from inside (not by its caller, whose cancellation propagates)."""
    INTERNAL_ERROR = "INTERNAL_ERROR"
    """A handler raised an unexpected exception; details are in the log, not in the result."""
    RUNTIME_CLOSED = "RUNTIME_CLOSED"
    """The runtime is closing or closed and accepts no new work."""
    WORKER_CLEANUP_FAILED = "WORKER_CLEANUP_FAILED"
    """One or more worker ``dispose`` callbacks failed during ``close()``."""
    INVALID_CONFIG = "INVALID_CONFIG"
    """``ditto.yaml`` or the environment holds an unknown key, a wrong type, an out-of-range value
    or a secret where none belongs."""
    INTERRUPTED = "INTERRUPTED"
    """A handler raised :class:`Interrupt` to wait for a person; in a graph run the run pauses,
    checkpoints and returns ``status="interrupted"``; ``resume`` continues it."""
    LOOP_LIMIT_REACHED = "LOOP_LIMIT_REACHED"
    """A loop ran ``max_iterations`` graphs without ``done``."""
    LOOP_TIMEOUT = "LOOP_TIMEOUT"
    """A loop's ``timeout`` passed before it finished."""
    CHECKPOINT_NOT_FOUND = "CHECKPOINT_NOT_FOUND"
    """No checkpoint has this id."""
    CHECKPOINT_MISMATCH = "CHECKPOINT_MISMATCH"
    """The checkpoint belongs to another plan (tasks, dependencies or node types changed), another
    run input or another kind of run; resuming it would mix two runs."""
    CHECKPOINT_CORRUPT = "CHECKPOINT_CORRUPT"
    """A checkpoint's digest does not match its content (edited, truncated or tampered with)."""
    CHECKPOINT_STORE_UNAVAILABLE = "CHECKPOINT_STORE_UNAVAILABLE"
    """The checkpoint store could not be reached or failed (retryable)."""
    TRANSPORT_UNAVAILABLE = "TRANSPORT_UNAVAILABLE"
    """The transport to remote workers (Redis) cannot be reached or failed (retryable)."""
    QUEUE_FULL = "QUEUE_FULL"
    """Too many calls are already waiting (a remote node type's pending cap; retryable)."""
    MESSAGE_REJECTED = "MESSAGE_REJECTED"
    """A remote message was too large, unsigned, forged or malformed; it was not executed."""
    NOT_FOUND = "NOT_FOUND"
    """A record the operation needs does not exist."""
    CONFLICT = "CONFLICT"
    """The operation conflicts with the stored state (a different record under the same key, a
    stale version)."""


class ErrorInfo(msgspec.Struct, frozen=True):
    """The error payload of a failed, timed-out or cancelled ``NodeResult``."""

    code: str
    """Stable UPPER_SNAKE code, e.g. ``"INVALID_INPUT"``, ``"CONFLICT"``."""
    message: str
    """Safe to show: never a secret, never a raw driver message."""
    retryable: bool = False
    """True when the same call may succeed later without any change (capacity, a store outage)."""
    details: dict[str, Any] | None = None
    """Structured, safe extra facts (e.g. the path of the invalid input field)."""


class DittoError(Exception):
    """Root of every error the library raises.

    Args:
        message: Safe, human-readable description (shown to end users as is).
        code: Stable code; defaults to the class's ``default_code``.
        retryable: Whether the same call may succeed later unchanged.
        details: Safe structured facts about the failure.
    """

    default_code: str = ErrorCode.INTERNAL_ERROR

    def __init__(
        self,
        message: str,
        *,
        code: str | None = None,
        retryable: bool = False,
        details: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.code = str(code if code is not None else self.default_code)
        self.retryable = retryable
        self.details = details

    def to_info(self) -> ErrorInfo:
        """The :class:`ErrorInfo` a node result carries for this error."""
        return ErrorInfo(self.code, self.message, self.retryable, self.details)

    def __str__(self) -> str:
        return f"[{self.code}] {self.message}"


class InvalidInputError(DittoError):
    """Input (a node input, an argument) does not satisfy its contract."""

    default_code = ErrorCode.INVALID_INPUT


class Interrupt(DittoError):
    """Raised by a handler to pause its graph run until a person answers.

    The run admits no new task, lets started tasks finish, saves a checkpoint and returns a
    :class:`~ditto.runtime.results.RunResult` whose ``status`` is ``"interrupted"``, with this
    payload in ``interrupts``. ``runtime.resume(checkpoint_id, answer)`` runs the task again and
    its handler finds the answer in ``ctx.resume_value`` (``ctx.interrupt(payload)`` does both
    steps: it raises the first time and returns the answer on resume).

    Outside a graph run (a plain ``invoke``) the result is simply ``failed`` with code
    ``INTERRUPTED`` and the payload in ``error.details["payload"]``.

    Args:
        payload: What the person needs to decide (plain JSON: it is stored in the checkpoint).
        message: A short, safe description.
    """

    default_code = ErrorCode.INTERRUPTED

    def __init__(self, payload: Any = None, message: str = "waiting for an answer") -> None:
        super().__init__(message, details={"payload": payload})
        self.payload = payload


class GraphError(DittoError):
    """A graph is malformed; the message names the offending task."""

    default_code = ErrorCode.INVALID_GRAPH


class UnknownNodeError(DittoError):
    """No registered worker implements the node type."""

    default_code = ErrorCode.UNKNOWN_NODE

    def __init__(self, node_type: str) -> None:
        super().__init__(f"no registered worker implements {node_type}")
        self.node_type = node_type


class UnknownWorkerError(DittoError):
    """A pinned worker id is unknown or does not implement the node type."""

    default_code = ErrorCode.UNKNOWN_WORKER

    def __init__(self, worker_id: str, node_type: str) -> None:
        super().__init__(f"worker {worker_id!r} is not registered for {node_type}")
        self.worker_id = worker_id
        self.node_type = node_type


class NoWorkerAvailableError(DittoError):
    """Every replica for the node type is paused or full. Becomes a failed, retryable result."""

    default_code = ErrorCode.NO_WORKER_AVAILABLE

    def __init__(self, node_type: str, worker_id: str | None = None) -> None:
        target = f"worker {worker_id!r}" if worker_id else "no worker"
        detail = "is paused or at its concurrency limit" if worker_id else "has free capacity"
        super().__init__(f"{target} {detail} for {node_type}", retryable=True)
        self.node_type = node_type


class WorkerDefinitionError(DittoError):
    """A worker definition or registration is malformed."""

    default_code = ErrorCode.INVALID_WORKER


class RuntimeClosedError(DittoError):
    """The runtime is closing or closed."""

    default_code = ErrorCode.RUNTIME_CLOSED

    def __init__(self) -> None:
        super().__init__("the runtime is closed and accepts no new work")


class ConfigError(DittoError):
    """Configuration is invalid; the message names the key path."""

    default_code = ErrorCode.INVALID_CONFIG


class NodeFailedError(DittoError):
    """Raised by ``NodeResult.unwrap()`` for a result that is not a success.

    Attributes:
        node: The node type of the failed result.
        status: ``failed``, ``timeout`` or ``cancelled``.
        error: The result's :class:`ErrorInfo`.
    """

    def __init__(self, node: str, status: str, error: ErrorInfo) -> None:
        super().__init__(
            f"{node} {status}: {error.message}",
            code=error.code,
            retryable=error.retryable,
            details=error.details,
        )
        self.node = node
        self.status = status
        self.error = error


class WorkerCleanupError(ExceptionGroup[Exception]):
    """Every ``dispose`` failure from one ``close()``, together (code ``WORKER_CLEANUP_FAILED``)."""

    code = ErrorCode.WORKER_CLEANUP_FAILED
