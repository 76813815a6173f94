"""``ditto worker serve`` and ``ditto worker list``: a process serving node types to runtimes on
other hosts over Redis Streams, and a view of the live ones.

A worker process builds its workers as ``bootstrap`` does — the configured MEMORY, CONTEXT and
RETRIEVAL workers and/or user workers named by import path (``myapp.workers:weather``) — on its own
services, credentials and access policy, and serves their node types until SIGTERM or SIGINT:
then it stops reading, finishes the calls in flight, replies, acknowledges and deregisters.
"""

from __future__ import annotations

import asyncio
import importlib
import json
import os
import signal
import socket
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from ditto.errors import ConfigError
from ditto.runtime.worker import WorkerDefinition

if TYPE_CHECKING:
    import redis
    import redis.asyncio as aioredis

    from ditto.app.config.settings import Settings
    from ditto.runtime.router import WorkerInfo

__all__ = (
    "BUILT_IN",
    "DEFAULT_CONCURRENCY",
    "declared_concurrency",
    "list_workers",
    "load_worker",
    "redis_client",
    "serve_worker",
)

BUILT_IN = ("memory", "context", "retrieval")
DEFAULT_KINDS = ("memory", "context")
"""What a worker process serves when no ``--worker`` is given."""


def load_worker(target: str) -> WorkerDefinition:
    """The worker definition at ``module:attr`` (an attribute, or a function of no arguments
    returning one), importing from the current directory too.

    Raises:
        ConfigError: The target is malformed, cannot be imported, or is not a worker definition.
    """
    module_name, _, attribute = target.partition(":")
    if not module_name or not attribute:
        raise ConfigError(
            f"--worker {target!r}: expected memory, context, retrieval or module:attr"
        )
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        value: Any = importlib.import_module(module_name)
    except ImportError as exc:
        raise ConfigError(f"--worker {target!r}: cannot import {module_name!r} ({exc})") from None
    for part in attribute.split("."):
        if not hasattr(value, part):
            raise ConfigError(f"--worker {target!r}: {module_name!r} has no {attribute!r}")
        value = getattr(value, part)
    if callable(value) and not isinstance(value, WorkerDefinition):
        value = value()
    if not isinstance(value, WorkerDefinition):
        raise ConfigError(f"--worker {target!r} is not a worker definition (define_worker)")
    return value


def _url(settings: Settings) -> str:
    url = settings.runtime.remote.redis_url
    if url is None:
        raise ConfigError("remote workers need DITTO_RUNTIME_REMOTE_REDIS_URL in the environment")
    return url.get_secret_value()


def redis_client(settings: Settings, connections: int) -> aioredis.Redis:
    """A client of the remote workers' Redis (``DITTO_RUNTIME_REMOTE_REDIS_URL``).

    Raises:
        ConfigError: The variable is not set.
    """
    import redis.asyncio as aioredis

    url = _url(settings)
    pool = aioredis.BlockingConnectionPool.from_url(
        url,
        decode_responses=False,
        max_connections=connections,
        timeout=None,
        socket_connect_timeout=2.0,
        health_check_interval=10,
    )
    return aioredis.Redis(connection_pool=pool)


def _renewal_client(settings: Settings) -> redis.Redis:
    """The renewal thread's own synchronous client (one connection; see
    :mod:`ditto.adapters.redis.renewal`)."""
    import redis

    return redis.Redis.from_url(
        _url(settings),
        decode_responses=False,
        max_connections=1,
        socket_timeout=2.0,
        socket_connect_timeout=2.0,
    )


DEFAULT_CONCURRENCY = 16
"""Calls a worker process runs at once when its workers declare no limit."""

MAX_DECLARED = 256
"""The most calls a process takes from its workers' declarations alone (say more with
``--concurrency``)."""


def declared_concurrency(workers: Sequence[WorkerInfo]) -> int:
    """What a worker process can run at once: the sum of its workers' declared concurrency
    (taking more calls than that would only fail them with ``NO_WORKER_AVAILABLE`` here), or
    :data:`DEFAULT_CONCURRENCY` when one declares no limit; at most :data:`MAX_DECLARED`."""
    limits = [info.concurrency for info in workers]
    if not limits or any(limit is None for limit in limits):
        return DEFAULT_CONCURRENCY
    return min(MAX_DECLARED, sum(limit for limit in limits if limit is not None))


