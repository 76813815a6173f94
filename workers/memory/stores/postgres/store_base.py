"""What every part of ``PostgresMemoryStore`` stands on: its construction, its pool and
lifecycle (open and migrate, close), pooled connections with their failures translated, and
the usage counters it coalesces and flushes.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from datetime import datetime
from typing import TYPE_CHECKING, Self

import asyncpg

from ditto.errors import ErrorCode
from workers.memory.model.errors import MemoryStoreError
from workers.memory.model.records import Clock, utc_now
from workers.memory.retrieval.vectors import VectorIndex
from workers.memory.stores.postgres.errors import postgres_errors
from workers.memory.stores.postgres.pool import PoolRecipe
from workers.memory.stores.postgres.schema import migrate
from workers.memory.stores.postgres.search import KeywordPlanner
from workers.memory.stores.postgres.sql import quoted_schema
from workers.memory.stores.postgres.usage import UsageCounters

if TYPE_CHECKING:
    from workers.memory.stores.postgres.pool import Connection

__all__ = ("PostgresStoreBase",)


class PostgresStoreBase:
    """The pool, lifecycle and connections of a PostgreSQL memory store (the arguments are
    :class:`~workers.memory.stores.postgres.store.PostgresMemoryStore`'s)."""

    def __init__(
        self,
        pool: asyncpg.Pool | PoolRecipe,
        *,
        schema: str = "ditto",
        clock: Clock = utc_now,
    ) -> None:
        super().__init__()
        self._recipe = pool if isinstance(pool, PoolRecipe) else None
        self._pool: asyncpg.Pool | None = None if isinstance(pool, PoolRecipe) else pool
        self.schema = schema
        self._s = quoted_schema(schema)
        self._clock = clock
        self._opened = False
        self._usage = UsageCounters(self._s)
        self._open_lock = asyncio.Lock()
        self._index = VectorIndex()
        self._refreshing = asyncio.Lock()
        self._planner = KeywordPlanner(self._s)

    @classmethod
    def from_url(
        cls,
        url: str,
        *,
        schema: str = "ditto",
        pool_size: int = 10,
        statement_timeout_ms: int = 30_000,
        clock: Clock = utc_now,
    ) -> Self:
        """A store with its own connection pool, created by :meth:`open` (no connection is made
        here) and closed by :meth:`aclose`."""
        return cls(
            PoolRecipe(url, pool_size, statement_timeout_ms),
            schema=schema,
            clock=clock,
        )

    @property
    def pool(self) -> asyncpg.Pool:
        if self._pool is None:
            raise MemoryStoreError("the memory store is not open", code=ErrorCode.STORE_UNAVAILABLE)
        return self._pool

    # ----------------------------------------------------------------- lifecycle

    async def open(self) -> None:
        """Create the pool (``from_url``) and migrate the schema. Idempotent and safe to call
        concurrently: one caller opens, the others wait for it."""
        if self._opened:
            return
        async with self._open_lock, postgres_errors():
            if self._pool is None and self._recipe is not None:
                self._pool = await self._recipe.create()
            if not self._opened:  # another caller may have opened it while this one waited
                await self.setup()
                self._opened = True

    async def setup(self) -> None:
        """Apply the migrations the schema lacks and load the cursor key (:meth:`open` calls
        it).

        Raises:
            MemoryStoreError: ``STORE_CORRUPT`` for a schema written by a newer Ditto.
        """
        async with self.pool.acquire() as connection:
            self.cursor_secret = await migrate(connection, self.schema, self._s)

    async def aclose(self) -> None:
        try:
            if self._usage.pending and self._pool is not None:
                await self.flush()
        finally:
            if self._recipe is not None and self._pool is not None:
                await self._pool.close()
                self._pool = None
            self._opened = False

    async def _ready(self) -> asyncpg.Pool:
        if not self._opened:
            await self.open()
        return self.pool

    @asynccontextmanager
    async def _connection(self, *, transaction: bool = False) -> AsyncIterator[Connection]:
        """A pooled connection (in a transaction when asked), its failures translated."""
        pool = await self._ready()
        async with postgres_errors(), pool.acquire() as connection:
            if not transaction:
                yield connection
                return
            async with connection.transaction():
                yield connection

    # ----------------------------------------------------------------- usage

    async def record_usage(self, ids: Sequence[str], at: datetime) -> None:
        if self._usage.add(ids, at):
            await self.flush()

    async def flush(self) -> None:
        """Apply the pending usage counters now (one statement)."""
        if not self._usage.pending:
            return
        async with self._connection() as connection:
            await self._usage.apply(connection)
