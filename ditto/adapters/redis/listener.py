"""A caller's reply stream: one task reads it and hands each reply to the call waiting for it, and
notices when Redis lost the calls in flight.

A Redis without persistence that restarts (or a ``FLUSHALL``, or eviction) forgets every call
stream entry and every pending delivery: a call sent before it will never be answered, and
waiting for its deadline only turns a lost call into a ``TIMEOUT``. So the listener keeps a
marker key of its own (``{prefix}live:{caller id}``, set with a TTL and refreshed about every
second, before a read: ``SET ... GET``, one command, no script to reload). When the marker it
set is gone, Redis lost its data since the previous check: every
call whose send was confirmed before this check was issued fails at once with
``TRANSPORT_UNAVAILABLE`` (retryable), and gets a cancel notice (a call sent after the restart
but before the check is failed too — retryable, and cancelled — rather than risk a lost one).
A connection error makes the next read check at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Coroutine
from typing import Any

import redis.asyncio as aioredis
from redis import exceptions as redis_errors

from ditto.adapters.redis.keys import REPLIES_TTL_MS
from ditto.errors import DittoError, ErrorCode
from ditto.runtime.transports.envelope import ReplyEnvelope, Signer

__all__ = ("ReplyListener", "lost")

logger = logging.getLogger("ditto.remote")

LISTEN_BLOCK_MS = 250
"""Short, so that closing a transport does not wait long for a blocked read to end."""
CHECK_INTERVAL = 1.0
"""Seconds between checks that Redis still holds this caller's calls."""
MARKER_TTL_MS = 120_000
"""The marker outlives any pause of the check (a stalled loop) by far; a closed caller's
marker expires by itself if it could not delete it."""
_FORGET_BATCH = 256
"""Read replies deleted per round trip (or whatever was read within a second)."""
_RECONNECT_DELAY = 0.2
_CLOSE_WAIT = 1.0


def lost() -> DittoError:
    return DittoError(
        "the remote-worker transport (Redis) lost this call: it restarted without its data "
        "or was flushed",
        code=ErrorCode.TRANSPORT_UNAVAILABLE,
        retryable=True,
    )


class ReplyListener:
    """Reads ``reply_to`` for the calls in :attr:`waiting`, checking that Redis still holds
    the ``marker`` key; ``on_lost`` gets the execution ids failed because Redis lost them (to
    send their cancel notices)."""

    def __init__(
        self,
        client: aioredis.Redis,
        reply_to: str,
        marker: str,
        signer: Signer,
        on_lost: Callable[[list[str]], None],
    ) -> None:
        self._client = client
        self._reply_to = reply_to
        self._marker = marker
        self._signer = signer
        self._on_lost = on_lost
        self.waiting: dict[str, asyncio.Future[ReplyEnvelope]] = {}
        """Execution id -> the future its call awaits."""
        self._sent_at: dict[str, int] = {}
        """Execution id -> how many checks had been issued when Redis confirmed its send."""
        self._checks = 0
        self._marked = False
        self._check_due = 0.0
        self._task: asyncio.Task[None] | None = None
        self._read_ids: list[bytes] = []
        self._forgotten_at = 0.0
        self._background: set[asyncio.Task[None]] = set()

    def expect(self, execution_id: str) -> asyncio.Future[ReplyEnvelope]:
        """The future the call ``execution_id`` awaits (starts reading if not yet)."""
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(
                self._listen(), name=f"ditto-replies-{self._reply_to[-8:]}"
            )
        waiter: asyncio.Future[ReplyEnvelope] = asyncio.get_running_loop().create_future()
        self.waiting[execution_id] = waiter
        return waiter

    def sent(self, execution_id: str) -> None:
        """Redis accepted the call: from the next check on, a loss of data fails it."""
        self._sent_at[execution_id] = self._checks

    def forget(self, execution_id: str) -> None:
        """The call ended (answered, timed out, cancelled, refused)."""
        self.waiting.pop(execution_id, None)
        self._sent_at.pop(execution_id, None)

    async def _listen(self) -> None:
        """Read the reply stream for as long as the transport lives."""
        last = b"0-0"
        loop = asyncio.get_running_loop()
        while True:
            answer: Any
            check = loop.time() >= self._check_due
            try:
                if check:
                    self._checks += 1
                    issued = self._checks
                    self._check_due = loop.time() + CHECK_INTERVAL
                    # One round trip: the marker, and the reply stream's lease on life.
                    refresh = self._client.pipeline(transaction=False)
                    refresh.set(self._marker, b"1", px=MARKER_TTL_MS, get=True)
                    refresh.pexpire(self._reply_to, REPLIES_TTL_MS)
                    marker, _ = await refresh.execute()
                    if marker is None and self._marked:
                        self._fail_lost(issued)
                    self._marked = True
                answer = await self._client.xread(
                    {self._reply_to: last}, count=512, block=LISTEN_BLOCK_MS
                )
            except asyncio.CancelledError:
                raise
            except (redis_errors.RedisError, OSError):
                # Check as soon as Redis answers again: it may have restarted without its data.
                self._check_due = 0.0
                await asyncio.sleep(_RECONNECT_DELAY)
                continue
            if not answer:
                continue
            entries: list[tuple[bytes, dict[bytes, bytes]]] = answer[0][1]
            for entry_id, fields in entries:
                last = entry_id
                self._deliver(fields.get(b"e", b""))
            # Read replies are deleted in batches, off the path of the next read.
            self._read_ids.extend(entry_id for entry_id, _ in entries)
            now = loop.time()
            if len(self._read_ids) >= _FORGET_BATCH or now - self._forgotten_at > 1.0:
                self._forgotten_at = now
                self._spawn(self._forget(self._read_ids))
                self._read_ids = []

    def _fail_lost(self, issued: int) -> None:
        failed = []
        for execution_id, confirmed in self._sent_at.items():
            waiter = self.waiting.get(execution_id)
            if confirmed < issued and waiter is not None and not waiter.done():
                waiter.set_exception(lost())
                failed.append(execution_id)
        if failed:
            logger.warning(
                "Redis lost its data (a restart without persistence, or a flush): %d remote "
                "calls in flight fail as TRANSPORT_UNAVAILABLE",
                len(failed),
            )
            self._on_lost(failed)

    def _deliver(self, sealed: bytes) -> None:
        try:
            reply: ReplyEnvelope = self._signer.open(sealed, ReplyEnvelope)
        except DittoError as exc:
            logger.warning("dropped a reply on %s: %s", self._reply_to, exc.message)
            return
        waiter = self.waiting.get(reply.execution_id)
        if waiter is not None and not waiter.done():
            waiter.set_result(reply)  # a duplicate (a redelivered call) finds it done: dropped

    def _spawn(self, work: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(work)
        self._background.add(task)  # referenced until it finishes
        task.add_done_callback(self._background.discard)

    async def _forget(self, entry_ids: list[bytes]) -> None:
        with contextlib.suppress(redis_errors.RedisError, OSError):
            await self._client.xdel(self._reply_to, *entry_ids)

    async def aclose(self, failure: Callable[[], DittoError]) -> None:
        """Stop reading; calls still waiting fail with ``failure()``; the reply stream and the
        marker are deleted (best effort)."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            # Bounded: a read cancelled while the driver reconnects to a Redis that just came
            # back can take a while to unwind, and closing never waits on Redis.
            await asyncio.wait({task}, timeout=_CLOSE_WAIT)
        for waiter in self.waiting.values():
            if not waiter.done():
                waiter.set_exception(failure())
        with contextlib.suppress(redis_errors.RedisError, OSError):
            await self._client.delete(self._reply_to, self._marker)
