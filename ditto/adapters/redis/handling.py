"""One call on a remote worker, from its sealed bytes to its answer: open it (or dead-letter
it), admit it (never an execution id twice), run it on the local runtime within its deadline,
seal the reply under the key that opened the call, reply and acknowledge; and cancel a running
call whose caller gave up. The reading, claiming and lifecycle are
:class:`~ditto.adapters.redis.server.RemoteWorkerServer`'s."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from typing import TYPE_CHECKING, Any

import msgspec
import redis.asyncio as aioredis
from redis import exceptions as redis_errors

from ditto.adapters.redis.admission import Admission, Verdict
from ditto.adapters.redis.dead_letters import DeadLetterReason, DeadLetters
from ditto.adapters.redis.keys import cancel_channel
from ditto.adapters.redis.replies import RETRY_DELAY, ReplyWriter, text
from ditto.contracts.result import NodeResult
from ditto.errors import DittoError, ErrorCode, ErrorInfo
from ditto.runtime.context import NO_ANSWER, ExecutionScope
from ditto.runtime.transports.envelope import CallEnvelope, CancelNotice, ReplyEnvelope, Signer

if TYPE_CHECKING:
    from ditto.runtime.context import Invoker

__all__ = ("CallHandler",)

logger = logging.getLogger("ditto.remote")

_encode = msgspec.msgpack.Encoder().encode
_TIMEOUT = ErrorInfo(ErrorCode.TIMEOUT.value, "the call's deadline passed before it started", True)
_CANCELLED = ErrorInfo(ErrorCode.CANCELLED.value, "the caller cancelled the call")


class CallHandler:
    """Runs the calls one worker took.

    Args:
        invoke: The local runtime's ``engine.invoke_nested``.
        client: The worker's ``redis.asyncio.Redis``.
        signer: Opens calls and seals replies.
        streams: Each served calls stream -> its node type.
        worker_id: This worker's name.
        prefix: Key prefix shared with the callers.
        max_deliveries: Deliveries of one call before it is dead-lettered.
    """

    def __init__(
        self,
        invoke: Invoker,
        client: aioredis.Redis,
        signer: Signer,
        streams: dict[str, str],
        *,
        worker_id: str,
        prefix: str,
        max_deliveries: int,
    ) -> None:
        self._invoke = invoke
        self._client = client
        self._signer = signer
        self._streams = streams
        self.worker_id = worker_id
        self._prefix = prefix
        self._max_deliveries = max_deliveries
        self.admission = Admission(client, prefix, worker_id)
        self.dead = DeadLetters(client, prefix, worker_id)
        self._replies = ReplyWriter(client)
        self._running: dict[str, asyncio.Task[None]] = {}
        """Execution id -> the task running its handler (for cancel notices)."""
        self._cancelled: set[str] = set()
        self.handled = 0
        self._active = 0
        """Calls between being taken and being answered (one: a reply has nothing to wait for)."""

    async def handle(
        self, stream: str, entry_id: bytes, sealed: bytes, claimed: bool, fresh: bool = False
    ) -> None:
        """Open, admit, run and answer one call taken from ``stream`` (``claimed``: taken over
        from another worker, not read; ``fresh``: read in a read that took less than the
        takeover margin, see :meth:`Admission.admits_locally`)."""
        self._active += 1
        try:
            await self._handle(stream, entry_id, sealed, claimed, fresh)
        finally:
            self._active -= 1

    async def _handle(
        self, stream: str, entry_id: bytes, sealed: bytes, claimed: bool, fresh: bool
    ) -> None:
        try:
            envelope: CallEnvelope
            envelope, key = self._signer.open_keyed(sealed, CallEnvelope)
        except DittoError as exc:
            logger.warning("rejected a message on %s: %s", stream, exc.message)
            await self._bury(DeadLetterReason.REJECTED, exc.message, stream, entry_id, sealed)
            return
        if self._streams.get(stream) != envelope.node_type:
            logger.warning("rejected a message on %s: it names another node type", stream)
            detail = f"it names {envelope.node_type}, on the stream of {self._streams[stream]}"
            await self._bury(DeadLetterReason.MISROUTED, detail, stream, entry_id, sealed)
            return
        remaining = envelope.deadline - time.time()
        if self.admission.admits_locally(entry_id, envelope, fresh and not claimed):
            deliveries = 1
        else:
            try:
                verdict, deliveries = await self.admission.admit(
                    stream, entry_id, envelope, remaining
                )
            except (redis_errors.RedisError, OSError):
                # Not run, still pending: a live worker takes it over after claim_idle_ms.
                logger.warning("could not take %s %s: Redis failed", stream, text(entry_id))
                return
            if verdict in (Verdict.REPLAY, Verdict.NOT_OURS):
                return
        # The caller's attempt (its retries count up), plus this entry's redeliveries.
        attempt = envelope.attempt + deliveries - 1 if claimed else envelope.attempt
        queue_ms = max(0.0, time.time() * 1000 - _entry_ms(entry_id))
        if deliveries > self._max_deliveries:
            detail = f"delivered {deliveries} times (max_deliveries {self._max_deliveries})"
            logger.warning("dead-lettered %s %s: %s", stream, envelope.execution_id, detail)
            with contextlib.suppress(redis_errors.RedisError, OSError):
                await self.dead.add(
                    DeadLetterReason.EXHAUSTED,
                    detail,
                    stream=stream,
                    sealed=sealed,
                    envelope=envelope,
                    deliveries=deliveries,
                )
            error = ErrorInfo(
                ErrorCode.DEAD_LETTERED.value, f"the call was {detail}: dead-lettered"
            )
            result: NodeResult[Any] = NodeResult(
                envelope.execution_id, envelope.node_type, "failed", None, error, self.worker_id
            )
        elif remaining <= 0:
            result = NodeResult(
                envelope.execution_id, envelope.node_type, "timeout", None, _TIMEOUT, self.worker_id
            )
        else:
            result = await self._run(envelope, remaining, attempt)
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
        # Answered under the key that opened the call: a caller that has not rotated yet
        # still reads it.
        try:
            sealed_reply = self._signer.seal(reply, key=key)
        except DittoError as exc:  # the output is over the size cap: say so, never run again
            sealed_reply = self._signer.seal(
                msgspec.structs.replace(
                    reply, status="failed", output=msgspec.Raw(_encode(None)), error=exc.to_info()
                ),
                key=key,
            )
        await self._replies.send(stream, entry_id, envelope, sealed_reply, alone=self._active == 1)

    async def _bury(
        self, reason: DeadLetterReason, detail: str, stream: str, entry_id: bytes, sealed: bytes
    ) -> None:
        """Dead-letter a message that cannot be run, then acknowledge it unanswered. Should the
        dead-letter stream be unreachable, the message stays pending and comes back."""
        try:
            await self.dead.add(
                reason, detail, stream=stream, sealed=sealed, envelope=None, deliveries=1
            )
        except (redis_errors.RedisError, OSError):
            return
        await self._replies.send(stream, entry_id, None, None)

    async def _run(self, envelope: CallEnvelope, remaining: float, attempt: int) -> NodeResult[Any]:
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
                answer=NO_ANSWER
                if envelope.answer is None
                else msgspec.msgpack.decode(envelope.answer[0]),
            )
        except asyncio.CancelledError:
            if execution_id not in self._cancelled:
                raise
            task.uncancel()
            elapsed = (time.perf_counter() - started) * 1000
            return NodeResult(
                execution_id,
                envelope.node_type,
                "cancelled",
                None,
                _CANCELLED,
                self.worker_id,
                elapsed,
            )
        except msgspec.DecodeError:
            error = ErrorInfo(ErrorCode.INVALID_INPUT.value, "the call's input is not MessagePack")
            return NodeResult(
                execution_id, envelope.node_type, "failed", None, error, self.worker_id
            )
        finally:
            self._running.pop(execution_id, None)
            self._cancelled.discard(execution_id)

    def _cancelled_id(self, data: bytes) -> str | None:
        """The execution id of a sealed cancel notice (:class:`CancelNotice`); ``None`` for
        anything else — nobody without the key cancels a call."""
        try:
            notice: CancelNotice = self._signer.open(data, CancelNotice)
        except DittoError:
            logger.debug("ignored a cancel notice that does not open")
            return None
        return notice.execution_id

    async def listen_for_cancels(self) -> None:
        """Cancel the handler of each call a caller abandons (until cancelled)."""
        channel = cancel_channel(self._prefix)
        while True:
            pubsub = self._client.pubsub(ignore_subscribe_messages=True)
            try:
                await pubsub.subscribe(channel)
                async for message in pubsub.listen():
                    execution_id = self._cancelled_id(message.get("data", b""))
                    running = None if execution_id is None else self._running.get(execution_id)
                    if running is not None and execution_id is not None:
                        self._cancelled.add(execution_id)
                        running.cancel()
            except (redis_errors.RedisError, OSError):
                await asyncio.sleep(RETRY_DELAY)
            finally:
                with contextlib.suppress(Exception):
                    await pubsub.aclose()  # type: ignore[no-untyped-call]


def _entry_ms(entry_id: bytes) -> float:
    return float(entry_id.split(b"-", 1)[0])
