"""The caller's view of its workers' clocks, from their heartbeats.

A call's deadline travels as absolute Unix time, and a worker never starts a call past it on
*its* clock: a worker whose clock runs 10 s ahead answered every call ``timeout`` at once. Each
worker's description carries ``clock_offset`` — its clock minus the Redis server's, measured on
its heartbeat (:mod:`~ditto.adapters.redis.presence`). The caller measures its own offset to
the same server (``TIME``, halfway through the round trip), so the skew between the caller and
a worker is the difference of the two offsets, whatever the Redis host's own clock says.

What the caller does with it:

* A skew beyond :data:`SKEW_TOLERANCE` is logged once per worker (WARNING), and again once it
  is back within the bound.
* When every live worker of a node type runs ahead, calls of that node type carry their
  deadline moved forward by the smallest of those skews (:meth:`ClockWatch.ahead`), so every
  worker sees at most the budget the caller gave; the caller's own deadline, on its own clock,
  is unchanged. A worker behind the caller needs nothing: it would run a call past the caller's
  deadline at most, and the caller's cancel notice stops it.

Checks run every :data:`CHECK_INTERVAL` seconds for the node types this caller has sent to, in
a task of their own: never on a call's path, best effort (Redis errors skip a check).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from typing import Any

import redis.asyncio as aioredis
from redis import exceptions as redis_errors

from ditto.adapters.redis.keys import nodes_key, worker_key

__all__ = ("CHECK_INTERVAL", "SKEW_TOLERANCE", "ClockWatch")

logger = logging.getLogger("ditto.remote")

SKEW_TOLERANCE = 2.0
"""Seconds a worker's clock may differ from the caller's before the caller warns."""
CHECK_INTERVAL = 5.0
"""Seconds between looks at the workers' clocks."""
_SHIFT_FLOOR = 0.25
"""Skews below this are measurement noise: deadlines are not moved for them."""


class ClockWatch:
    """Tracks the clock skew of the live workers of the node types a caller sends to."""

    def __init__(self, client: aioredis.Redis, prefix: str) -> None:
        self._client = client
        self._prefix = prefix
        self._node_types: set[str] = set()
        self._ahead: dict[str, float] = {}
        self._skewed: set[str] = set()
        """Workers reported beyond the tolerance (reported again once back within it)."""
        self._task: asyncio.Task[None] | None = None

    def ahead(self, node_type: str) -> float:
        """Seconds to move a call's deadline forward: how far the *least* skewed live worker of
        ``node_type`` runs ahead of this caller (0 when any is in step or behind)."""
        ahead = self._ahead.get(node_type)
        if ahead is None:
            if node_type not in self._node_types:
                self._node_types.add(node_type)
                self._start()
            return 0.0
        return ahead

    def _start(self) -> None:
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(
                self._watch(), name="ditto-worker-clocks"
            )

    async def _watch(self) -> None:
        while True:
            with contextlib.suppress(redis_errors.RedisError, OSError, ValueError):
                await self.check()  # best effort: the next check tries again
            await asyncio.sleep(CHECK_INTERVAL)

    async def check(self) -> None:
        """Read the live workers' clock offsets once and update the skews (one or two round
        trips; public so a test or a health check can run it on demand)."""
        node_types = sorted(self._node_types)
        if not node_types:
            return
        before = time.time()
        async with self._client.pipeline(transaction=False) as pipe:
            pipe.time()
            for node_type in node_types:
                pipe.zrange(nodes_key(self._prefix, node_type), 0, -1, withscores=True)
            server_time, *members = await pipe.execute()
        mine = (before + time.time()) / 2 - (server_time[0] + server_time[1] / 1e6)
        now_ms = server_time[0] * 1000 + server_time[1] // 1000
        live: dict[str, list[str]] = {
            node_type: [_text(member) for member, expires in entries if expires >= now_ms]
            for node_type, entries in zip(node_types, members, strict=True)
        }
        workers = sorted({worker for ids in live.values() for worker in ids})
        if not workers:
            return
        raw: list[Any] = await self._client.mget(
            [worker_key(self._prefix, worker) for worker in workers]
        )
        skews = {
            worker: offset - mine
            for worker, offset in zip(workers, map(_offset, raw), strict=True)
            if offset is not None
        }
        for worker, skew in skews.items():
            self._report(worker, skew)
        for node_type, ids in live.items():
            known = [skews[worker] for worker in ids if worker in skews]
            least = min(known) if known and len(known) == len(ids) else 0.0
            self._ahead[node_type] = least if least > _SHIFT_FLOOR else 0.0

    def _report(self, worker: str, skew: float) -> None:
        if abs(skew) > SKEW_TOLERANCE:
            if worker not in self._skewed:
                self._skewed.add(worker)
                logger.warning(
                    "remote worker %s's clock is %.1f s %s this caller's (more than %.0f s): "
                    "its calls' deadlines are moved to its clock while every live worker of a "
                    "node type runs ahead; keep the hosts' clocks in sync (NTP)",
                    worker,
                    abs(skew),
                    "ahead of" if skew > 0 else "behind",
                    SKEW_TOLERANCE,
                )
        elif worker in self._skewed:
            self._skewed.discard(worker)
            logger.warning("remote worker %s's clock is back within %.0f s", worker, SKEW_TOLERANCE)

    async def aclose(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            await asyncio.wait({task}, timeout=1.0)


def _offset(raw: bytes | None) -> float | None:
    """A description's ``clock_offset`` (``None``: no description, an older worker, or no beat
    measured yet)."""
    if raw is None:
        return None
    try:
        value = json.loads(raw).get("clock_offset")
    except (ValueError, AttributeError):
        return None
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value
