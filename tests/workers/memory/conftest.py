"""Memory test harness: one table of store factories that every conformance test runs against.

A later store joins the suite by adding one entry to ``STORE_FACTORIES``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from ditto import Ditto, NodeResult, create_ditto
from tests.services import PostgresSpace
from workers.memory import (
    InProcessMemoryStore,
    MemoryStore,
    SqliteMemoryStore,
    create_memory_worker,
)


@dataclass
class TickingClock:
    """A fixed clock that moves one millisecond per reading, so ordering is deterministic."""

    now: datetime = field(default_factory=lambda: datetime(2026, 9, 1, tzinfo=UTC))

    def __call__(self) -> datetime:
        self.now += timedelta(milliseconds=1)
        return self.now


@dataclass
class StoreEnv:
    """What a store factory may use: a private folder, the test clock, a private schema."""

    tmp_path: Path
    clock: TickingClock
    postgres: PostgresSpace | None = None


StoreFactory = Callable[[StoreEnv], Awaitable[MemoryStore]]


async def _inprocess(env: StoreEnv) -> MemoryStore:
    return InProcessMemoryStore(clock=env.clock)


async def _sqlite(env: StoreEnv) -> MemoryStore:
    store = SqliteMemoryStore(env.tmp_path / "memory.sqlite", clock=env.clock)
    await store.open()
    return store


async def _postgres(env: StoreEnv) -> MemoryStore:
    from workers.memory.stores.postgres import PostgresMemoryStore

    assert env.postgres is not None
    store = PostgresMemoryStore.from_url(
        env.postgres.url, schema=env.postgres.schema, clock=env.clock, pool_size=4
    )
    await store.open()
    return store


STORE_FACTORIES: dict[str, StoreFactory] = {
    "inprocess": _inprocess,
    "sqlite": _sqlite,
    "postgres": _postgres,
}
EMBEDDED = ("inprocess", "sqlite")
"""Stores that need no server (the property tests run these)."""


@dataclass
class MemoryHarness:
    """A runtime with a memory worker over one store, and shortcuts for the tests."""

    runtime: Ditto
    store: MemoryStore
    clock: TickingClock

    async def call(self, node: str, payload: Any, **options: Any) -> NodeResult[Any]:
        return await self.runtime.invoke(node, payload, **options)

    async def ok(self, node: str, payload: Any) -> Any:
        result = await self.call(node, payload)
        assert result.ok, result.error
        return result.output

    async def write(self, *drafts: dict[str, Any], mode: str = "create") -> list[Any]:
        output = await self.ok("MEMORY.WRITE", {"memories": list(drafts), "mode": mode})
        return list(output.items)

    async def all_records(self) -> list[Any]:
        await self.store.flush()
        items: list[Any] = []
        cursor = None
        while True:
            request: dict[str, Any] = {"limit": 10_000}
            if cursor:
                request["cursor"] = cursor
            page = await self.ok("MEMORY.QUERY", request)
            items.extend(page.items)
            cursor = page.next_cursor
            if cursor is None:
                return items


@pytest.fixture(params=sorted(STORE_FACTORIES))
def store_kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def store_env(store_kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> StoreEnv:
    """The folder, clock and (for PostgreSQL) private schema the test's stores use."""
    env = StoreEnv(tmp_path, TickingClock())
    if store_kind == "postgres":
        env.postgres = request.getfixturevalue("postgres_space")
    return env


OpenStore = Callable[[], Awaitable[MemoryStore]]


@pytest.fixture
async def open_store(store_kind: str, store_env: StoreEnv) -> AsyncIterator[OpenStore]:
    """Opens a store of the test's kind on the test's data (call it again for a second one,
    as another process would open it); every store is closed after the test."""
    opened: list[MemoryStore] = []

    async def open_one() -> MemoryStore:
        store = await STORE_FACTORIES[store_kind](store_env)
        opened.append(store)
        return store

    try:
        yield open_one
    finally:
        for store in opened:
            await store.aclose()


@pytest.fixture
async def memory(open_store: OpenStore, store_env: StoreEnv) -> AsyncIterator[MemoryHarness]:
    store = await open_store()
    clock = store_env.clock
    async with create_ditto(workers=[create_memory_worker(store, clock=clock)]) as runtime:
        yield MemoryHarness(runtime, store, clock)
