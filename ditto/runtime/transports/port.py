"""The ``Transport`` port: how a runtime hands a call to workers in other processes.

The runtime only needs four things from an engine: send a call and wait for its reply (or fail
fast), tell workers a call was abandoned, say where replies go, and close. Redis Streams is the
first engine (:mod:`ditto.adapters.redis.streams`); another (NATS JetStream, HTTP)
implements the same protocol without touching graphs or workers.
"""

from __future__ import annotations

from typing import Protocol

from ditto.runtime.transports.envelope import CallEnvelope, ReplyEnvelope

__all__ = ("Transport",)


class Transport(Protocol):
    """The caller's side of a remote-worker engine."""

    @property
    def reply_to(self) -> str:
        """Where this transport's replies arrive (goes into every envelope)."""
        ...

    async def call(self, envelope: CallEnvelope, timeout: float) -> ReplyEnvelope:
        """Send ``envelope`` and wait at most ``timeout`` seconds for its first reply.

        Raises:
            NoWorkerAvailableError: No live worker serves the node type (at once).
            DittoError: ``QUEUE_FULL`` (too many calls waiting; retryable),
                ``TRANSPORT_UNAVAILABLE`` (the engine cannot be reached; retryable),
                ``MESSAGE_REJECTED`` (the envelope is over the size cap).
            TimeoutError: No reply within ``timeout`` (the caller reports ``timeout`` and sends
                a cancel notice).
        """
        ...

    async def cancel(self, execution_id: str) -> None:
        """Tell workers the call was abandoned (best effort: never raises)."""
        ...

    async def aclose(self) -> None:
        """Stop waiting for replies and release connections (idempotent)."""
        ...
