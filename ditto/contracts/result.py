"""``NodeResult``: the envelope every invocation of every node type comes back in."""

from __future__ import annotations

from typing import Generic, Literal, TypeVar

import msgspec

from ditto.errors import ErrorInfo, NodeFailedError

__all__ = ("AttemptInfo", "NodeResult", "NodeStatus")

T = TypeVar("T")

NodeStatus = Literal["success", "failed", "cancelled", "timeout"]


class AttemptInfo(msgspec.Struct, frozen=True):
    """An earlier attempt of a retried call (see ``RetryPolicy``): how it ended, and the pause
    the runtime took before the next one."""

    execution_id: str
    """The attempt's own execution id (every attempt is a new invocation)."""
    status: NodeStatus
    """``failed``, ``timeout`` or ``cancelled``."""
    error: ErrorInfo
    """Why the attempt did not succeed."""
    worker_id: str | None = None
    """The replica that ran the attempt, when one was chosen."""
    duration_ms: float = 0.0
    """Wall time of the attempt."""
    delay_ms: float = 0.0
    """The backoff pause after it, before the next attempt."""


class NodeResult(msgspec.Struct, Generic[T], frozen=True):
    """The outcome of one node invocation.

    A business failure is a ``failed`` result, never an exception: callers (and graph binders)
    check :attr:`ok` or call :meth:`unwrap`. Every non-success result carries an ``error``.
    """

    execution_id: str
    """Fresh UUID of this invocation."""
    node: str
    """Node type, e.g. ``"MEMORY.WRITE"``."""
    status: NodeStatus
    """``success``, ``failed``, ``cancelled`` or ``timeout``."""
    output: T | None = None
    """The node's output; present on success only."""
    error: ErrorInfo | None = None
    """Why the node did not succeed; present on every other status."""
    worker_id: str | None = None
    """The replica that ran the node, when one was chosen."""
    duration_ms: float = 0.0
    """Wall time inside the runtime, from admission to result (all attempts and pauses)."""
    attempts: int = 1
    """How many times the runtime called the node for this result: 1 unless a ``RetryPolicy``
    retried it. The other fields describe the last attempt."""
    retries: tuple[AttemptInfo, ...] = ()
    """The attempts before the last one, oldest first (``attempts - 1`` of them). Defaulted,
    like every field after it, so results encoded before they existed still decode."""
    queue_ms: float | None = None
    """A remote call's wait in the stream, from being sent to a worker taking it (the worker's
    clock against the call's send time); ``None`` for a local call."""
    run_ms: float | None = None
    """A remote call's time inside the worker's runtime; ``None`` for a local call. What is
    left of :attr:`duration_ms` is the transport: sealing, Redis, the reply."""

    @property
    def ok(self) -> bool:
        """True when :attr:`status` is ``success``."""
        return self.status == "success"

    def unwrap(self) -> T:
        """Return the output of a successful result.

        Raises:
            NodeFailedError: The result is not a success; carries the :class:`ErrorInfo`.
        """
        if self.status == "success":
            return self.output  # type: ignore[return-value]
        assert self.error is not None, "a non-success NodeResult always carries an error"
        raise NodeFailedError(self.node, self.status, self.error)
