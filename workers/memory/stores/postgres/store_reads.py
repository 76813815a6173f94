"""The PostgreSQL store's reads: GET, QUERY, COUNT, health and keyword search."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from workers.memory.model.contracts import (
    MemoryFilter,
    MemoryItem,
    OrderBy,
    SearchHit,
    SearchInput,
)
from workers.memory.model.records import now_from
from workers.memory.ports import ChangedRecord, QueryPosition
from workers.memory.retrieval.keyword import explained, keyword_request
from workers.memory.stores.postgres.errors import postgres_errors
from workers.memory.stores.postgres.search import keyword_search
from workers.memory.stores.postgres.sql import (
    Params,
    columns,
    order_clause,
    records,
    where_clause,
)
from workers.memory.stores.postgres.store_base import PostgresStoreBase
from workers.memory.stores.rows import row_to_item

if TYPE_CHECKING:
    from ditto.runtime.context import NodeContext

__all__ = ("PostgresReads",)


class PostgresReads(PostgresStoreBase):
    """Reads of :class:`~workers.memory.stores.postgres.store.PostgresMemoryStore`."""

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
        where = where_clause(filter, params, self._s, now_from(self._clock))
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

    async def changes_after(self, after: QueryPosition, limit: int) -> list[ChangedRecord]:
        pool = await self._ready()
        sql = (
            f"SELECT id, namespace, version, updated_at FROM {self._s}.memories "
            "WHERE (updated_at, id) > ($1, $2) ORDER BY updated_at, id LIMIT $3"
        )
        async with postgres_errors():
            rows = await pool.fetch(sql, after[0], after[1], limit)
        return [ChangedRecord(*row) for row in rows]

    async def count(self, filter: MemoryFilter) -> int:
        pool = await self._ready()
        params = Params()
        where = where_clause(filter, params, self._s, now_from(self._clock))
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
        words, explain = keyword_request(input, "the PostgreSQL store", native=True)
        if not words:
            return []
        async with self._connection() as connection:
            hits = await keyword_search(
                connection,
                self._planner,
                self._s,
                words,
                input.filter,
                input.limit or 10,
                now_from(self._clock),
            )
        return explained([SearchHit(row_to_item(row), score) for row, score in hits], explain)
