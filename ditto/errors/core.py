"""The error payload of results and the exception tree (see :mod:`ditto.errors`)."""

from __future__ import annotations

from typing import Any

import msgspec

from ditto.errors.codes import ErrorCode

__all__ = (
    "ConfigError",
    "DittoError",
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

    def __init__(self, message: str = "the runtime is closed and accepts no new work") -> None:
        super().__init__(message)


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


# ----------------------------------------------------------------- driver-error boundaries
