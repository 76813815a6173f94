"""A remote worker's presence in the directory callers read: a heartbeat every
``heartbeat_ms`` (the worker counts as dead after three missed beats, judged on the Redis
server's clock by the callers' send script) and its removal when the worker leaves.

Each beat puts the worker in each served node type's live set, plain and under the fingerprint
of every secret it opens (current and previous: see
:class:`~ditto.runtime.transports.envelope.Signer`), and writes its description (``ditto worker
list``), which carries its clock: ``clock`` (the worker's Unix time when it beat, in seconds) and
``clock_offset`` (how far the worker's clock is ahead of the Redis server's ``TIME``, in seconds,
measured on the previous beat; ``null`` before one succeeded). A worker whose clock is more than
:data:`CLOCK_TOLERANCE` seconds off logs a warning: deadlines are absolute, so a clock ahead
answers calls ``timeout`` before they start, and one behind runs them past their deadline.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import socket
import time
from collections.abc import Callable
from typing import Any

import redis.asyncio as aioredis
from redis import exceptions as redis_errors

from ditto.adapters.redis.keys import HEARTBEAT_SCRIPT, keyed_nodes_key, nodes_key, worker_key

__all__ = ("CLOCK_TOLERANCE", "Presence")

logger = logging.getLogger("ditto.remote")

CLOCK_TOLERANCE = 2.0
"""Seconds a worker's clock may differ from the Redis server's before it warns."""


class Presence:
    """One worker's entry under ``prefix``: its description, and its place in each served node
    type's set of live workers (``clock``: the worker's Unix time, replaceable in tests)."""

    def __init__(
        self,
        client: aioredis.Redis,
        prefix: str,
        worker_id: str,
        node_types: list[str],
        heartbeat_ms: int,
        fingerprints: tuple[str, ...],
        *,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._client = client
        self._prefix = prefix
        self._worker_id = worker_id
        self._node_types = node_types
        self._heartbeat_ms = heartbeat_ms
        self._fingerprints = fingerprints
        self._script = client.register_script(HEARTBEAT_SCRIPT)
        self._clock = clock
        self.clock_offset: float | None = None
        """The worker's clock minus the Redis server's, in seconds (the last beat's)."""
        self._skewed = False

    async def beat(self, describe: Callable[[], dict[str, Any]], stopping: asyncio.Event) -> None:
        """Announce the worker until cancelled; a worker that is stopping no longer announces
        itself (callers then stop sending to it). Redis outages are ridden out: the next beat
        tries again."""
        ttl = self._heartbeat_ms * 3
        keys = [worker_key(self._prefix, self._worker_id), *self._sets()]
        host, pid = socket.gethostname(), os.getpid()
        while True:
            sent = self._clock()
            description = json.dumps(
                {
                    "id": self._worker_id,
                    "host": host,
                    "pid": pid,
                    **describe(),
                    "clock": sent,
                    "clock_offset": self.clock_offset,
                    "fingerprints": list(self._fingerprints),
                }
            )
            with contextlib.suppress(redis_errors.RedisError, OSError):
                if not stopping.is_set():
                    server_ms = await self._script(
                        keys=keys, args=[self._worker_id, ttl, description]
                    )
                    # The server read its clock somewhere between sending and answering.
                    self._observe((sent + self._clock()) / 2 - int(server_ms) / 1000)
            await asyncio.sleep(self._heartbeat_ms / 1000)

    def _observe(self, offset: float) -> None:
        self.clock_offset = offset
        skewed = abs(offset) > CLOCK_TOLERANCE
        if skewed and not self._skewed:
            logger.warning(
                "this worker's clock is %.1f s %s the Redis server's (more than %.0f s): call "
                "deadlines are absolute, so calls will time out early or run late; keep the "
                "hosts' clocks in sync (NTP)",
                abs(offset),
                "ahead of" if offset > 0 else "behind",
                CLOCK_TOLERANCE,
            )
        elif self._skewed and not skewed:
            logger.warning("this worker's clock is back within %.0f s of Redis's", CLOCK_TOLERANCE)
        self._skewed = skewed

    def _sets(self) -> list[str]:
        """The live-worker sets this worker is in: per node type, plain and by each key it
        opens (current and previous: a caller holding either may send to it)."""
        return [
            key
            for node_type in self._node_types
            for key in (
                nodes_key(self._prefix, node_type),
                *(
                    keyed_nodes_key(self._prefix, node_type, fingerprint)
                    for fingerprint in self._fingerprints
                ),
            )
        ]

    async def leave(self) -> None:
        """Remove the worker from the directory (best effort: an unreachable Redis lets the
        entry expire by itself)."""
        with contextlib.suppress(redis_errors.RedisError, OSError):
            async with self._client.pipeline(transaction=True) as pipe:
                for key in self._sets():
                    pipe.zrem(key, self._worker_id)
                pipe.delete(worker_key(self._prefix, self._worker_id))
                await pipe.execute()
