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


StoreFactory = Callable[[Path, TickingClock], Awaitable[MemoryStore]]


async def _inprocess(tmp_path: Path, clock: TickingClock) -> MemoryStore:
    return InProcessMemoryStore(clock=clock)


async def _sqlite(tmp_path: Path, clock: TickingClock) -> MemoryStore:
    store = SqliteMemoryStore(tmp_path / "memory.sqlite", clock=clock)
    await store.open()
    return store


STORE_FACTORIES: dict[str, StoreFactory] = {"inprocess": _inprocess, "sqlite": _sqlite}


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
async def memory(store_kind: str, tmp_path: Path) -> AsyncIterator[MemoryHarness]:
    clock = TickingClock()
    store = await STORE_FACTORIES[store_kind](tmp_path, clock)
    try:
        async with create_ditto(workers=[create_memory_worker(store, clock=clock)]) as runtime:
            yield MemoryHarness(runtime, store, clock)
    finally:
        await store.aclose()
