"""``PostgresMemoryStore``: the production backend, on asyncpg (the ``postgres`` extra).

Every node behaves exactly as on SQLite (the same conformance suite runs on both):

* **Schema** lives in its own PostgreSQL schema (``ditto`` by default). :meth:`open` applies
  versioned migrations inside one transaction guarded by an advisory lock, so two processes
  starting at once do not race.
* **Writes** of a batch are one transaction. Keyed drafts take a transaction-scoped advisory
  lock per ``(namespace, key)`` (in sorted order, so no deadlock) before they look for the stored
  record: concurrent writers of one key serialise instead of failing on the unique index.
* **Keyword search** is a generated ``tsvector`` column with a GIN index, queried with
  ``websearch_to_tsquery`` over the query's words joined by ``or`` (OR recall, stop words left to
  the ``english`` configuration; user text is never SQL and never raw tsquery syntax) and ranked
  with ``ts_rank_cd``.
* **Usage** counters are collected in memory and applied by one ``UPDATE`` for many searches:
  when the previous one is older than ``_USAGE_INTERVAL``, first thing in the next write
  transaction, on :meth:`flush` and on close. Updating a row recomputes its ``tsvector`` and
  touches the GIN index, so one statement per search would make every search a costly write.
* **Failures**: an unreachable server or a lost connection is ``STORE_UNAVAILABLE`` (retryable)
  and a statement timeout is ``STORE_TIMEOUT``; messages never contain the URL or a password.
"""

from __future__ import annotations

import asyncio
import hashlib
import secrets
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import datetime
from time import monotonic
from typing import TYPE_CHECKING, Any, Self

import asyncpg
import msgspec

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
from workers.memory.errors import MemoryErrorCode, MemoryStoreError, conflict, not_found
from workers.memory.ports import AuditEvent, MemoryStore, QueryPosition
from workers.memory.records import (
    CHANGE_OF_STEP,
    Clock,
    WriteGuard,
    apply_patch,
    change_of_patch,
    changes_text,
    from_micros,
    history_entry,
    now_from,
    plan_writes,
    to_micros,
    utc_now,
)
from workers.memory.search.keyword import explained, keyword_request
from workers.memory.stores.postgres_sql import (
    MIGRATIONS,
    STORED_COLUMNS,
    Params,
    columns,
    item_values,
    keyword_search_sql,
    order_clause,
    quoted_schema,
    records,
    where_clause,
)
from workers.memory.stores.postgres_vectors import (
    begin_reindex,
    finish_reindex,
    forget_vectors,
    missing_vectors,
    put_vectors,
    read_state,
    require_vectors,
    search_vectors,
    store_vectors,
)
from workers.memory.stores.rows import row_to_item
from workers.memory.vectors import VectorIndex, Vectors, VectorState

if TYPE_CHECKING:
    from ditto.runtime.context import NodeContext

    Connection = asyncpg.Connection[Any] | asyncpg.pool.PoolConnectionProxy[Any]

__all__ = ("PoolRecipe", "PostgresMemoryStore")

_encode = msgspec.json.encode
_decode_item = msgspec.json.Decoder(MemoryItem).decode

_USAGE_INTERVAL = 0.05

_UNAVAILABLE = (
    OSError,
    asyncpg.exceptions.ConnectionDoesNotExistError,
    asyncpg.exceptions.CannotConnectNowError,
    asyncpg.exceptions.TooManyConnectionsError,
    asyncpg.exceptions.ConnectionFailureError,
    asyncpg.exceptions.InterfaceError,
    asyncpg.exceptions.AdminShutdownError,
    asyncpg.exceptions.CrashShutdownError,
    TimeoutError,
)


@asynccontextmanager
async def _translated() -> AsyncIterator[None]:
    """Driver failures as store errors whose messages carry no URL, host or password."""
    try:
        yield
    except asyncpg.exceptions.QueryCanceledError:
        raise MemoryStoreError(
            "the memory store did not answer in time",
            code=MemoryErrorCode.STORE_TIMEOUT,
            retryable=True,
        ) from None
    except _UNAVAILABLE:
        raise MemoryStoreError(
            "the memory store is unreachable",
            code=MemoryErrorCode.STORE_UNAVAILABLE,
            retryable=True,
        ) from None


