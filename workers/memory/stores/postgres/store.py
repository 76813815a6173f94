"""``PostgresMemoryStore``: the production backend, on asyncpg (the ``postgres`` extra).

Every node behaves exactly as on SQLite (the same conformance suites run on both):

* **Schema** lives in its own PostgreSQL schema (``ditto`` by default). :meth:`open` applies
  versioned migrations inside one transaction guarded by an advisory lock (``schema``).
* **Writes** of a batch are one transaction (``writes``). Keyed drafts take a
  transaction-scoped advisory lock per ``(namespace, key)`` before they look for the stored
  record: concurrent writers of one key serialise instead of failing on the unique index.
* **Keyword search** is a generated ``tsvector`` column with a GIN index, ranked by Okapi BM25
  on the same calibrated scale as SQLite, OR semantics, planned by document frequency so one
  search scores a bounded number of records (``search``). Each word becomes a ``tsquery`` through
  ``websearch_to_tsquery``: user text is never SQL and never raw tsquery syntax.
* **Usage** counters are coalesced in memory and applied by one statement for many searches
  (``usage``): one statement per search would make every search a costly write.
* **Failures** of the driver become coded store errors at one boundary (``errors``); messages
  never contain the URL or a password.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from datetime import datetime
from typing import TYPE_CHECKING, Self

import asyncpg

from ditto.errors import InvalidInputError
from workers.memory.contracts import (
    AuditEntry,
    HistoryEntry,
    MemoryDraft,
    MemoryFilter,
    MemoryItem,
    MemoryPatch,
    OrderBy,
    SearchHit,
    SearchInput,
    WriteMode,
)
from workers.memory.embeddings.base import EmbeddingModel, Matrix
from workers.memory.errors import MemoryErrorCode, MemoryStoreError
from workers.memory.ports import (
    AuditEvent,
    AuditLog,
    HistoryLog,
    KeywordSearch,
    MemoryStore,
    QueryPosition,
    RecordImport,
    UsageTracking,
    VectorStore,
)
from workers.memory.records import Clock, WriteGuard, changes_text, now_from, to_micros, utc_now
from workers.memory.search.keyword import explained, keyword_request
from workers.memory.stores.postgres import logs
from workers.memory.stores.postgres import vectors as pg_vectors
from workers.memory.stores.postgres.errors import postgres_errors
from workers.memory.stores.postgres.pool import PoolRecipe
from workers.memory.stores.postgres.schema import migrate
from workers.memory.stores.postgres.search import DEFAULT_BUDGET, KeywordPlanner, keyword_search
from workers.memory.stores.postgres.sql import (
    Params,
    columns,
    order_clause,
    quoted_schema,
    records,
    where_clause,
)
from workers.memory.stores.postgres.transactions import committing
from workers.memory.stores.postgres.usage import UsageCounters
from workers.memory.stores.postgres.writes import (
    delete_batch,
    restore_batch,
    update_batch,
    write_batch,
)
from workers.memory.stores.rows import row_to_item
from workers.memory.vectors import VectorIndex, Vectors, VectorState

if TYPE_CHECKING:
    from ditto.runtime.context import NodeContext
    from workers.memory.stores.postgres.pool import Connection

__all__ = ("PoolRecipe", "PostgresMemoryStore")


class PostgresMemoryStore(
    MemoryStore, UsageTracking, KeywordSearch, VectorStore, HistoryLog, AuditLog, RecordImport
):
    """Memory records in PostgreSQL.

    Build it with :meth:`from_url` (the store owns and closes its pool), or pass a ready
    ``asyncpg`` pool (the application owns it). Open it (``async with`` or :meth:`open`) to
    apply migrations; operations also open it on first use.

    Args:
        pool: An ``asyncpg.Pool``, or the :class:`PoolRecipe` that ``from_url`` passes.
        schema: The PostgreSQL schema holding the tables (created if missing).
        clock: Source of timestamps (default: system clock, UTC).
        search_budget: Records one keyword search may score before frequent words are left
            to the fill phase (see ``search``).

    Raises:
        InvalidInputError: ``schema`` is not a plain lower-case identifier, or
            ``search_budget`` is below 1.
    """

    def __init__(
        self,
        pool: asyncpg.Pool | PoolRecipe,
        *,
        schema: str = "ditto",
        clock: Clock = utc_now,
        search_budget: int = DEFAULT_BUDGET,
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
        if isinstance(search_budget, bool) or not isinstance(search_budget, int):
            raise InvalidInputError("search_budget must be an integer")
        if search_budget < 1:
            raise InvalidInputError("search_budget must be at least 1")
        self._planner = KeywordPlanner(self._s, search_budget)

    @classmethod
    def from_url(
        cls,
        url: str,
        *,
        schema: str = "ditto",
        pool_size: int = 10,
        statement_timeout_ms: int = 30_000,
        clock: Clock = utc_now,
        search_budget: int = DEFAULT_BUDGET,
    ) -> Self:
        """A store with its own connection pool, created by :meth:`open` (no connection is made
        here) and closed by :meth:`aclose`."""
        return cls(
            PoolRecipe(url, pool_size, statement_timeout_ms),
            schema=schema,
            clock=clock,
            search_budget=search_budget,
        )

    @property
    def pool(self) -> asyncpg.Pool:
        if self._pool is None:
            raise MemoryStoreError(
                "the memory store is not open", code=MemoryErrorCode.STORE_UNAVAILABLE
            )
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

    # ----------------------------------------------------------------- reads

    async def get(
        self, ids: Sequence[str], keys: Sequence[str], namespace: str
    ) -> list[MemoryItem]:
        pool = await self._ready()
        async with postgres_errors():
            rows = await pool.fetch(
                f"SELECT {columns()} FROM {records(self._s)} "
                "WHERE m.id = ANY($1::text[]) OR (m.namespace = $2 AND m.key = ANY($3::text[]))",
                list(ids),
                namespace,
                list(keys),
            )
        return [row_to_item(row) for row in rows]

    async def query(
        self, filter: MemoryFilter, order: OrderBy, limit: int, after: QueryPosition | None
    ) -> list[MemoryItem]:
        pool = await self._ready()
        params = Params()
        where = where_clause(filter, params, self._s)
        expression, direction, comparison = order_clause(order)
        if after is not None:
            last = f"({params.add(after[0])}, {params.add(after[1])})"
            where += f" AND ({expression}, m.id) {comparison} {last}"
        sql = (
            f"SELECT {columns()} FROM {records(self._s)} WHERE {where} "
            f"ORDER BY {expression} {direction}, m.id {direction} LIMIT {params.add(limit)}"
        )
        async with postgres_errors():
            rows = await pool.fetch(sql, *params.values)
        return [row_to_item(row) for row in rows]

    async def count(self, filter: MemoryFilter) -> int:
        pool = await self._ready()
        params = Params()
        where = where_clause(filter, params, self._s)
        async with postgres_errors():
            value = await pool.fetchval(
                f"SELECT count(*) FROM {self._s}.memories m WHERE {where}", *params.values
            )
        return int(value)

    async def health(self) -> dict[str, object]:
        pool = await self._ready()
        async with postgres_errors():
            valid = await pool.fetchval(
                "SELECT bool_and(i.indisvalid AND i.indisready) FROM pg_index i "
                "JOIN pg_class c ON c.oid = i.indexrelid JOIN pg_namespace n ON n.oid = "
                "c.relnamespace WHERE n.nspname = $1 AND c.relname LIKE 'memor%'",
                self.schema,
            )
            version = await pool.fetchval(
                f"SELECT value FROM {self._s}.ditto_meta WHERE name = 'schema_version'"
            )
        return {"indexes_valid": bool(valid), "schema_version": int(bytes(version).decode())}

    async def search(self, input: SearchInput, ctx: NodeContext | None = None) -> list[SearchHit]:
        """Keyword search: Okapi BM25 of the query's words OR-ed, planned by document
        frequency (see ``search``); filters before the limit. Scores are BM25 on the
        calibrated scale (``search.keyword.calibrated``), as on SQLite: in [0, 1], higher is
        better."""
        words, explain = keyword_request(input, "the PostgreSQL store")
        if not words:
            return []
        async with self._connection() as connection:
            hits = await keyword_search(
                connection, self._planner, self._s, words, input.filter, input.limit or 10
            )
        return explained([SearchHit(row_to_item(row), score) for row, score in hits], explain)

    # ----------------------------------------------------------------- writes

    async def write(
        self,
        drafts: Sequence[MemoryDraft],
        mode: WriteMode,
        vectors: Vectors | None = None,
        guard: WriteGuard | None = None,
    ) -> list[MemoryItem]:
        now = now_from(self._clock)
        return await self._changing(
            vectors,
            True,
            lambda connection: write_batch(
                connection, self.schema, self._s, drafts, mode, now, guard
            ),
        )

    async def update(
        self,
        patches: Sequence[MemoryPatch],
        vectors: Vectors | None = None,
        guard: WriteGuard | None = None,
    ) -> list[MemoryItem]:
        now = now_from(self._clock)
        return await self._changing(
            vectors,
            any(map(changes_text, patches)),
            lambda connection: update_batch(connection, self._s, patches, now, guard),
        )

    async def _changing(
        self,
        vectors: Vectors | None,
        text_changes: bool,
        change: Callable[[Connection], Awaitable[list[MemoryItem]]],
    ) -> list[MemoryItem]:
        """Run ``change`` in one transaction with the records' vectors checked and stored."""
        async with self._connection() as connection:
            # Pending usage first, in its own statement: a failing batch must not lose it.
            await self._usage.apply(connection)
            async with committing(connection):
                await pg_vectors.require_vectors(connection, self._s, vectors, needed=text_changes)
                items = await change(connection)
                if vectors is not None:
                    await pg_vectors.store_vectors(connection, self._s, vectors, items)
            return items

    async def delete(self, ids: Sequence[str], guard: WriteGuard | None = None) -> list[str]:
        now = now_from(self._clock)
        async with self._connection() as connection, committing(connection):
            deleted = await delete_batch(connection, self._s, ids, now, guard)
            await pg_vectors.forget_vectors(connection, self._s, deleted)
        return deleted

    async def restore(self, items: Sequence[MemoryItem]) -> int:
        async with self._connection(transaction=True) as connection:
            await restore_batch(connection, self._s, items)
            await pg_vectors.forget_vectors(connection, self._s, [], keep=items)  # re-embed
        return len(items)

    # ----------------------------------------------------------------- vectors

    async def vector_state(self) -> VectorState:
        async with self._connection() as connection:
            return (await pg_vectors.read_state(connection, self._s))[0]

    async def vector_search(
        self, model: EmbeddingModel, query: Matrix, filter: MemoryFilter, limit: int
    ) -> list[tuple[MemoryItem, float]]:
        pool = await self._ready()
        async with postgres_errors():
            return await pg_vectors.search_vectors(
                pool, self._s, self._index, self._refreshing, model, query, filter, limit
            )

    async def begin_reindex(self, model: EmbeddingModel) -> None:
        async with self._connection() as connection:
            await pg_vectors.begin_reindex(connection, self._s, model)

    async def missing_vectors(
        self, model: EmbeddingModel, after: str | None, limit: int
    ) -> list[MemoryItem]:
        async with self._connection() as connection:
            return await pg_vectors.missing_vectors(connection, self._s, model, after, limit)

    async def count_missing_vectors(self, model: EmbeddingModel) -> int:
        async with self._connection() as connection:
            return await pg_vectors.count_missing_vectors(connection, self._s, model)

    async def put_vectors(self, ids: Sequence[str], vectors: Vectors) -> int:
        async with self._connection(transaction=True) as connection:
            return await pg_vectors.put_vectors(connection, self._s, ids, vectors)

    async def finish_reindex(self, model: EmbeddingModel) -> None:
        async with self._connection(transaction=True) as connection:
            await pg_vectors.finish_reindex(connection, self._s, model)

    # ----------------------------------------------------------------- history and audit

    async def history(self, id: str) -> list[HistoryEntry]:
        pool = await self._ready()
        async with postgres_errors():
            return await logs.history_of(pool, self._s, id)

    async def restore_history(self, entries: Sequence[HistoryEntry]) -> int:
        async with self._connection(transaction=True) as connection:
            return await logs.restore_history(connection, self._s, entries)

    async def append_audit(self, events: Sequence[AuditEvent]) -> None:
        pool = await self._ready()
        async with postgres_errors():
            await logs.append_audit(pool, self._s, events)

    async def audit_log(
        self, *, after: int = 0, limit: int = 100, principal: str | None = None
    ) -> list[AuditEntry]:
        pool = await self._ready()
        async with postgres_errors():
            return await logs.read_audit(pool, self._s, after, limit, principal)

    async def purge_audit(self, before: datetime, *, dry_run: bool = False) -> int:
        pool = await self._ready()
        async with postgres_errors():
            return await logs.purge_audit(pool, self._s, to_micros(before), dry_run)

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
