"""Checkpoint store harness: every port behaviour runs against each backend in ``KINDS``."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import pytest

from ditto.adapters.redis import RedisCheckpointStore
from ditto.adapters.sqlite import SqliteCheckpointStore
from ditto.runtime.checkpoints import CheckpointError, CheckpointStore, InProcessCheckpointStore
from ditto.runtime.checkpoints.port import Lease


@dataclass
class FakeClock:
    """Unix seconds that move by ``step`` at every reading, so "newer" never depends on how
    fast the machine is. Read on the SQLite writer thread too: one reader at a time."""

    now: float = 1_700_000_000.0
    step: float = 1.0

    def __call__(self) -> float:
        value = self.now
        self.now += self.step
        return value


@dataclass
class Backend:
    """One backend's space (a file, a key prefix, or nothing) and a way to open a store on it."""

    kind: str
    clock: FakeClock
    make: Callable[[FakeClock], CheckpointStore]
    opened: list[CheckpointStore] = field(default_factory=list)

    def open(self) -> CheckpointStore:
        """A new store object on the same data (closed at the end of the test)."""
        store = self.make(self.clock)
        self.opened.append(store)
        return store

    async def expire(self, lease: Lease) -> None:
        """Return once ``lease`` has expired on its store's clock: the in-process clock is
        moved past it; SQLite's (``time.time()``) and the Redis server's are waited for."""
        if self.kind == "inprocess":
            self.clock.now = max(self.clock.now, lease.expires_at + 0.5)
            return
        while True:  # a poll of another clock: no event to wait for
            if await self._store_time() > lease.expires_at:
                return
            await anyio.sleep(0.02)

    async def _store_time(self) -> float:
        if self.kind == "sqlite":
            return time.time()
        [store, *_] = self.opened
        assert isinstance(store, RedisCheckpointStore)
        seconds, microseconds = await store.client.time()
        return float(seconds) + microseconds / 1_000_000


KINDS = ("inprocess", "sqlite", pytest.param("redis", marks=pytest.mark.redis))
PERSISTENT_KINDS = ("sqlite", pytest.param("redis", marks=pytest.mark.redis))


def _backend(kind: str, request: pytest.FixtureRequest, tmp_path: Path) -> Backend:
    if kind == "inprocess":  # nothing to reopen: each store is its own (PERSISTENT_KINDS)
        return Backend(kind, FakeClock(), lambda clock: InProcessCheckpointStore(clock=clock))
    if kind == "sqlite":
        path = tmp_path / "checkpoints.sqlite"
        return Backend(kind, FakeClock(), lambda clock: SqliteCheckpointStore(path, clock=clock))
    space = request.getfixturevalue("redis_space")
    return Backend(
        kind,
        FakeClock(),
        lambda clock: RedisCheckpointStore.from_url(space.url, prefix=space.prefix, clock=clock),
    )


async def _close_all(backend: Backend) -> None:
    for store in backend.opened:
        await store.aclose()


@pytest.fixture(params=KINDS)
async def backend(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Backend]:
    made = _backend(str(request.param), request, tmp_path)
    try:
        yield made
    finally:
        await _close_all(made)


@pytest.fixture(params=PERSISTENT_KINDS)
async def persistent_backend(
    request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[Backend]:
    made = _backend(str(request.param), request, tmp_path)
    try:
        yield made
    finally:
        await _close_all(made)


@pytest.fixture
def store(backend: Backend) -> CheckpointStore:
    return backend.open()


LONG = 60.0
"""Seconds of a lease a test needs to stay live."""
SHORT = 0.1
"""Seconds of a lease a test lets expire (``Backend.expire``)."""


@pytest.fixture
def still_clock(backend: Backend) -> None:
    """The in-process store expires leases on its clock: it moves only when a test says so."""
    backend.clock.step = 0.0


async def refusal(call: Awaitable[Any]) -> CheckpointError:
    """The ``CheckpointError`` that ``call`` raises (it must raise one)."""
    with pytest.raises(CheckpointError) as raised:
        await call
    return raised.value
