"""The worker's side of remote workers over Redis Streams: read calls, run them on a local
runtime, reply, acknowledge.

Delivery is at-least-once, from Redis Streams consumer groups:

* Each served node type's stream is read through the group ``workers``; a call read by a worker
  stays in the group's pending list until the worker has replied and acknowledged it.
* A worker that dies leaves its calls pending. Live workers reclaim calls idle for longer than
  ``claim_idle_ms`` (``XAUTOCLAIM``) and run them again with ``ctx.attempt`` = the delivery
  count. A live worker keeps its own running calls from going idle (``XCLAIM ... JUSTID`` on
  every heartbeat), so a slow call is never taken from a worker that is still running it.
* A call whose deadline has passed is never started: it is answered ``timeout``.
* A *failed* result is a result: it is replied and acknowledged, never retried.
* A message that is not signed with the shared secret is logged, acknowledged and dropped:
  never executed, never answered (its reply address cannot be trusted either).

Stopping (SIGTERM) stops reading, lets the calls in flight finish (each is bounded by its
deadline), replies and acknowledges them, and removes the worker from the directory.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from typing import TYPE_CHECKING, Any

import msgspec
import redis.asyncio as aioredis
from redis import exceptions as redis_errors

from ditto.adapters.redis.keys import (
    GROUP,
    calls_key,
    cancel_channel,
)
from ditto.adapters.redis.presence import Presence
from ditto.adapters.redis.replies import RETRY_DELAY, ReplyWriter, text
from ditto.contracts.result import NodeResult
from ditto.errors import DittoError, ErrorCode, ErrorInfo
from ditto.runtime.context import ExecutionScope
from ditto.runtime.transports.envelope import CallEnvelope, ReplyEnvelope, Signer

if TYPE_CHECKING:
    from collections.abc import Iterable

    from ditto.runtime.context import Invoker

__all__ = ("RemoteWorkerServer",)

logger = logging.getLogger("ditto.remote")

_encode = msgspec.msgpack.Encoder().encode
_TIMEOUT = ErrorInfo(ErrorCode.TIMEOUT.value, "the call's deadline passed before it started", True)
_CANCELLED = ErrorInfo(ErrorCode.CANCELLED.value, "the caller cancelled the call")
_READ_BLOCK_MS = 500


class RemoteWorkerServer:
    """Serve a runtime's local node types to remote callers.

    Args:
        invoke: How a received call runs on the local runtime
            (``runtime.engine.invoke_nested``): on its registered workers, with their own
            services, credentials and access policy (the caller's principal is passed on, and
            the worker's access control decides what it may do).
        node_types: The node types to serve (the runtime's local ones).
        client: ``redis.asyncio.Redis`` with ``decode_responses=False``.
        signer: Opens calls and seals replies.
        worker_id: This worker's name (unique among live workers).
        prefix: Key prefix shared with the callers.
        concurrency: Calls run at once.
        claim_idle_ms: Take over calls pending this long on a worker that stopped renewing them.
        heartbeat_ms: How often the worker announces itself; it is considered dead after three
            missed beats.
    """

    def __init__(
        self,
        invoke: Invoker,
        node_types: Iterable[str],
        client: aioredis.Redis,
        signer: Signer,
        *,
        worker_id: str,
        prefix: str = "ditto:",
        concurrency: int = 16,
        claim_idle_ms: int = 30_000,
        heartbeat_ms: int = 1_000,
    ) -> None:
        self._invoke = invoke
        self._client = client
        self._signer = signer
        self.worker_id = worker_id
        self._prefix = prefix
        self._concurrency = concurrency
        self._claim_idle_ms = claim_idle_ms
        self._heartbeat_ms = heartbeat_ms
        self.node_types = sorted(set(node_types))
        if not self.node_types:
            raise DittoError("a remote worker needs at least one local node type to serve")
        self._streams = {calls_key(prefix, node_type): node_type for node_type in self.node_types}
        self._presence = Presence(
            client, prefix, worker_id, self.node_types, heartbeat_ms, signer.fingerprint
        )
        self._inflight: dict[asyncio.Task[None], tuple[str, bytes]] = {}
        """Every call taken and not yet answered: its task -> (its stream, its entry id)."""
        self._running: dict[str, asyncio.Task[None]] = {}
        """Execution id -> the task running its handler (for cancel notices)."""
        self._cancelled: set[str] = set()
        self._free = concurrency
        """Calls this worker could start now."""
        self._room = asyncio.Event()
        self._room.set()
        self._stopping = asyncio.Event()
        self._replies = ReplyWriter(client)
        self._groups_ready = False
        self.started_at = time.time()
        self.handled = 0

    # ----------------------------------------------------------------- lifecycle

    async def serve(self) -> None:
        """Serve until :meth:`stop`; then drain, reply, acknowledge and deregister."""
        background = [
            asyncio.create_task(
                self._presence.beat(self._describe, self._stopping), name="ditto-worker-heartbeat"
            ),
            asyncio.create_task(self._listen_for_cancels(), name="ditto-worker-cancels"),
            asyncio.create_task(self._reclaim(), name="ditto-worker-reclaim"),
        ]
        try:
            await self._read()
            # Drain: every call taken finishes (bounded by its deadline) and is answered, also
            # one read in the moment the stop came.
            while self._inflight:
                await asyncio.gather(*list(self._inflight), return_exceptions=True)
        finally:
            for task in background:
                task.cancel()
            await asyncio.gather(*background, return_exceptions=True)
            await self._presence.leave()

    def stop(self) -> None:
        """Stop reading new calls (the ones in flight still finish)."""
        self._stopping.set()

    # ----------------------------------------------------------------- reading

    async def _ensure_groups(self) -> None:
        for stream in self._streams:
            try:
                await self._client.xgroup_create(stream, GROUP, id="0", mkstream=True)
            except redis_errors.ResponseError as exc:
                if "BUSYGROUP" not in str(exc):
                    raise
        self._groups_ready = True

    async def _read(self) -> None:
        while not self._stopping.is_set():
            while self._free <= 0:
                self._room.clear()
                await self._room.wait()
            try:
                if not self._groups_ready:
                    await self._ensure_groups()
                answer: Any = await self._client.xreadgroup(
                    GROUP,
                    self.worker_id,
                    dict.fromkeys(self._streams, ">"),
                    count=self._free,
                    block=_READ_BLOCK_MS,
                )
            except redis_errors.ResponseError as exc:
                if "NOGROUP" in str(exc):  # Redis lost its data (a restart): groups again
                    self._groups_ready = False
                    continue
                logger.warning("reading calls failed: %s", type(exc).__name__)
                await asyncio.sleep(RETRY_DELAY)
                continue
            except (redis_errors.RedisError, OSError):
                await asyncio.sleep(RETRY_DELAY)
                continue
            for stream, entries in answer or ():
                for entry_id, fields in entries:
                    self._start(text(stream), entry_id, fields.get(b"e", b""), None)

    def _start(self, stream: str, entry_id: bytes, sealed: bytes, attempt: int | None) -> None:
        self._free -= 1
        task = asyncio.create_task(self._handle(stream, entry_id, sealed, attempt))
        self._inflight[task] = (stream, entry_id)
        task.add_done_callback(self._done)

    def _done(self, task: asyncio.Task[None]) -> None:
        self._inflight.pop(task, None)
        self._free += 1
        self._room.set()
        if not task.cancelled() and task.exception() is not None:
            logger.error("a remote call failed in the worker", exc_info=task.exception())

    async def _reclaim(self) -> None:
        """Keep our own calls from going idle; take over calls left pending by dead workers
        (not once stopping: a draining worker takes nothing new, but still renews its own)."""
        interval = max(self._claim_idle_ms / 4000, 0.05)
        while True:
            await asyncio.sleep(interval)
            if not self._groups_ready:
                continue
            try:
                await self._renew_own()
                if self._stopping.is_set():
                    continue
                for stream in self._streams:
                    await self._claim(stream)
            except (redis_errors.RedisError, OSError):
                continue

    async def _renew_own(self) -> None:
        by_stream: dict[str, list[Any]] = {}
        for stream, entry_id in self._inflight.values():
            by_stream.setdefault(stream, []).append(entry_id)
        for stream, ids in by_stream.items():
            await self._client.xclaim(stream, GROUP, self.worker_id, 0, ids, justid=True)

    async def _claim(self, stream: str) -> None:
        room = self._free
        if room <= 0:
            return
        answer: Any = await self._client.xautoclaim(
            stream, GROUP, self.worker_id, self._claim_idle_ms, "0-0", count=room
        )
        for entry_id, fields in answer[1]:
            if fields is None:
                continue  # deleted meanwhile
            pending: Any = await self._client.xpending_range(
                stream, GROUP, min=entry_id, max=entry_id, count=1
            )
            attempt = int(pending[0]["times_delivered"]) if pending else 2
            logger.info("took over %s %s (attempt %d)", stream, text(entry_id), attempt)
            self._start(stream, entry_id, fields.get(b"e", b""), attempt)

    # ----------------------------------------------------------------- one call

    async def _handle(
        self, stream: str, entry_id: bytes, sealed: bytes, attempt: int | None
    ) -> None:
        try:
            envelope: CallEnvelope = self._signer.open(sealed, CallEnvelope)
        except DittoError as exc:
            logger.warning("rejected a message on %s: %s", stream, exc.message)
            await self._replies.send(stream, entry_id, None, None)
            return
        if self._streams.get(stream) != envelope.node_type:
            logger.warning("rejected a message on %s: it names another node type", stream)
            await self._replies.send(stream, entry_id, None, None)
            return
        attempt = attempt or envelope.attempt
        queue_ms = max(0.0, time.time() * 1000 - _entry_ms(entry_id))
        remaining = envelope.deadline - time.time()
        if remaining <= 0:
            result: NodeResult[Any] = NodeResult(
                envelope.execution_id, envelope.node_type, "timeout", None, _TIMEOUT, self.worker_id
            )
        else:
            result = await self._run(envelope, remaining, attempt, stream, entry_id)
        self.handled += 1
        logger.debug(
            "%s %s attempt %d: %s, queued %.1f ms, ran %.1f ms",
            envelope.node_type,
            envelope.execution_id,
            attempt,
            result.status,
            queue_ms,
            result.duration_ms,
        )
        reply = ReplyEnvelope(
            envelope.execution_id,
            result.status,
            msgspec.Raw(_encode(result.output if result.status == "success" else None)),
            result.error,
            self.worker_id,
            attempt,
            queue_ms,
            result.duration_ms,
        )
        try:
            sealed_reply = self._signer.seal(reply)
        except DittoError as exc:  # the output is over the size cap: say so, never run again
            sealed_reply = self._signer.seal(
                msgspec.structs.replace(
                    reply,
                    status="failed",
                    output=msgspec.Raw(_encode(None)),
                    error=exc.to_info(),
                )
            )
        await self._replies.send(stream, entry_id, envelope, sealed_reply)

    async def _run(
        self,
        envelope: CallEnvelope,
        remaining: float,
        attempt: int,
        stream: str,
        entry_id: bytes,
    ) -> NodeResult[Any]:
        execution_id = envelope.execution_id
        task = asyncio.current_task()
        assert task is not None
        self._running[execution_id] = task
        started = time.perf_counter()
        try:
            return await self._invoke(
                envelope.node_type,
                msgspec.msgpack.decode(envelope.input),
                timeout=remaining,
                principal=envelope.principal,
                worker=None,
                execution=None
                if envelope.execution is None
                else ExecutionScope(*envelope.execution),
                outer_deadline=None,
                attempt=attempt,
                execution_id=execution_id,
                idempotency_key=envelope.idempotency_key,
            )
        except asyncio.CancelledError:
            if execution_id not in self._cancelled:
                raise
            task.uncancel()
            return NodeResult(
                execution_id,
                envelope.node_type,
                "cancelled",
                None,
                _CANCELLED,
                self.worker_id,
                (time.perf_counter() - started) * 1000,
            )
        except msgspec.DecodeError:
            return NodeResult(
                execution_id,
                envelope.node_type,
                "failed",
                None,
                ErrorInfo(ErrorCode.INVALID_INPUT.value, "the call's input is not MessagePack"),
                self.worker_id,
            )
        finally:
            self._running.pop(execution_id, None)
            self._cancelled.discard(execution_id)

    # ----------------------------------------------------------------- presence

    def _describe(self) -> dict[str, Any]:
        """What the directory shows of this worker (``ditto worker list``)."""
        return {
            "node_types": self.node_types,
            "concurrency": self._concurrency,
            "in_flight": len(self._inflight),
            "free": self._free,
            "handled": self.handled,
            "started_at": self.started_at,
            "heartbeat_at": time.time(),
        }

    async def _listen_for_cancels(self) -> None:
        channel = cancel_channel(self._prefix)
        while True:
            pubsub = self._client.pubsub(ignore_subscribe_messages=True)
            try:
                await pubsub.subscribe(channel)
                async for message in pubsub.listen():
                    execution_id = text(message.get("data", b""))
                    running = self._running.get(execution_id)
                    if running is not None:
                        self._cancelled.add(execution_id)
                        running.cancel()
            except (redis_errors.RedisError, OSError):
                await asyncio.sleep(RETRY_DELAY)
            finally:
                with contextlib.suppress(Exception):
                    await pubsub.aclose()  # type: ignore[no-untyped-call]


def _entry_ms(entry_id: bytes) -> float:
    return float(entry_id.split(b"-", 1)[0])
