"""A caller's cancel notices, sent in batches: what a call that timed out or was cancelled owes
the workers, without costing the caller's event loop a round trip per call.

Thousands of calls can time out within a few milliseconds (every worker stopped, a fan-out
whose deadline passes). One ``PUBLISH`` task per call then held the loop for seconds (10,000
tasks queueing for 64 connections) and every timeout result behind it came back late. Here a
notice is an append to a bounded queue; one sender task sends what is queued, oldest first, at
most :data:`CANCEL_BATCH` notices per pipeline, one pipeline at a time (what is queued while one
is on the wire goes in the next: group commit). A notice is best effort — the worker may have
finished, and a worker that never hears it stops the call at its deadline anyway — so past
:data:`CANCEL_CAP` queued notices the oldest are dropped, and a batch Redis refuses is dropped,
each with a counted log line.

Each batch is one ``MULTI``/``EXEC`` of one ``PUBLISH`` per notice on the cancel channel, so a
worker hears one message per abandoned call as before, and Redis counts one ``EXEC`` per batch.
Notices are sealed when their batch is sent, not when queued: a burst of timeouts pays only an
append each.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import deque
from collections.abc import Callable

import redis.asyncio as aioredis
from redis import exceptions as redis_errors

__all__ = ("CANCEL_BATCH", "CANCEL_CAP", "CancelNotices")

logger = logging.getLogger("ditto.remote")

CANCEL_BATCH = 256
"""Most notices in one pipeline: packing them costs the loop well under a millisecond."""
CANCEL_CAP = 100_000
"""Most notices waiting to be sent; older ones are dropped past it (counted in the log)."""


class CancelNotices:
    """The cancel notices of one transport, sent on ``channel`` through ``client``; ``seal``
    makes an execution id's notice (sealed, so that nobody without the key cancels a call)."""

    __slots__ = (
        "_batch",
        "_channel",
        "_client",
        "_dropped",
        "_queue",
        "_seal",
        "_sender",
        "batches",
    )

    def __init__(
        self,
        client: aioredis.Redis,
        channel: str,
        seal: Callable[[str], bytes],
        *,
        batch: int = CANCEL_BATCH,
        cap: int = CANCEL_CAP,
    ) -> None:
        self._client = client
        self._channel = channel
        self._seal = seal
        self._batch = batch
        self._queue: deque[str] = deque(maxlen=cap)
        self._dropped = 0
        self._sender: asyncio.Task[None] | None = None
        self.batches = 0
        """Pipelines sent so far (for ``repr`` and debugging; tests count on Redis)."""

    def add(self, execution_id: str) -> None:
        """Queue a notice (O(1), never waits, never raises)."""
        queue = self._queue
        if len(queue) == queue.maxlen:
            self._dropped += 1  # the deque drops the oldest
        queue.append(execution_id)
        if self._sender is None:
            self._sender = asyncio.get_running_loop().create_task(
                self._send(), name="ditto-cancel-notices"
            )

    def __len__(self) -> int:
        return len(self._queue)

    async def _send(self) -> None:
        try:
            # Let every call whose deadline fires in this loop tick queue its notice first.
            await asyncio.sleep(0)
            queue = self._queue
            while queue:
                count = min(len(queue), self._batch)
                batch = [queue.popleft() for _ in range(count)]
                if self._dropped:
                    logger.warning(
                        "dropped %d cancel notices: over %d were waiting to be sent",
                        self._dropped,
                        queue.maxlen,
                    )
                    self._dropped = 0
                try:
                    async with self._client.pipeline(transaction=True) as pipe:
                        for execution_id in batch:
                            pipe.publish(self._channel, self._seal(execution_id))
                        await pipe.execute()
                    self.batches += 1
                except (redis_errors.RedisError, OSError) as exc:
                    logger.warning(
                        "could not send %d cancel notices (%s): workers stop those calls at "
                        "their deadlines",
                        len(batch),
                        type(exc).__name__,
                    )
        finally:
            self._sender = None

    async def aclose(self) -> None:
        """Stop sending; notices still queued are dropped (the workers' deadlines stop them)."""
        sender, self._sender = self._sender, None
        if sender is not None:
            sender.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await sender
        self._queue.clear()
