"""Transport harness: every port guarantee runs against each engine in ``TRANSPORTS``.

A harness is a started caller-side transport plus a way to serve a worker definition behind
it, all in the test's own space (for Redis Streams: the test's key prefix). Adding an engine
means writing one factory (an async context manager yielding a :class:`Harness`) and adding it
to ``TRANSPORTS``.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any, Protocol

import anyio
import pytest
import redis.asyncio as aioredis
from anyio.abc import TaskGroup

from ditto import create_ditto
from ditto.adapters.redis.keys import calls_key, cancel_channel, nodes_key
from ditto.adapters.redis.server import RemoteWorkerServer
from ditto.adapters.redis.streams import RedisStreamsTransport
from ditto.runtime.transports.envelope import Signer
from ditto.runtime.transports.port import Transport
from ditto.runtime.worker import WorkerDefinition
from tests.services import RedisSpace

SECRET = b"transport-conformance-secret-0123456789"
_READY_SECONDS = 10.0
_STOP_SECONDS = 15.0
_POLL = 0.02


class Served(Protocol):
    """A worker serving behind the harness's transport."""

    worker_id: str

    async def stop(self) -> None:
        """Stop serving (calls in flight finish); once it returns the worker is not live."""
        ...


class Harness(Protocol):
    """One engine, in one test's own space."""

    transport: Transport
    """A started caller-side transport (closed at the end of the test)."""
    secret: bytes
    """The secret callers and workers share."""

    def new_transport(self, secret: bytes | None = None) -> Transport:
        """Another caller on the same space (closed at the end of the test), with the shared
        secret or ``secret``."""
        ...

    async def serve(self, worker: WorkerDefinition, worker_id: str) -> Served:
        """Serve ``worker``'s node types on a local runtime; returns once the worker is live,
        i.e. a call sent now reaches it and a cancel notice published now is heard."""
        ...

    async def send_raw(self, node_type: str, message: bytes) -> None:
        """Put ``message`` where workers read ``node_type``'s calls, bypassing the transport
        (to deliver forged or garbage calls)."""
        ...

    async def drained(self, node_type: str) -> bool:
        """Whether the workers have taken and finished every message sent for ``node_type``."""
        ...


class _RedisServed:
    def __init__(self, server: RemoteWorkerServer, stopped: anyio.Event) -> None:
        self.worker_id = server.worker_id
        self.server = server
        self.stopped = stopped

    async def stop(self) -> None:
        self.server.stop()
        with anyio.fail_after(_STOP_SECONDS):
            await self.stopped.wait()


class RedisStreamsHarness:
    """``RedisStreamsTransport`` callers and in-process ``RemoteWorkerServer`` workers."""

    def __init__(self, space: RedisSpace, client: aioredis.Redis, group: TaskGroup) -> None:
        self.space = space
        self.client = client
        self.group = group
        self.secret = SECRET
        self.transports: list[RedisStreamsTransport] = []
        self.served: list[_RedisServed] = []
        self.transport: Transport = self.new_transport()

    def new_transport(self, secret: bytes | None = None) -> RedisStreamsTransport:
        made = RedisStreamsTransport.from_url(
            self.space.url, Signer(secret or self.secret), prefix=self.space.prefix
        )
        self.transports.append(made)
        return made

    async def serve(self, worker: WorkerDefinition, worker_id: str) -> Served:
        runtime = create_ditto(workers=[worker])
        server = RemoteWorkerServer(
            runtime.engine.invoke_nested,
            worker.node_types,
            self.client,
            Signer(self.secret),
            worker_id=worker_id,
            prefix=self.space.prefix,
            concurrency=64,
            heartbeat_ms=200,
        )
        stopped = anyio.Event()

        async def run() -> None:
            try:
                async with runtime:
                    await server.serve()
            finally:
                stopped.set()

        self.group.start_soon(run)
        served = _RedisServed(server, stopped)
        self.served.append(served)
        deadline = time.monotonic() + _READY_SECONDS
        while not await self._live(server):
            if stopped.is_set() or time.monotonic() > deadline:
                raise AssertionError(f"worker {worker_id} did not become live")
            await anyio.sleep(_POLL)
        return served

    async def _live(self, server: RemoteWorkerServer) -> bool:
        channel = cancel_channel(self.space.prefix)
        async with self.client.pipeline(transaction=False) as pipe:
            for node_type in server.node_types:
                pipe.zscore(nodes_key(self.space.prefix, node_type), server.worker_id)
            pipe.pubsub_numsub(channel)
            *scores, subscribers = await pipe.execute()
        listening = sum(1 for served in self.served if not served.stopped.is_set())
        return all(score is not None for score in scores) and subscribers[0][1] >= listening

    async def send_raw(self, node_type: str, message: bytes) -> None:
        await self.client.xadd(calls_key(self.space.prefix, node_type), {"e": message})

    async def drained(self, node_type: str) -> bool:
        return int(await self.client.xlen(calls_key(self.space.prefix, node_type))) == 0

    async def close(self) -> None:
        for made in self.transports:
            await made.aclose()
        for served in self.served:
            served.server.stop()
        with anyio.move_on_after(_STOP_SECONDS):
            for served in self.served:
                await served.stopped.wait()
        self.group.cancel_scope.cancel()  # a server that did not drain in time


@asynccontextmanager
async def redis_streams(request: pytest.FixtureRequest) -> AsyncIterator[Harness]:
    space: RedisSpace = request.getfixturevalue("redis_space")
    client = aioredis.Redis.from_url(space.url)
    try:
        async with anyio.create_task_group() as group:
            harness = RedisStreamsHarness(space, client, group)
            try:
                yield harness
            finally:
                await harness.close()
    finally:
        await client.aclose()


HarnessFactory = Callable[[pytest.FixtureRequest], AbstractAsyncContextManager[Harness]]

TRANSPORTS: tuple[Any, ...] = (
    pytest.param(redis_streams, id="redis-streams", marks=pytest.mark.redis),
)


@pytest.fixture(params=TRANSPORTS)
async def harness(anyio_backend: str, request: pytest.FixtureRequest) -> AsyncIterator[Harness]:
    factory: HarnessFactory = request.param
    async with factory(request) as made:
        yield made
