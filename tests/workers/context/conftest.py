"""Context test harness: every scoped behaviour runs against each store in ``STORE_KINDS``."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from ditto import Ditto, NodeResult, create_ditto
from tests.services import RedisSpace
from workers.context import (
    ContextScope,
    ContextStateStore,
    InProcessContextStore,
    RedisContextStore,
    create_context_worker,
)
from workers.context.queue import ScopeQueue

TTL_MS = 60_000
"""Long in real time: Redis counts real time between a write and a PTTL read, and a busy
machine can spend tens of milliseconds there; tests move time with `advance` instead."""


@dataclass
class FakeClock:
    """Milliseconds that move only when a test says so."""

    now: float = 1_000.0

    def __call__(self) -> float:
        return self.now


@dataclass
class ContextHarness:
    runtime: Ditto
    store: ContextStateStore
    kind: str
    clock: FakeClock = field(default_factory=FakeClock)

    async def call(self, node: str, payload: Any) -> NodeResult[Any]:
        return await self.runtime.invoke(node, payload)

    async def ok(self, node: str, payload: Any) -> Any:
        result = await self.call(node, payload)
        assert result.ok, result.error
        return result.output

    async def expire(self) -> None:
        """Let the TTL pass (just past it)."""
        await self.advance(TTL_MS + 1)

    async def pttl(self, scope: dict[str, str]) -> float | None:
        """Remaining lifetime of a scope's state in ms (Redis ``PTTL``)."""
        parsed = ContextScope(**scope)
        if isinstance(self.store, InProcessContextStore):
            return self.store.remaining_ms(parsed)
        assert isinstance(self.store, RedisContextStore)
        remaining = await self.store.client.pttl(self.store.redis_key(parsed))
        return None if remaining < 0 else float(remaining)

    async def advance(self, milliseconds: float) -> None:
        """Let ``milliseconds`` pass for the stored state: the in-process clock moves; in Redis
        each of this test's keys loses that much of its remaining lifetime, which is all that
        waiting would do to it (a lifetime that runs out deletes the key, as expiry does)."""
        if isinstance(self.store, InProcessContextStore):
            self.clock.now += milliseconds
            return
        assert isinstance(self.store, RedisContextStore)
        client = self.store.client
        async for key in client.scan_iter(match=f"{self.store.key_prefix}*"):
            remaining = await client.pttl(key)
            if remaining >= 0:  # a key without a TTL never expires, however long one waits
                await client.pexpire(key, int(remaining - milliseconds))


STORE_KINDS = ("inprocess", "redis")


def make_store(
    kind: str, clock: FakeClock, redis_space: RedisSpace | None, *, ttl_ms: int = TTL_MS
) -> ContextStateStore:
    """A store of ``kind``. Redis keeps time by its own clock, not ``clock``: a test that does
    not move time on purpose (see :meth:`ContextHarness.advance`) needs a ``ttl_ms`` that no
    slow machine outlives."""
    if kind == "inprocess":
        return InProcessContextStore(ttl_ms=ttl_ms, max_scopes=100, clock=clock)
    assert redis_space is not None
    return RedisContextStore.from_url(redis_space.url, ttl_ms=ttl_ms, key_prefix=redis_space.prefix)


@pytest.fixture(params=STORE_KINDS)
def context_store_kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
async def context(
    context_store_kind: str, request: pytest.FixtureRequest
) -> AsyncIterator[ContextHarness]:
    clock = FakeClock()
    space = request.getfixturevalue("redis_space") if context_store_kind == "redis" else None
    store = make_store(context_store_kind, clock, space)
    try:
        async with create_ditto(workers=[create_context_worker(store=store)]) as runtime:
            yield ContextHarness(runtime, store, context_store_kind, clock)
    finally:
        await store.aclose()


def queue_worker(store: ContextStateStore, max_pending: int = 1024) -> Any:
    return create_context_worker(store=store, queue=ScopeQueue(max_pending))
