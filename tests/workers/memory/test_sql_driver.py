"""The SQL driver port: placeholder conversion, and a user's own driver plugged into the MySQL
store — PyMySQL (synchronous) run in worker threads — passing the write, update/delete and
search conformance modules through it."""

from __future__ import annotations

import inspect
import threading
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest

from tests.services import MysqlSpace
from tests.workers.memory.conformance import test_search, test_update_delete, test_write
from tests.workers.memory.conftest import OpenStore, StoreEnv, TickingClock
from workers.memory.stores.sql_driver import Placeholder, SqlDriver, convert

pytestmark = pytest.mark.anyio


# ----------------------------------------------------------------- placeholder conversion


@pytest.mark.parametrize(
    ("style", "expected"),
    [
        (Placeholder.QMARK, "SELECT ? WHERE a LIKE '5%?' AND b = ?"),
        (Placeholder.FORMAT, "SELECT %s WHERE a LIKE '5%%?' AND b = %s"),
        (Placeholder.NUMERIC, "SELECT $1 WHERE a LIKE '5%?' AND b = $2"),
    ],
)
def test_markers_convert_outside_literals_only(style: Placeholder, expected: str) -> None:
    assert convert("SELECT ? WHERE a LIKE '5%?' AND b = ?", style) == expected


# ----------------------------------------------------------------- a second driver


class PymysqlDriver:
    """:class:`SqlDriver` over PyMySQL: each call takes a connection from a small pool and
    runs in a worker thread (one thread hop per statement, none per row)."""

    placeholder = Placeholder.FORMAT

    def __init__(self, space: MysqlSpace) -> None:
        from workers.memory.stores.mysql.asyncmy_driver import MysqlUrl

        self._url = MysqlUrl.parse(space.url)
        self._free: list[Any] = []
        self._lock = threading.Lock()

    def _connect(self) -> Any:
        import pymysql

        with self._lock:
            if self._free:
                return self._free.pop()
        return pymysql.connect(
            host=self._url.host,
            port=self._url.port,
            user=self._url.user,
            password=self._url.password,
            database=self._url.database,
            charset="utf8mb4",
            autocommit=True,
            init_command="SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED",
        )

    def _release(self, connection: Any) -> None:
        with self._lock:
            self._free.append(connection)

    @staticmethod
    def _rows(connection: Any, sql: str, params: Sequence[Any]) -> list[tuple[Any, ...]]:
        with connection.cursor() as cursor:
            cursor.execute(sql, tuple(params))
            return list(cursor.fetchall())

    @staticmethod
    def _execute(connection: Any, sql: str, params: Sequence[Any]) -> int:
        with connection.cursor() as cursor:
            return int(cursor.execute(sql, tuple(params)))

    async def rows(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        connection = await anyio.to_thread.run_sync(self._connect)
        try:
            return await anyio.to_thread.run_sync(self._rows, connection, sql, params)
        finally:
            self._release(connection)

    async def execute(self, sql: str, params: Sequence[Any] = ()) -> int:
        connection = await anyio.to_thread.run_sync(self._connect)
        try:
            return await anyio.to_thread.run_sync(self._execute, connection, sql, params)
        finally:
            self._release(connection)

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[SqlDriver]:
        connection = await anyio.to_thread.run_sync(self._connect)
        try:
            await anyio.to_thread.run_sync(connection.begin)
            try:
                yield _BoundPymysql(connection)
            except BaseException:
                with anyio.CancelScope(shield=True):
                    await anyio.to_thread.run_sync(connection.rollback)
                raise
            await anyio.to_thread.run_sync(connection.commit)
        finally:
            self._release(connection)

    async def aclose(self) -> None:
        with self._lock:
            free, self._free = self._free, []
        for connection in free:
            connection.close()


class _BoundPymysql:
    placeholder = Placeholder.FORMAT

    def __init__(self, connection: Any) -> None:
        self._connection = connection

    async def rows(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        return await anyio.to_thread.run_sync(PymysqlDriver._rows, self._connection, sql, params)

    async def execute(self, sql: str, params: Sequence[Any] = ()) -> int:
        return await anyio.to_thread.run_sync(PymysqlDriver._execute, self._connection, sql, params)

    def transaction(self) -> Any:
        raise NotImplementedError("transactions do not nest")

    async def aclose(self) -> None:
        return None


def test_pymysql_driver_satisfies_the_port() -> None:
    assert isinstance(PymysqlDriver.__new__(PymysqlDriver), SqlDriver)


# ----------------------------------------------------------------- conformance through it


@pytest.fixture
def store_env(tmp_path: Path, mysql_space: MysqlSpace) -> StoreEnv:
    return StoreEnv(tmp_path, TickingClock(), mysql=mysql_space)


@pytest.fixture
async def open_store(store_env: StoreEnv) -> AsyncIterator[OpenStore]:
    from workers.memory.stores.mysql import MysqlMemoryStore

    opened: list[MysqlMemoryStore] = []

    async def open_one() -> MysqlMemoryStore:
        assert store_env.mysql is not None
        store = MysqlMemoryStore(
            PymysqlDriver(store_env.mysql), clock=store_env.clock, owns_driver=True
        )
        await store.open()
        opened.append(store)
        return store

    try:
        yield open_one
    finally:
        for store in opened:
            await store.aclose()


def _conformance(*modules: Any) -> Iterator[tuple[str, Any]]:
    for module in modules:
        for name, test in vars(module).items():
            if name.startswith("test_") and inspect.isfunction(test):
                yield f"{name}__{module.__name__.rpartition('.')[2]}", test


# The conformance tests, collected again here: their `memory` and `open_store` fixtures resolve
# to the ones above (no `store_kind`), so the store they run on is MysqlMemoryStore over
# PymysqlDriver.
globals().update(_conformance(test_write, test_update_delete, test_search))
