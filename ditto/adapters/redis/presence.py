"""A remote worker's presence in the directory callers read: a heartbeat every
``heartbeat_ms`` (the worker counts as dead after three missed beats, judged on the Redis
server's clock by the callers' send script) and its removal when the worker leaves."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import socket
from collections.abc import Callable
from typing import Any

import redis.asyncio as aioredis
from redis import exceptions as redis_errors

from ditto.adapters.redis.keys import HEARTBEAT_SCRIPT, keyed_nodes_key, nodes_key, worker_key

__all__ = ("Presence",)


class Presence:
    """One worker's entry under ``prefix``: its description, and its place in each served node
    type's set of live workers."""

    def __init__(
        self,
        client: aioredis.Redis,
        prefix: str,
        worker_id: str,
        node_types: list[str],
        heartbeat_ms: int,
        fingerprint: str,
    ) -> None:
        self._client = client
        self._prefix = prefix
        self._worker_id = worker_id
        self._node_types = node_types
        self._heartbeat_ms = heartbeat_ms
        self._fingerprint = fingerprint
        self._script = client.register_script(HEARTBEAT_SCRIPT)

    async def beat(self, describe: Callable[[], dict[str, Any]], stopping: asyncio.Event) -> None:
        """Announce the worker until cancelled; a worker that is stopping no longer announces
        itself (callers then stop sending to it). Redis outages are ridden out: the next beat
        tries again."""
        ttl = self._heartbeat_ms * 3
        keys = [worker_key(self._prefix, self._worker_id), *self._sets()]
        host, pid = socket.gethostname(), os.getpid()
        while True:
            description = json.dumps(
                {"id": self._worker_id, "host": host, "pid": pid, **describe()}
            )
            with contextlib.suppress(redis_errors.RedisError, OSError):
                if not stopping.is_set():
                    await self._script(keys=keys, args=[self._worker_id, ttl, description])
            await asyncio.sleep(self._heartbeat_ms / 1000)

    def _sets(self) -> list[str]:
        """The live-worker sets this worker is in: per node type, plain and by key."""
        return [
            key
            for node_type in self._node_types
            for key in (
                nodes_key(self._prefix, node_type),
                keyed_nodes_key(self._prefix, node_type, self._fingerprint),
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