async def serve_worker(
    settings: Settings,
    *,
    kinds: Sequence[str],
    concurrency: int | None,
    worker_id: str | None,
    started: Callable[[str, list[str], int], None] | None = None,
) -> None:
    """Serve until SIGTERM/SIGINT, then drain and deregister.

    Args:
        kinds: ``memory``, ``context``, ``retrieval`` and/or ``module:attr`` targets (empty:
            memory and context).
        concurrency: Calls run at once; default what the served workers declare (see
            :func:`declared_concurrency`).
        worker_id: This worker's name; default ``<host>-<pid>``.
        started: Called with the worker id, its node types and its concurrency once it serves.

    Raises:
        ConfigError: A bad target, no Redis URL, or no shared secret.
        DittoError: ``TRANSPORT_UNAVAILABLE`` when Redis cannot be reached at start (later
            outages are waited out: the worker reconnects by itself).
    """
    from ditto.adapters.redis.server import RemoteWorkerServer
    from ditto.adapters.redis.streams import transport_errors
    from ditto.app.bootstrap import open_runtime
    from ditto.runtime.transports.envelope import Signer

    kinds = list(kinds) or list(DEFAULT_KINDS)
    if "retrieval" in kinds and not settings.workers.retrieval.targets:
        raise ConfigError("--worker retrieval: workers.retrieval.targets is empty")
    user = [load_worker(kind) for kind in kinds if kind not in BUILT_IN]
    signer = Signer.from_environment()
    client = redis_client(settings, (concurrency or MAX_DECLARED) + 8)
    renewal_client = _renewal_client(settings)
    try:
        with transport_errors():  # an unreachable Redis fails at start, not silently later
            await client.ping()
    except BaseException:
        await client.aclose()
        await client.connection_pool.disconnect()
        renewal_client.close()
        raise
    remote = settings.runtime.remote
    try:
        async with open_runtime(
            settings,
            workers=user,
            memory="memory" in kinds,
            context="context" in kinds,
            retrieval="retrieval" in kinds,
            remote=False,
        ) as runtime:
            local = [info for info in runtime.workers() if info.type != "remote"]
            if concurrency is None:
                concurrency = declared_concurrency(local)
            server = RemoteWorkerServer(
                runtime.engine.invoke_nested,
                [node_type for info in local for node_type in info.node_types],
                client,
                signer,
                worker_id=worker_id or f"{socket.gethostname()}-{os.getpid()}",
                prefix=remote.prefix,
                concurrency=concurrency,
                claim_idle_ms=remote.claim_idle_ms,
                heartbeat_ms=remote.heartbeat_ms,
                renewal_client=renewal_client,
            )
            loop = asyncio.get_running_loop()
            for signum in (signal.SIGTERM, signal.SIGINT):
                loop.add_signal_handler(signum, server.stop)
            if started is not None:
                started(server.worker_id, server.node_types, concurrency)
            await server.serve()
    finally:
        await client.aclose()
        await client.connection_pool.disconnect()


async def list_workers(settings: Settings) -> dict[str, Any]:
    """Live workers (id, host, node types, in flight, free capacity, last heartbeat) and, per
    node type they serve, the calls waiting or running and those taken by a worker."""
    from redis import exceptions as redis_errors

    from ditto.adapters.redis.keys import GROUP, calls_key, worker_pattern
    from ditto.adapters.redis.streams import transport_errors

    client = redis_client(settings, 4)
    prefix = settings.runtime.remote.prefix
    try:
        with transport_errors():
            keys = sorted([key async for key in client.scan_iter(match=worker_pattern(prefix))])
            values = await client.mget(keys) if keys else []
            workers = [json.loads(value) for value in values if value is not None]
            node_types = sorted({t for worker in workers for t in worker["node_types"]})
            pending = {}
            for node_type in node_types:
                stream = calls_key(prefix, node_type)
                waiting = await client.xlen(stream)
                try:
                    summary: Any = await client.xpending(stream, GROUP)
                    taken = int(summary["pending"])
                except redis_errors.ResponseError:  # no group yet: nothing was ever read
                    taken = 0
                pending[node_type] = {"queued": max(0, waiting - taken), "running": taken}
    finally:
        await client.aclose()
        await client.connection_pool.disconnect()
    return {"workers": workers, "pending": pending}
