"""Memory test harness: one table of store factories that every conformance test runs against.

A later store joins the suite by adding one entry to ``STORE_FACTORIES``. A test that uses a
store (``memory``, ``open_store``, ``store_kind``) runs once per store that has the
capabilities it declares with ``@requires(*ports)`` (module- or test-level, the union
counts): ``requires(MemoryStore)`` is the core alone, ``requires(KeywordSearch)`` adds keyword
search. Stores lacking one are left out of its parametrization (they are not skipped).
A test that declares nothing needs every capability, so the core-only ``crud-only`` store runs
only tests that say they need no more than the core.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Collection, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from ditto import Ditto, NodeResult, create_ditto
from tests.services import MysqlSpace, PostgresSpace
from workers.memory import (
    InProcessMemoryStore,
    MemoryDraft,
    MemoryFilter,
    MemoryItem,
    MemoryPatch,
    MemoryStore,
    OrderBy,
    SqliteMemoryStore,
    create_memory_worker,
)
from workers.memory.model.contracts import WriteMode
from workers.memory.model.planning import WriteGuard, WriteRules
from workers.memory.model.records import Clock, utc_now
from workers.memory.model.review_plan import ReviewGuard
from workers.memory.model.reviews import ReviewDecision
from workers.memory.ports import CAPABILITIES, QueryPosition
from workers.memory.retrieval.vectors import Vectors
from workers.memory.stores.markdown import MarkdownMemoryStore


@dataclass
class TickingClock:
    """A fixed clock that moves one millisecond per reading, so ordering is deterministic."""

    now: datetime = field(default_factory=lambda: datetime(2026, 9, 1, tzinfo=UTC))

    def __call__(self) -> datetime:
        self.now += timedelta(milliseconds=1)
        return self.now


class CrudOnlyStore(MemoryStore):
    """A store with the core port only (no capability at all), backed by the in-process
    reference."""

    def __init__(self, *, clock: Clock = utc_now) -> None:
        super().__init__()
        self.inner = InProcessMemoryStore(clock=clock)

    async def get(
        self, ids: Sequence[str], keys: Sequence[str], namespace: str
    ) -> list[MemoryItem]:
        return await self.inner.get(ids, keys, namespace)

    async def query(
        self, filter: MemoryFilter, order: OrderBy, limit: int, after: QueryPosition | None
    ) -> list[MemoryItem]:
        return await self.inner.query(filter, order, limit, after)

    async def write(
        self,
        drafts: Sequence[MemoryDraft],
        mode: WriteMode,
        vectors: Vectors | None = None,
        guard: WriteGuard | None = None,
        rules: WriteRules | None = None,
    ) -> list[MemoryItem]:
        return await self.inner.write(drafts, mode, vectors, guard, rules)

    async def update(
        self,
        patches: Sequence[MemoryPatch],
        vectors: Vectors | None = None,
        guard: WriteGuard | None = None,
    ) -> list[MemoryItem]:
        return await self.inner.update(patches, vectors, guard)

    async def delete(self, ids: Sequence[str], guard: WriteGuard | None = None) -> list[str]:
        return await self.inner.delete(ids, guard)

    async def review(
        self,
        decisions: Sequence[ReviewDecision],
        reviewer: str | None = None,
        guard: ReviewGuard | None = None,
    ) -> list[MemoryItem]:
        return await self.inner.review(decisions, reviewer, guard)


@dataclass
class StoreEnv:
    """What a store factory may use: a private folder, the test clock, a private schema."""

    tmp_path: Path
    clock: TickingClock
    postgres: PostgresSpace | None = None
    mysql: MysqlSpace | None = None


@dataclass(frozen=True)
class StoreFactory:
    """Opens one kind of store (call it with a :class:`StoreEnv`), and names its class, whose
    capabilities decide which tests it runs."""

    open: Callable[[StoreEnv], Awaitable[MemoryStore]]
    store_type: Callable[[], type[MemoryStore]]
    """The store's class; a callable because PostgreSQL's driver is an optional extra."""

    async def __call__(self, env: StoreEnv) -> MemoryStore:
        return await self.open(env)


async def _crud_only(env: StoreEnv) -> MemoryStore:
    return CrudOnlyStore(clock=env.clock)


async def _inprocess(env: StoreEnv) -> MemoryStore:
    return InProcessMemoryStore(clock=env.clock)


async def _sqlite(env: StoreEnv) -> MemoryStore:
    store = SqliteMemoryStore(env.tmp_path / "memory.sqlite", clock=env.clock)
    await store.open()
    return store


async def _markdown(env: StoreEnv) -> MemoryStore:
    store = MarkdownMemoryStore(env.tmp_path / "memory", clock=env.clock)
    await store.open()
    return store


def _postgres_type() -> type[MemoryStore]:
    from workers.memory.stores.postgres import PostgresMemoryStore

    return PostgresMemoryStore


async def _postgres(env: StoreEnv) -> MemoryStore:
    from workers.memory.stores.postgres import PostgresMemoryStore

    assert env.postgres is not None
    store = PostgresMemoryStore.from_url(
        env.postgres.url, schema=env.postgres.schema, clock=env.clock, pool_size=4
    )
    await store.open()
    return store


def _mysql_type() -> type[MemoryStore]:
    from workers.memory.stores.mysql import MysqlMemoryStore

    return MysqlMemoryStore


async def _mysql(env: StoreEnv) -> MemoryStore:
    from workers.memory.stores.mysql import MysqlMemoryStore

    assert env.mysql is not None
    store = MysqlMemoryStore.from_url(env.mysql.url, clock=env.clock, pool_size=4)
    await store.open()
    return store


STORE_FACTORIES: dict[str, StoreFactory] = {
    "crud-only": StoreFactory(_crud_only, lambda: CrudOnlyStore),
    "inprocess": StoreFactory(_inprocess, lambda: InProcessMemoryStore),
    "sqlite": StoreFactory(_sqlite, lambda: SqliteMemoryStore),
    "postgres": StoreFactory(_postgres, _postgres_type),
    "mysql": StoreFactory(_mysql, _mysql_type),
    "markdown": StoreFactory(_markdown, lambda: MarkdownMemoryStore),
}
EMBEDDED = ("inprocess", "sqlite")
"""Stores that need no server (the property tests run these)."""


def stores_with(ports: Collection[type]) -> list[str]:
    """The kinds in ``STORE_FACTORIES`` whose store implements every port in ``ports``."""
    kinds = []
    for kind, factory in sorted(STORE_FACTORIES.items()):
        try:
            store_type = factory.store_type()
        except ImportError:  # a missing driver: opening the store reports it, as before
            kinds.append(kind)
            continue
        if all(issubclass(store_type, port) for port in ports):
            kinds.append(kind)
    return kinds


def requires(*ports: type) -> pytest.MarkDecorator:
    """Marks a test (or, in ``pytestmark``, a module) as needing these store ports.

    ``pytest.mark.requires(KeywordSearch)`` would decorate the class instead: a mark called with
    a single class applies itself to it.
    """
    return pytest.mark.requires.with_args(*ports)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "requires(*ports): the store ports a test needs (MemoryStore alone: the core); "
        "stores without them are left out of its store_kind parametrization",
    )


def _parametrizes(metafunc: pytest.Metafunc, name: str) -> bool:
    for marker in metafunc.definition.iter_markers("parametrize"):
        names = marker.args[0] if marker.args else marker.kwargs["argnames"]
        if isinstance(names, str):
            names = [part.strip() for part in names.split(",")]
        if name in names:
            return True
    return False


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Runs every test that uses a store once per store with the ports it ``requires``."""
    if "store_kind" not in metafunc.fixturenames or _parametrizes(metafunc, "store_kind"):
        return  # no store, or the test picks its stores itself
    markers = list(metafunc.definition.iter_markers("requires"))
    ports = [port for marker in markers for port in marker.args]
    metafunc.parametrize("store_kind", stores_with(ports if markers else CAPABILITIES.values()))


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


@pytest.fixture
def store_env(store_kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> StoreEnv:
    """The folder, clock and (for PostgreSQL) private schema the test's stores use."""
    env = StoreEnv(tmp_path, TickingClock())
    if store_kind == "postgres":
        env.postgres = request.getfixturevalue("postgres_space")
    elif store_kind == "mysql":
        env.mysql = request.getfixturevalue("mysql_space")
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
