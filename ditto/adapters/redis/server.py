"""The worker's side of remote workers over Redis Streams: read calls, run them on a local
runtime, reply, acknowledge.

Delivery is at-least-once, from Redis Streams consumer groups:

* Each served node type's stream is read through the group ``workers``; a call read by a worker
  stays in the group's pending list until the worker has replied and acknowledged it.
* A worker that dies leaves its calls pending. Live workers take over calls idle for longer than
  ``claim_idle_ms`` (``XAUTOCLAIM``; default 5 s) and run them again with ``ctx.attempt`` = the
  delivery count. A live worker keeps its own calls from going idle from a thread of its own
  (:mod:`~ditto.adapters.redis.renewal`, every fifth of ``claim_idle_ms``), so a slow call — or
  a handler that blocks the event loop — is never taken from a worker that is still on it.
* An execution id runs once (:mod:`~ditto.adapters.redis.admission`): a replayed envelope is
  acknowledged and dropped; only the same entry taken over from a dead holder runs again. A call
  read fresh, on the entry its caller bound it to, is admitted without a round trip.
* A call whose deadline has passed is never started: it is answered ``timeout``.
* A *failed* result is a result: it is replied and acknowledged, never retried.
* A message that cannot be opened, or names another node type, is dead-lettered
  (:mod:`~ditto.adapters.redis.dead_letters`), acknowledged and never answered (its reply
  address cannot be trusted either); a call delivered more than ``max_deliveries`` times is
  dead-lettered and answered ``DEAD_LETTERED``.

Stopping (SIGTERM) stops reading, lets the calls in flight finish (each is bounded by its
deadline), replies and acknowledges them, and removes the worker from the directory.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING, Any

import redis.asyncio as aioredis
from redis import exceptions as redis_errors

from ditto.adapters.redis.handling import CallHandler
from ditto.adapters.redis.keys import GROUP, calls_key
from ditto.adapters.redis.presence import Presence
from ditto.adapters.redis.renewal import LeaseRenewal, sync_client_like
from ditto.adapters.redis.replies import RETRY_DELAY, text
from ditto.errors import DittoError
from ditto.runtime.transports.envelope import Signer

if TYPE_CHECKING:
    from collections.abc import Iterable

    import redis

    from ditto.runtime.context import Invoker

__all__ = (
    "CLAIM_IDLE_RENEWALS",
    "DEFAULT_CLAIM_IDLE_MS",
    "DEFAULT_MAX_DELIVERIES",
    "RemoteWorkerServer",
)

logger = logging.getLogger("ditto.remote")

_READ_BLOCK_MS = 500
CLAIM_IDLE_RENEWALS = 5
"""A worker renews its calls this many times per ``claim_idle_ms``: four renewals can be missed
(a busy machine, a slow Redis) before a live worker's call looks abandoned."""
DEFAULT_CLAIM_IDLE_MS = 5_000
"""Renewals every second, so a dead worker's calls are taken over within about 5 s — well
inside the default 30 s node deadline."""
DEFAULT_MAX_DELIVERIES = 5
"""Deliveries of one call (its workers died on it) before it is dead-lettered."""


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
        claim_idle_ms: Take over calls pending this long on a worker that stopped renewing them;
            this worker renews its own every ``claim_idle_ms / 5``.
        heartbeat_ms: How often the worker announces itself; it is considered dead after three
            missed beats.
        max_deliveries: Deliveries of one call before it is dead-lettered (``DEAD_LETTERED``).
        renewal_client: A synchronous client for the renewal thread (default: one like
            ``client``); closed when serving ends.
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
        claim_idle_ms: int | None = None,
        heartbeat_ms: int = 1_000,
        max_deliveries: int = DEFAULT_MAX_DELIVERIES,
        renewal_client: redis.Redis | None = None,
    ) -> None:
        self._client = client
        self.worker_id = worker_id
        self._prefix = prefix
        self._concurrency = concurrency
        self.claim_idle_ms = DEFAULT_CLAIM_IDLE_MS if claim_idle_ms is None else claim_idle_ms
        self.node_types = sorted(set(node_types))
        if not self.node_types:
            raise DittoError("a remote worker needs at least one local node type to serve")
        self._streams = {calls_key(prefix, node_type): node_type for node_type in self.node_types}
        self._presence = Presence(
            client, prefix, worker_id, self.node_types, heartbeat_ms, signer.fingerprints
        )
        self._renewal = LeaseRenewal(
            renewal_client or sync_client_like(client),
            worker_id,
            self.claim_idle_ms / CLAIM_IDLE_RENEWALS / 1000,
        )
        self._calls = CallHandler(
            invoke,
            client,
            signer,
            self._streams,
            worker_id=worker_id,
            prefix=prefix,
            max_deliveries=max_deliveries,
        )
        self._fresh_read = self.claim_idle_ms / 1000 - 2 * self._renewal.interval
        """A read answered within this many seconds of being sent is fresh: none of its entries
        has been idle long enough to be taken over, and the renewal thread holds them from
        ``_start`` on — so an entry bound to its id may skip the admission round trip."""
        self._inflight: dict[asyncio.Task[None], tuple[str, bytes]] = {}
        """Every call taken and not yet answered: its task -> (its stream, its entry id)."""
        self._free = concurrency
        """Calls this worker could start now."""
        self._room = asyncio.Event()
        self._room.set()
        self._stopping = asyncio.Event()
        self._groups_ready = False
        self.started_at = time.time()

    # ----------------------------------------------------------------- lifecycle

    async def serve(self) -> None:
        """Serve until :meth:`stop`; then drain, reply, acknowledge and deregister."""
        self._renewal.start()
        background = [
            asyncio.create_task(
                self._presence.beat(self._describe, self._stopping), name="ditto-worker-heartbeat"
            ),
            asyncio.create_task(self._calls.listen_for_cancels(), name="ditto-worker-cancels"),
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
            await asyncio.to_thread(self._renewal.stop)
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
                sent_at = time.monotonic()
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
            fresh = time.monotonic() - sent_at < self._fresh_read
            for stream, entries in answer or ():
                for entry_id, fields in entries:
                    self._start(
                        text(stream), entry_id, fields.get(b"e", b""), claimed=False, fresh=fresh
                    )

    def _start(
        self, stream: str, entry_id: bytes, sealed: bytes, *, claimed: bool, fresh: bool = False
    ) -> None:
        self._free -= 1
        # Held before anything else can run: a fresh read's entries must be renewed from here.
        self._renewal.hold(stream, entry_id)
        task = asyncio.create_task(self._calls.handle(stream, entry_id, sealed, claimed, fresh))
        self._inflight[task] = (stream, entry_id)
        task.add_done_callback(self._done)

    def _done(self, task: asyncio.Task[None]) -> None:
        held = self._inflight.pop(task, None)
        if held is not None:
            self._renewal.release(*held)
        self._free += 1
        self._room.set()
        if not task.cancelled() and task.exception() is not None:
            logger.error("a remote call failed in the worker", exc_info=task.exception())

    async def _reclaim(self) -> None:
        """Take over calls left pending by dead workers (not once stopping: a draining worker
        takes nothing new; its own calls are renewed by the renewal thread meanwhile)."""
        interval = max(self._renewal.interval, 0.02)
        while True:
            await asyncio.sleep(interval)
            if not self._groups_ready or self._stopping.is_set():
                continue
            try:
                for stream in self._streams:
                    await self._claim(stream)
            except (redis_errors.RedisError, OSError):
                continue

    async def _claim(self, stream: str) -> None:
        room = self._free
        if room <= 0:
            return
        answer: Any = await self._client.xautoclaim(
            stream, GROUP, self.worker_id, self.claim_idle_ms, "0-0", count=room
        )
        for entry_id, fields in answer[1]:
            if fields is None:
                continue  # deleted meanwhile
            logger.info("took over %s %s", stream, text(entry_id))
            self._start(stream, entry_id, fields.get(b"e", b""), claimed=True)

    # ----------------------------------------------------------------- one call

    # ----------------------------------------------------------------- presence

    def _describe(self) -> dict[str, Any]:
        """What the directory shows of this worker (``ditto worker list``)."""
        return {
            "node_types": self.node_types,
            "concurrency": self._concurrency,
            "in_flight": len(self._inflight),
            "free": self._free,
            "handled": self._calls.handled,
            "replays_dropped": self._calls.admission.replays_dropped,
            "admitted_locally": self._calls.admission.admitted_locally,
            "admission_checks": self._calls.admission.checked,
            "dead_lettered": self._calls.dead.added,
            "claim_idle_ms": self.claim_idle_ms,
            "started_at": self.started_at,
            "heartbeat_at": time.time(),
        }