def _lock_id(schema: str, namespace: str, key: str) -> int:
    digest = hashlib.blake2b(f"{schema}\0{namespace}\0{key}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


@dataclass(frozen=True, slots=True)
class PoolRecipe:
    """How :meth:`PostgresMemoryStore.from_url` builds the pool the store then owns."""

    url: str = field(repr=False)  # never printed: it may carry a password
    size: int = 10
    statement_timeout_ms: int = 30_000

    async def create(self) -> asyncpg.Pool:
        return await asyncpg.create_pool(
            self.url,
            min_size=1,
            max_size=self.size,
            server_settings={"statement_timeout": str(self.statement_timeout_ms)},
        )


class PostgresMemoryStore(MemoryStore):
    """Memory records in PostgreSQL.

    Build it with :meth:`from_url` (the store owns and closes its pool), or pass a ready
    ``asyncpg`` pool (the application owns it). Open it (``async with`` or :meth:`open`) to
    apply migrations; operations also open it on first use.

    Args:
        pool: An ``asyncpg.Pool``, or the :class:`PoolRecipe` that ``from_url`` passes.
        schema: The PostgreSQL schema holding the tables (created if missing).
        clock: Source of timestamps (default: system clock, UTC).
    """

    def __init__(
        self, pool: asyncpg.Pool | PoolRecipe, *, schema: str = "ditto", clock: Clock = utc_now
    ) -> None:
        super().__init__()
        self._recipe = pool if isinstance(pool, PoolRecipe) else None
        self._pool: asyncpg.Pool | None = None if isinstance(pool, PoolRecipe) else pool
        self.schema = schema
        self._s = quoted_schema(schema)
        self._clock = clock
        self._opened = False
        self._pending_usage: dict[str, tuple[int, int]] = {}
        self._usage_applied_at = 0.0
        self._open_lock = asyncio.Lock()
        self._index = VectorIndex()
        self._refreshing = asyncio.Lock()

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
        return cls(PoolRecipe(url, pool_size, statement_timeout_ms), schema=schema, clock=clock)

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
        async with self._open_lock:
            if self._pool is None and self._recipe is not None:
                async with _translated():
                    self._pool = await self._recipe.create()
            if not self._opened:  # another caller may have opened it while this one waited
                async with _translated():
                    await self.setup()
                self._opened = True

    async def setup(self) -> None:
        """Apply the versioned migrations the schema lacks, in one transaction under an advisory
        lock (two processes starting at once do not race), and load the cursor key.
        :meth:`open` calls it.

        Raises:
            MemoryStoreError: The schema was written by a newer version of Ditto.
        """
        s = self._s
        async with self.pool.acquire() as connection, connection.transaction():
            await connection.execute(
                "SELECT pg_advisory_xact_lock($1)", _lock_id(self.schema, "", "migrate")
            )
            await connection.execute(f"CREATE SCHEMA IF NOT EXISTS {s}")
            await connection.execute(
                f"CREATE TABLE IF NOT EXISTS {s}.ditto_meta "
                "(name text PRIMARY KEY, value bytea NOT NULL)"
            )
            version_row = await connection.fetchval(
                f"SELECT value FROM {s}.ditto_meta WHERE name = 'schema_version'"
            )
            current = int(version_row.decode()) if version_row is not None else 0
            steps = MIGRATIONS(s)
            if current > len(steps):
                raise MemoryStoreError(
                    f"this memory schema has version {current}; this version of Ditto knows up to "
                    f"{len(steps)}. Upgrade Ditto to open it.",
                    code=MemoryErrorCode.MEMORY_BACKEND_ERROR,
                )
            for statements in steps[current:]:
                for statement in statements:
                    await connection.execute(statement)
            if current == 0:
                await connection.execute(
                    f"INSERT INTO {s}.ditto_meta (name, value) VALUES ('cursor_secret', $1) "
                    "ON CONFLICT (name) DO NOTHING",
                    secrets.token_bytes(32),
                )
            await connection.execute(
                f"INSERT INTO {s}.ditto_meta (name, value) VALUES ('schema_version', $1) "
                "ON CONFLICT (name) DO UPDATE SET value = excluded.value",
                str(len(steps)).encode(),
            )
            self.cursor_secret = bytes(
                await connection.fetchval(
                    f"SELECT value FROM {s}.ditto_meta WHERE name = 'cursor_secret'"
                )
            )

    async def aclose(self) -> None:
        try:
            if self._pending_usage and self._pool is not None:
                await self.flush()
        finally:
            if self._recipe is not None and self._pool is not None:
                await self._pool.close()
                self._pool = None
            self._opened = False

    async def _ready(self) -> None:
        if not self._opened:
            await self.open()

    # ----------------------------------------------------------------- reads

    async def get(
        self, ids: Sequence[str], keys: Sequence[str], namespace: str
    ) -> list[MemoryItem]:
        await self._ready()
        async with _translated():
            rows = await self.pool.fetch(
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
        await self._ready()
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
        async with _translated():
            rows = await self.pool.fetch(sql, *params.values)
        return [row_to_item(row) for row in rows]

    async def count(self, filter: MemoryFilter) -> int:
        await self._ready()
        params = Params()
        where = where_clause(filter, params, self._s)
        async with _translated():
            value = await self.pool.fetchval(
                f"SELECT count(*) FROM {self._s}.memories m WHERE {where}", *params.values
            )
        return int(value)

    async def health(self) -> dict[str, object]:
        await self._ready()
        async with _translated():
            valid = await self.pool.fetchval(
                "SELECT bool_and(i.indisvalid AND i.indisready) FROM pg_index i "
                "JOIN pg_class c ON c.oid = i.indexrelid JOIN pg_namespace n ON n.oid = "
                "c.relnamespace WHERE n.nspname = $1 AND c.relname LIKE 'memor%'",
                self.schema,
            )
            version = await self.pool.fetchval(
                f"SELECT value FROM {self._s}.ditto_meta WHERE name = 'schema_version'"
            )
        return {"indexes_valid": bool(valid), "schema_version": int(bytes(version).decode())}

    async def search(self, input: SearchInput, ctx: NodeContext | None = None) -> list[SearchHit]:
        """Keyword search: ``ts_rank_cd`` over ``websearch_to_tsquery`` of the query words joined
        by ``or``; filters before the limit; higher scores are better."""
        words, explain = keyword_request(input, "the PostgreSQL store")
        if not words:
            return []
        await self._ready()
        params = Params([" or ".join(words)])
        sql = keyword_search_sql(self._s, input.filter, params, input.limit or 10)
        async with _translated():
            rows = await self.pool.fetch(sql, *params.values)
        hits = [SearchHit(row_to_item(row), float(row["score"])) for row in rows]
        return explained(hits, explain)

    # ----------------------------------------------------------------- writes

    async def write(
        self,
        drafts: Sequence[MemoryDraft],
        mode: WriteMode,
        vectors: Vectors | None = None,
        guard: WriteGuard | None = None,
    ) -> list[MemoryItem]:
        await self._ready()
        now = now_from(self._clock)
        keyed = sorted({(d.namespace, d.key) for d in drafts if d.key is not None})
        async with _translated(), self.pool.acquire() as connection:
            # Pending usage first, in its own statement: a failing batch must not lose it.
            await self._apply_usage(connection)
            async with connection.transaction():
                await require_vectors(connection, self._s, vectors, needed=True)
                items = await self._write_batch(connection, drafts, mode, now, keyed, guard)
                if vectors is not None:
                    await store_vectors(connection, self._s, vectors, items)
                return items

    async def _write_batch(
        self,
        connection: Connection,
        drafts: Sequence[MemoryDraft],
        mode: WriteMode,
        now: datetime,
        keyed: list[tuple[str, str]],
        guard: WriteGuard | None,
    ) -> list[MemoryItem]:
        s = self._s
        if keyed:
            await connection.execute(
                "SELECT pg_advisory_xact_lock(lock) FROM unnest($1::bigint[]) AS lock",
                [_lock_id(self.schema, namespace, key) for namespace, key in keyed],
            )
        existing: dict[tuple[str, str], MemoryItem] = {}
        if keyed:
            # FOR UPDATE: a concurrent MEMORY.UPDATE of the same record must wait, not be
            # overwritten by the upsert that read the record before it.
            rows = await connection.fetch(
                f"SELECT {columns()} FROM {records(s)} JOIN unnest($1::text[], $2::text[]) "
                "AS wanted(namespace, key) ON m.namespace = wanted.namespace "
                "AND m.key = wanted.key FOR UPDATE OF m",
                [namespace for namespace, _ in keyed],
                [key for _, key in keyed],
            )
            for row in rows:
                item = row_to_item(row)
                existing[(item.namespace, item.key or "")] = item
        steps = plan_writes(drafts, mode, existing, now, guard)
        inserts = [item_values(step.item) for step in steps if step.action == "insert"]
        if inserts:
            await self._insert(connection, inserts)
        for step in steps:
            if step.action == "replace":
                await self._replace(connection, step.item)
        await self._log(
            connection,
            [
                history_entry(step.item, CHANGE_OF_STEP[step.action], step.item.updated_at)
                for step in steps
                if step.action != "keep"
            ],
        )
        return [step.item for step in steps]

    async def _log(self, connection: Connection, entries: list[HistoryEntry]) -> None:
        """Append history entries inside the caller's transaction."""
        if entries:
            await connection.executemany(
                f"INSERT INTO {self._s}.memory_history (id, version, change, at, record) "
                "VALUES ($1, $2, $3, $4, $5)",
                [
                    (e.id, e.version, e.change, to_micros(e.at), _encode(e.record).decode())
                    for e in entries
                ],
            )

    async def _insert(self, connection: Connection, rows: list[tuple[Any, ...]]) -> None:
        await connection.copy_records_to_table(
            "memories", schema_name=self.schema, columns=list(STORED_COLUMNS), records=rows
        )

    async def _replace(self, connection: Connection, item: MemoryItem) -> None:
        values = item_values(item)
        changed = STORED_COLUMNS[3:]  # everything but id, key and namespace
        assignments = ", ".join(f"{name} = ${n}" for n, name in enumerate(changed, start=2))
        await connection.execute(
            f"UPDATE {self._s}.memories SET {assignments} WHERE id = $1", item.id, *values[3:]
        )

    async def update(
        self,
        patches: Sequence[MemoryPatch],
        vectors: Vectors | None = None,
        guard: WriteGuard | None = None,
    ) -> list[MemoryItem]:
        await self._ready()
        now = now_from(self._clock)
        ids = [patch.id for patch in patches]
        async with _translated(), self.pool.acquire() as connection:
            await self._apply_usage(connection)
            async with connection.transaction():
                needed = any(map(changes_text, patches))
                await require_vectors(connection, self._s, vectors, needed=needed)
                items = await self._update_batch(connection, patches, ids, now, guard)
                if vectors is not None:
                    await store_vectors(connection, self._s, vectors, items)
                return items

    async def _update_batch(
        self,
        connection: Connection,
        patches: Sequence[MemoryPatch],
        ids: list[str],
        now: datetime,
        guard: WriteGuard | None,
    ) -> list[MemoryItem]:
        rows = await connection.fetch(
            f"SELECT {columns()} FROM {records(self._s)} WHERE m.id = ANY($1::text[]) "
            "ORDER BY m.id FOR UPDATE OF m",
            ids,
        )
        stored = {row["id"]: row_to_item(row) for row in rows}
        missing = [item_id for item_id in ids if item_id not in stored]
        if missing:
            raise not_found(f"no record with id {missing[0]!r}")
        updated = [apply_patch(stored[patch.id], patch, now, guard) for patch in patches]
        for item in updated:
            await self._replace(connection, item)
        await self._log(
            connection,
            [
                history_entry(item, change_of_patch(patch), now)
                for item, patch in zip(updated, patches, strict=True)
            ],
        )
        return updated

    async def delete(self, ids: Sequence[str], guard: WriteGuard | None = None) -> list[str]:
        await self._ready()
        now = now_from(self._clock)
        async with _translated(), self.pool.acquire() as connection, connection.transaction():
            rows = await connection.fetch(
                f"SELECT {columns()} FROM {records(self._s)} WHERE m.id = ANY($1::text[]) "
                "ORDER BY m.id FOR UPDATE OF m",
                list(ids),
            )
            found = {row["id"]: row_to_item(row) for row in rows}
            if guard is not None:  # every check before any change: all or nothing
                found = {key: item for key, item in found.items() if guard.check_delete(item)}
            deleted = [item_id for item_id in ids if item_id in found]
            await connection.execute(
                f"DELETE FROM {self._s}.memories WHERE id = ANY($1::text[])", deleted
            )
            await self._log(
                connection, [history_entry(found[item_id], "delete", now) for item_id in deleted]
            )
            await forget_vectors(connection, self._s, deleted)
        return deleted

    async def restore(self, items: Sequence[MemoryItem]) -> int:
        await self._ready()
        s = self._s
        names = ", ".join(STORED_COLUMNS)
        marks = ", ".join(f"${n}" for n in range(1, len(STORED_COLUMNS) + 1))
        updates = ", ".join(f"{name} = excluded.{name}" for name in STORED_COLUMNS)
        async with _translated(), self.pool.acquire() as connection, connection.transaction():
            try:
                await connection.executemany(
                    f"INSERT INTO {s}.memories ({names}) VALUES ({marks}) "
                    f"ON CONFLICT (id) DO UPDATE SET {updates}",
                    [item_values(item) for item in items],
                )
            except asyncpg.exceptions.UniqueViolationError:
                raise conflict("a key in the import belongs to another record") from None
            ids = [item.id for item in items]
            await connection.execute(
                f"DELETE FROM {s}.memory_usage WHERE id = ANY($1::text[])", ids
            )
            used = [item for item in items if item.usage_count or item.last_used_at is not None]
            if used:
                await connection.executemany(
                    f"INSERT INTO {s}.memory_usage (id, usage_count, last_used_at) "
                    "VALUES ($1, $2, $3)",
                    [
                        (item.id, item.usage_count, to_micros(item.last_used_at or item.created_at))
                        for item in used
                    ],
                )
            await forget_vectors(connection, s, [], keep=items)  # a changed text: re-embed
        return len(items)

    # ----------------------------------------------------------------- vectors

    async def vector_state(self) -> VectorState:
        await self._ready()
        async with _translated(), self.pool.acquire() as connection:
            return (await read_state(connection, self._s))[0]

    async def vector_search(
        self, model: EmbeddingModel, query: Matrix, filter: MemoryFilter, limit: int
    ) -> list[tuple[MemoryItem, float]]:
        await self._ready()
        async with _translated():
            return await search_vectors(
                self.pool, self._s, self._index, self._refreshing, model, query, filter, limit
            )

    async def begin_reindex(self, model: EmbeddingModel) -> None:
        await self._ready()
        async with _translated(), self.pool.acquire() as connection:
            await begin_reindex(connection, self._s, model)

    async def missing_vectors(
        self, model: EmbeddingModel, after: str | None, limit: int
    ) -> list[MemoryItem]:
        await self._ready()
        async with _translated(), self.pool.acquire() as connection:
            return await missing_vectors(connection, self._s, model, after, limit)

    async def put_vectors(self, ids: Sequence[str], vectors: Vectors) -> int:
        await self._ready()
        async with _translated(), self.pool.acquire() as connection, connection.transaction():
            return await put_vectors(connection, self._s, ids, vectors)

    async def finish_reindex(self, model: EmbeddingModel) -> None:
        await self._ready()
        async with _translated(), self.pool.acquire() as connection, connection.transaction():
            await finish_reindex(connection, self._s, model)

    async def history(self, id: str) -> list[HistoryEntry]:
        await self._ready()
        async with _translated():
            rows = await self.pool.fetch(
                f"SELECT record, change, at FROM {self._s}.memory_history WHERE id = $1 "
                "ORDER BY seq",
                id,
            )
        entries = []
        for row in rows:
            item = _decode_item(row["record"])
            entries.append(
                HistoryEntry(item.id, item.version, row["change"], from_micros(row["at"]), item)
            )
        return entries

    async def restore_history(self, entries: Sequence[HistoryEntry]) -> int:
        await self._ready()
        added = 0
        async with _translated(), self.pool.acquire() as connection, connection.transaction():
            for entry in entries:
                present = await connection.fetchval(
                    f"SELECT 1 FROM {self._s}.memory_history "
                    "WHERE id = $1 AND version = $2 AND change = $3",
                    entry.id,
                    entry.version,
                    entry.change,
                )
                if present is None:
                    await self._log(connection, [entry])
                    added += 1
        return added

    async def append_audit(self, events: Sequence[AuditEvent]) -> None:
        await self._ready()
        async with _translated():
            await self.pool.executemany(
                f"INSERT INTO {self._s}.memory_audit (at, principal, node, ids, decision, detail) "
                "VALUES ($1, $2, $3, $4, $5, $6)",
                [
                    (
                        to_micros(e.at),
                        e.principal,
                        e.node,
                        _encode(list(e.ids)).decode(),
                        e.decision,
                        e.detail,
                    )
                    for e in events
                ],
            )

    async def audit_log(
        self, *, after: int = 0, limit: int = 100, principal: str | None = None
    ) -> list[AuditEntry]:
        await self._ready()
        async with _translated():
            rows = await self.pool.fetch(
                "SELECT seq, at, principal, node, ids, decision, detail "
                f"FROM {self._s}.memory_audit WHERE seq > $1 "
                "AND ($2::text IS NULL OR principal = $2) ORDER BY seq LIMIT $3",
                after,
                principal,
                limit,
            )
        return [
            AuditEntry(
                row["seq"],
                from_micros(row["at"]),
                row["principal"],
                row["node"],
                msgspec.json.decode(row["ids"]),
                row["decision"],
                row["detail"],
            )
            for row in rows
        ]

    async def purge_audit(self, before: datetime, *, dry_run: bool = False) -> int:
        await self._ready()
        sql = (
            f"SELECT count(*) FROM {self._s}.memory_audit WHERE at < $1"
            if dry_run
            else f"WITH gone AS (DELETE FROM {self._s}.memory_audit WHERE at < $1 RETURNING 1) "
            "SELECT count(*) FROM gone"
        )
        async with _translated():
            return int(await self.pool.fetchval(sql, to_micros(before)))

    async def record_usage(self, ids: Sequence[str], at: datetime) -> None:
        micros = to_micros(at)
        for item_id in ids:
            count, last = self._pending_usage.get(item_id, (0, micros))
            self._pending_usage[item_id] = (count + 1, max(last, micros))
        if monotonic() - self._usage_applied_at >= _USAGE_INTERVAL:
            await self.flush()

    async def flush(self) -> None:
        """Apply the pending usage counters now (one statement)."""
        if not self._pending_usage:
            return
        await self._ready()
        async with _translated(), self.pool.acquire() as connection:
            await self._apply_usage(connection)

    async def _apply_usage(self, connection: Connection) -> None:
        usage, self._pending_usage = self._pending_usage, {}
        self._usage_applied_at = monotonic()
        if not usage:
            return
        try:
            # Only for records that still exist (a deleted one may have been found a moment ago).
            await connection.execute(
                f"INSERT INTO {self._s}.memory_usage AS usage (id, usage_count, last_used_at) "
                "SELECT u.id, u.uses, u.at "
                "FROM unnest($1::text[], $2::int[], $3::bigint[]) AS u(id, uses, at) "
                f"JOIN {self._s}.memories m ON m.id = u.id "
                "ON CONFLICT (id) DO UPDATE SET "
                "usage_count = usage.usage_count + excluded.usage_count, "
                "last_used_at = greatest(usage.last_used_at, excluded.last_used_at)",
                list(usage),
                [count for count, _ in usage.values()],
                [at for _, at in usage.values()],
            )
        except BaseException:
            for item_id, (count, at) in usage.items():  # not stored: keep them for next time
                pending = self._pending_usage.get(item_id, (0, at))
                self._pending_usage[item_id] = (pending[0] + count, max(pending[1], at))
            raise
