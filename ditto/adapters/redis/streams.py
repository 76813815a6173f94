"""The caller's side of remote workers over Redis Streams.

A call is one Lua script (``SEND_SCRIPT``): it fails fast when no live worker serves the node
type (``NO_WORKER_AVAILABLE``, decided on the Redis server's clock) or when too many calls are
waiting (``QUEUE_FULL``), and otherwise adds the sealed call to the node type's stream under the
entry id this caller chose and sealed into it (above the last id it knows on that stream; when
another caller's entry was newer, Redis chooses one and the caller learns it), recording that
entry as the execution id's (:mod:`~ditto.adapters.redis.keys`), so that a worker reading it
fresh runs it without checking it in Redis (:mod:`~ditto.adapters.redis.admission`). Workers
read it through a consumer group; one of them replies on this runtime's reply stream, which a
single listener task reads and hands to the waiting call by execution id. The first reply for an
execution id wins; a later one (a redelivered call that also finished) is dropped.

A call that times out or is cancelled queues a cancel notice, sent in batches
(:mod:`~ditto.adapters.redis.cancels`); a worker running it cancels its handler (best effort: it
may already have finished). Redis errors are ``TRANSPORT_UNAVAILABLE``
(retryable) and never outlast the call's deadline; the listener reconnects by itself, and fails
at once the calls a restarted Redis lost (:mod:`~ditto.adapters.redis.listener`). Workers'
clocks are watched from their heartbeats (:mod:`~ditto.adapters.redis.clocks`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections.abc import Sequence
from typing import Any, Self

import msgspec
import redis.asyncio as aioredis
from redis import exceptions as redis_errors

from ditto.adapters.redis.cancels import CancelNotices
from ditto.adapters.redis.clocks import ClockWatch
from ditto.adapters.redis.keys import (
    SEEN_MARGIN_MS,
    SEND_SCRIPT,
    calls_key,
    cancel_channel,
    keyed_nodes_key,
    nodes_key,
    replies_key,
    seen_key,
)
from ditto.adapters.redis.listener import ReplyListener
from ditto.errors import (
    DittoError,
    ErrorCode,
    ExceptionMapping,
    NoWorkerAvailableError,
    map_exceptions,
    translate,
)
from ditto.runtime.transports.envelope import CallEnvelope, CancelNotice, ReplyEnvelope, Signer

__all__ = (
    "DEFAULT_MAX_PENDING",
    "TRANSPORT_ERRORS",
    "RedisStreamsTransport",
    "transport_errors",
    "unavailable",
)

logger = logging.getLogger("ditto.remote")

DEFAULT_MAX_PENDING = 10_000
"""Calls of one node type waiting or running before new ones get ``QUEUE_FULL``."""
_SEND_BATCH = 512
"""Most calls sent in one pipeline (about 10 ms of the loop's time to pack and parse)."""
_REFUSED = (b"NO_WORKER", b"FULL", b"KEY_MISMATCH")
"""The send script's answers that mean nothing was sent (any other answer is the entry id)."""


def unavailable() -> DittoError:
    # Never the driver's text: it can carry the host and, with some URLs, credentials.
    return DittoError(
        "the remote-worker transport (Redis) is unreachable",
        code=ErrorCode.TRANSPORT_UNAVAILABLE,
        retryable=True,
    )


def _unreachable(exc: BaseException) -> DittoError:
    return unavailable()


TRANSPORT_ERRORS: ExceptionMapping = {(redis_errors.RedisError, OSError): _unreachable}
"""Redis failures as ``TRANSPORT_UNAVAILABLE``, the driver's exception kept as the cause."""
_TRANSPORT_ERRORS = map_exceptions(TRANSPORT_ERRORS)


def transport_errors() -> map_exceptions:
    """The transport's driver-error boundary (``with transport_errors():``; see
    :data:`TRANSPORT_ERRORS`)."""
    return _TRANSPORT_ERRORS


class RedisStreamsTransport:
    """Send calls to remote workers and wait for their replies (one per runtime).

    Args:
        client: A ``redis.asyncio.Redis`` with ``decode_responses=False``.
        signer: Seals calls and opens replies (``Signer.from_environment()``).
        prefix: Key prefix shared with the workers (``ditto worker serve --prefix``).
        max_pending: Calls of one node type waiting or running at once (the stream's cap).
        owns_client: Close ``client`` in :meth:`aclose`.
    """

    def __init__(
        self,
        client: aioredis.Redis,
        signer: Signer,
        *,
        prefix: str = "ditto:",
        max_pending: int = DEFAULT_MAX_PENDING,
        owns_client: bool = False,
    ) -> None:
        self._client = client
        self._signer = signer
        self._fingerprint = signer.fingerprint
        self._prefix = prefix
        self._max_pending = max_pending
        self._owns_client = owns_client
        self._id = uuid.uuid4().hex
        self._reply_to = replies_key(prefix, self._id)
        self._send_sha: str | None = None
        self._replies = ReplyListener(
            client, self._reply_to, f"{prefix}live:{self._id}", signer, self._notify_lost
        )
        self._sender: asyncio.Task[None] | None = None
        self._outbox: list[tuple[tuple[Any, ...], asyncio.Future[bytes]]] = []
        self._outbox_ready = asyncio.Event()
        self._sending = 0
        """Sends on the way: while there are any, new calls wait for the next batch."""
        self._keys: dict[str, tuple[str, str, str]] = {}
        """Node type -> its calls stream, live-worker set and live-with-our-key set."""
        self._last_ids: dict[str, tuple[int, int]] = {}
        """Calls stream -> the highest entry id this caller chose or saw used there."""
        self._clocks = ClockWatch(client, prefix)
        self._cancels = CancelNotices(client, cancel_channel(prefix), self._seal_cancel)
        self._closed = False

    @classmethod
    def from_url(
        cls,
        url: str,
        signer: Signer | None = None,
        *,
        prefix: str = "ditto:",
        max_pending: int = DEFAULT_MAX_PENDING,
        max_connections: int = 64,
    ) -> Self:
        """A transport with its own connection pool for ``url`` (closed by :meth:`aclose`); no
        connection is opened before the first call. More than ``max_connections`` calls at once
        wait for a connection (within their deadlines) instead of failing."""
        pool = aioredis.BlockingConnectionPool.from_url(
            url,
            decode_responses=False,
            max_connections=max_connections,
            timeout=None,
            socket_connect_timeout=2.0,
            health_check_interval=10,
        )
        client = aioredis.Redis(connection_pool=pool)
        return cls(
            client,
            signer or Signer.from_environment(),
            prefix=prefix,
            max_pending=max_pending,
            owns_client=True,
        )

    @property
    def reply_to(self) -> str:
        return self._reply_to

    async def call(self, envelope: CallEnvelope, timeout: float) -> ReplyEnvelope:
        if self._closed:
            raise unavailable()
        node_type = envelope.node_type
        keys = self._keys.get(node_type) or self._keys_of(node_type)
        entry_id = self._next_id(keys[0])
        # Every live worker's clock runs ahead: give them the budget on theirs.
        deadline = envelope.deadline + self._clocks.ahead(node_type)
        sealed = self._signer.seal(
            msgspec.structs.replace(envelope, deadline=deadline, entry_id=entry_id)
        )
        execution_id = envelope.execution_id
        arguments = (
            5,
            *keys[:2],
            self._reply_to,
            keys[2],
            seen_key(self._prefix, execution_id),
            self._max_pending,
            sealed,
            entry_id,
            max(0, int(timeout * 1000)) + SEEN_MARGIN_MS,
        )
        waiter = self._replies.expect(execution_id)
        # Until Redis says it refused the call, a worker may hold it: a caller that leaves even
        # while its send is in flight owes a cancel notice (one for an id no worker holds is
        # harmless), or the call would run on to its deadline.
        queued = True
        try:
            async with asyncio.timeout(timeout):
                outcome = await self._submit(arguments)
                if outcome in _REFUSED:
                    queued = False
                    raise self._refusal(outcome, node_type)
                if outcome != entry_id.encode():  # Redis chose: another caller's was newer
                    self._saw_id(keys[0], outcome)
                self._replies.sent(execution_id)
                return await waiter
        except BaseException:
            # A cancelled caller cancels the future it awaits too: "not answered" is either.
            if queued and (waiter.cancelled() or not waiter.done()):
                self._notify_cancel(execution_id)
            raise
        finally:
            self._replies.forget(execution_id)

    def _refusal(self, outcome: bytes, node_type: str) -> DittoError:
        if outcome == b"NO_WORKER":
            return NoWorkerAvailableError(node_type)
        if outcome == b"KEY_MISMATCH":
            return DittoError(
                f"the live workers of {node_type} hold another "
                "DITTO_REMOTE_SECRET: none could verify this call, so it was not sent",
                code=ErrorCode.REMOTE_KEY_MISMATCH,
            )
        return DittoError(
            f"{self._max_pending:,} calls of {node_type} are already waiting for a remote worker",
            code=ErrorCode.QUEUE_FULL,
            retryable=True,
        )

    def _keys_of(self, node_type: str) -> tuple[str, str, str]:
        keys = (
            calls_key(self._prefix, node_type),
            nodes_key(self._prefix, node_type),
            keyed_nodes_key(self._prefix, node_type, self._fingerprint),
        )
        self._keys[node_type] = keys
        return keys

    def _next_id(self, stream: str) -> str:
        """An entry id above every one this caller chose or saw on ``stream``: the current
        millisecond, or — within the same (or a clock that stepped back) — the next sequence
        number. Chosen when the call is sealed, so calls go out in the order of their ids."""
        now_ms = int(time.time() * 1000)
        last = self._last_ids.get(stream)
        chosen = (now_ms, 0) if last is None or now_ms > last[0] else (last[0], last[1] + 1)
        self._last_ids[stream] = chosen
        return f"{chosen[0]}-{chosen[1]}"

    def _saw_id(self, stream: str, used: bytes) -> None:
        """Redis added a call under ``used`` (it refused the chosen id): choose above it next."""
        milliseconds, _, sequence = used.partition(b"-")
        seen = (int(milliseconds), int(sequence or 0))
        if seen > self._last_ids.get(stream, (0, 0)):
            self._last_ids[stream] = seen

    async def _submit(self, arguments: tuple[Any, ...]) -> bytes:
        """Hand a call's send-script arguments to the sender task; its outcome (the entry id,
        ``NO_WORKER``, ``KEY_MISMATCH``, ``FULL``).

        Calls submitted while a batch is being sent go out together in the next one (one round
        trip for many calls under load). A call made while nothing is on the way goes out at
        once, without a hand-off to the sender task — after one turn of the loop when other calls
        of this transport are waiting: replies read together resume their callers together, and
        the turn's calls then share one pipeline instead of two. A lone call (sequential calls)
        has nobody to wait for and skips that turn."""
        first = False
        if not self._sending and not self._outbox and self._send_sha is not None:
            self._sending += 1
            first = True
            try:
                if len(self._replies.waiting) > 1:
                    await asyncio.sleep(0)
                if not self._outbox:
                    with _TRANSPORT_ERRORS:
                        try:
                            return bytes(await self._client.evalsha(self._send_sha, *arguments))
                        except redis_errors.NoScriptError:
                            self._send_sha = None  # Redis lost its scripts: the sender loads it
            finally:
                self._sending -= 1
        sent: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()
        if first:
            # Its entry id was chosen before those of the calls queued meanwhile: it goes first,
            # or Redis would refuse its id (below theirs) and choose another.
            self._outbox.insert(0, (arguments, sent))
        else:
            self._outbox.append((arguments, sent))
        self._outbox_ready.set()
        if self._sender is None or self._sender.done():
            self._sender = asyncio.get_running_loop().create_task(
                self._send_batches(), name=f"ditto-calls-{self._id[:8]}"
            )
        return await sent

    async def _send_batches(self) -> None:
        while not self._closed:
            await self._outbox_ready.wait()
            self._outbox_ready.clear()
            # Bounded, so that packing a pipeline never holds the loop long enough to make
            # other calls' deadlines late; what is left goes in the next pipeline.
            batch = self._outbox[:_SEND_BATCH]
            del self._outbox[:_SEND_BATCH]
            if self._outbox:
                self._outbox_ready.set()
            batch = [item for item in batch if not item[1].done()]  # callers that gave up
            if not batch:
                continue
            self._sending += 1
            try:
                outcomes = await self._send_pipelined([arguments for arguments, _ in batch])
            except (redis_errors.RedisError, OSError) as exc:
                outcomes = [exc] * len(batch)
            finally:
                self._sending -= 1
            for (_, sent), outcome in zip(batch, outcomes, strict=True):
                if sent.done():
                    continue
                if isinstance(outcome, BaseException):
                    sent.set_exception(translate(outcome, TRANSPORT_ERRORS) or outcome)
                else:
                    sent.set_result(outcome)

    async def _send_pipelined(self, batch: Sequence[tuple[Any, ...]]) -> list[Any]:
        """Run the send script for every call of ``batch`` in one pipeline, in order (their
        entry ids grow with it).

        The script is loaded once and called by its SHA (redis-py's pipelined ``Script`` would
        ask ``SCRIPT EXISTS`` on every batch: one more round trip per call when calls come one
        by one); after a Redis restart it is loaded again and the batch sent again."""
        for _ in range(2):
            if self._send_sha is None:
                self._send_sha = await self._client.script_load(SEND_SCRIPT)
            async with self._client.pipeline(transaction=False) as pipe:
                for arguments in batch:
                    pipe.evalsha(self._send_sha, *arguments)
                outcomes: list[Any] = await pipe.execute(raise_on_error=False)
            if not any(isinstance(outcome, redis_errors.NoScriptError) for outcome in outcomes):
                return outcomes
            self._send_sha = None  # Redis lost its scripts (a restart): load and send again
        return outcomes

    def _seal_cancel(self, execution_id: str) -> bytes:
        return self._signer.seal(CancelNotice(execution_id))

    async def cancel(self, execution_id: str) -> None:
        try:
            await self._client.publish(
                cancel_channel(self._prefix), self._seal_cancel(execution_id)
            )
        except (redis_errors.RedisError, OSError):
            logger.debug("could not publish the cancel notice of %s", execution_id)

    def _notify_cancel(self, execution_id: str) -> None:
        self._cancels.add(execution_id)  # batched: never a round trip per timed-out call

    def _notify_lost(self, execution_ids: list[str]) -> None:
        # Lost with Redis's data, or sent again after the restart: cancelling is harmless.
        for execution_id in execution_ids:
            self._cancels.add(execution_id)

    async def aclose(self) -> None:
        if self._closed:
            return
        self._closed = True
        await self._cancels.aclose()
        await self._clocks.aclose()
        if self._sender is not None:
            self._sender.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._sender
        for _, sent in self._outbox:
            if not sent.done():
                sent.set_exception(unavailable())
        await self._replies.aclose(unavailable)
        if self._owns_client:
            await self._client.aclose()
            await self._client.connection_pool.disconnect()
