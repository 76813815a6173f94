"""The SQL driver port over asyncmy (the ``mysql`` extra): a pool of MySQL/MariaDB connections.

asyncmy was chosen over aiomysql because it ships compiled wheels for every supported Python
and parses rows in C; both follow PyMySQL's DB-API, so the store's error boundary reads either.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote, urlsplit

import asyncmy

from ditto.errors import InvalidInputError
from workers.memory.stores.sql_driver import Placeholder, SqlDriver

__all__ = ("AsyncmyDriver", "MysqlUrl")

_INIT = (
    # READ COMMITTED: no gap locks, so writers of different keys never deadlock on a gap.
    "SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED"
)


@dataclass(frozen=True, slots=True)
class MysqlUrl:
    """A parsed ``mysql://user:password@host:port/database`` URL (never printed whole)."""

    host: str
    port: int
    user: str
    password: str = field(repr=False)
    database: str

    @classmethod
    def parse(cls, url: str) -> MysqlUrl:
        """Raises:
        InvalidInputError: not a ``mysql://`` or ``mariadb://`` URL naming a database."""
        parts = urlsplit(url)
        database = unquote(parts.path.lstrip("/"))
        if parts.scheme not in ("mysql", "mariadb") or not parts.hostname or not database:
            raise InvalidInputError(
                "the MySQL URL must look like mysql://user:password@host:3306/database"
            )
        return cls(
            parts.hostname,
            parts.port or 3306,
            unquote(parts.username or "root"),
            unquote(parts.password or ""),
            database,
        )


class _Bound:
    """The driver bound to one connection inside a transaction."""

    placeholder = Placeholder.FORMAT

    def __init__(self, connection: asyncmy.Connection) -> None:
        self._connection = connection

    async def rows(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        async with self._connection.cursor() as cursor:
            await cursor.execute(sql, tuple(params))
            return list(await cursor.fetchall())

    async def execute(self, sql: str, params: Sequence[Any] = ()) -> int:
        async with self._connection.cursor() as cursor:
            return int(await cursor.execute(sql, tuple(params)))

    def transaction(self) -> AbstractAsyncContextManager[SqlDriver]:
        raise NotImplementedError("transactions do not nest")

    async def aclose(self) -> None:
        return None


class AsyncmyDriver:
    """:class:`~workers.memory.stores.sql_driver.SqlDriver` over an asyncmy pool.

    Args:
        url: ``mysql://user:password@host:port/database``.
        pool_size: Connections at most.
        connect_timeout: Seconds to wait for a connection.
    """

    placeholder = Placeholder.FORMAT

    def __init__(self, url: str, *, pool_size: int = 10, connect_timeout: float = 10.0) -> None:
        self._url = MysqlUrl.parse(url)
        self._size = pool_size
        self._timeout = connect_timeout
        self._pool: asyncmy.Pool | None = None

    async def _ready(self) -> asyncmy.Pool:
        if self._pool is None:
            self._pool = await asyncmy.create_pool(
                minsize=1,
                maxsize=self._size,
                host=self._url.host,
                port=self._url.port,
                user=self._url.user,
                password=self._url.password,
                db=self._url.database,
                charset="utf8mb4",
                autocommit=True,
                init_command=_INIT,
                connect_timeout=self._timeout,
            )
        return self._pool

    async def rows(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        pool = await self._ready()
        async with pool.acquire() as connection:
            return await _Bound(connection).rows(sql, params)

    async def execute(self, sql: str, params: Sequence[Any] = ()) -> int:
        pool = await self._ready()
        async with pool.acquire() as connection:
            return await _Bound(connection).execute(sql, params)

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[SqlDriver]:
        pool = await self._ready()
        async with pool.acquire() as connection:
            await connection.begin()
            try:
                yield _Bound(connection)
            except BaseException:
                try:
                    await connection.rollback()
                except Exception:
                    # A lost connection cannot roll back, and need not: the server already
                    # has. Closed, it goes back to the pool as dead, not as a leaked socket.
                    connection.close()
                raise
            try:
                await connection.commit()
            except BaseException:
                connection.close()  # its state is unknown: never reuse it
                raise

    async def aclose(self) -> None:
        if self._pool is not None:
            self._pool.close()
            await self._pool.wait_closed()
            self._pool = None
