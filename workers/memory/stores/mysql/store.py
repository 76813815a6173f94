"""``MysqlMemoryStore``: memory records in MySQL 8 or MariaDB 10.6+, written against the SQL
driver port (``workers.memory.stores.sql_driver``).

Every node behaves exactly as on SQLite and PostgreSQL (the same conformance suites run):

* **Driver.** Any :class:`~workers.memory.stores.sql_driver.SqlDriver`: :meth:`from_url`
  builds the asyncmy one (the ``mysql`` extra) and owns it; pass your own to bring another
  driver. The SQL is written once with ``?`` markers and converted to the driver's style.
* **Schema** in the URL's database, versioned migrations under a named lock (``schema``).
* **Writes** of a batch are one transaction on one connection (``writes``). Keyed drafts lock
  their key's row in ``memory_key_locks`` (sorted) before reading every record under the key,
  so concurrent writers of one key serialise instead of failing on the unique index.
* **Keyword search**: InnoDB FULLTEXT for candidates, BM25 on the shared calibrated scale
  (``search``).
* **Vectors**: float32 blobs in the record's transaction, ranked by the process's numpy
  index, kept up to date by generation (``vectors``).
* **Failures** of the driver become coded store errors at one boundary (``errors``); messages
  never contain the URL or a password.

The class is assembled from parts, one module each: ``store_base`` (driver, lifecycle,
transactions), ``store_vectors`` and ``store_logs``; reads, writes and usage are here.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime
from typing import TYPE_CHECKING

from workers.memory.model.contracts import (
    MemoryDraft,
    MemoryFilter,
    MemoryItem,
    MemoryPatch,
    OrderBy,
    SearchHit,
    SearchInput,
    WriteMode,
)
from workers.memory.model.patches import changes_text
from workers.memory.model.planning import WriteGuard, WriteRules
from workers.memory.model.records import now_from, to_micros
from workers.memory.model.review_plan import ReviewGuard
from workers.memory.model.reviews import ReviewDecision
from workers.memory.ports import (
    AuditLog,
    ChangedRecord,
    ChangeFeed,
    HistoryLog,
    KeywordSearch,
    MemoryStore,
    QueryPosition,
    RecordImport,
    UsageTracking,
    VectorStore,
)
from workers.memory.retrieval.keyword import explained, keyword_request
from workers.memory.stores.mysql import vectors as my_vectors
from workers.memory.stores.mysql.errors import mysql_errors
from workers.memory.stores.mysql.search import keyword_search
from workers.memory.stores.mysql.sql import (
    Params,
    columns,
    key_hash,
    marks,
    order_clause,
    records,
    where_clause,
)
from workers.memory.stores.mysql.store_logs import MysqlLogs
from workers.memory.stores.mysql.store_vectors import MysqlVectors
from workers.memory.stores.mysql.writes import (
    delete_batch,
    restore_batch,
    review_batch,
    update_batch,
    write_batch,
)
from workers.memory.stores.rows import row_to_item
from workers.memory.stores.sql_driver import SqlDriver, fetch, run

if TYPE_CHECKING:
    from ditto.runtime.context import NodeContext
    from workers.memory.retrieval.vectors import Vectors

__all__ = ("MysqlMemoryStore",)


class MysqlMemoryStore(
    MysqlVectors,
    MysqlLogs,
    MemoryStore,
    UsageTracking,
    KeywordSearch,
    VectorStore,
    HistoryLog,
    AuditLog,
    RecordImport,
    ChangeFeed,
):
    """Memory records in MySQL or MariaDB.

    Build it with :meth:`from_url` (the store owns and closes its driver), or pass a ready
    :class:`~workers.memory.stores.sql_driver.SqlDriver` (the application owns it). Open it
    (``async with`` or :meth:`open`) to apply migrations; operations also open it on first use.

    Args:
        driver: The SQL driver (its connections run ``READ COMMITTED``, ``utf8mb4``).
        clock: Source of timestamps (default: system clock, UTC).
        owns_driver: Close ``driver`` in :meth:`aclose`.
        search_budget: Records one keyword search may score before frequent words are left
            to the fill phase (see ``search``).

    Raises:
        InvalidInputError: ``search_budget`` is below 1.
    """

    # ----------------------------------------------------------------- reads

    async def get(
        self, ids: Sequence[str], keys: Sequence[str], namespace: str
    ) -> list[MemoryItem]:
        driver = await self._ready()
        hashes = [key_hash(namespace, key) for key in keys]
        async with mysql_errors():
            rows = await fetch(
                driver,
                f"SELECT {columns()} FROM {records()} WHERE m.`id` IN ({marks(len(ids))}) "
                f"OR (m.`key_hash` IN ({marks(len(hashes))}) AND m.`namespace` = ?)",
                [*ids, *hashes, namespace],
            )
        # The key hash narrows the rows; the key itself decides (a hash collision is no match).
        wanted_ids, wanted_keys = set(ids), set(keys)
        return [
            item
            for item in map(row_to_item, rows)
            if item.id in wanted_ids or (item.namespace == namespace and item.key in wanted_keys)
        ]

    async def query(
        self, filter: MemoryFilter, order: OrderBy, limit: int, after: QueryPosition | None
    ) -> list[MemoryItem]:
        driver = await self._ready()
        params = Params()
        where = where_clause(filter, params, now_from(self._clock))
        expression, direction, comparison = order_clause(order)
        if after is not None:
            where += f" AND ({expression}, m.`id`) {comparison} (?, ?)"
            params.values.extend(after)
        sql = (
            f"SELECT {columns()} FROM {records()} WHERE {where} "
            f"ORDER BY {expression} {direction}, m.`id` {direction} LIMIT ?"
        )
        async with mysql_errors():
            rows = await fetch(driver, sql, [*params.values, limit])
        return [row_to_item(row) for row in rows]

    async def changes_after(self, after: QueryPosition, limit: int) -> list[ChangedRecord]:
        driver = await self._ready()
        sql = (
            "SELECT `id`, `namespace`, `version`, `updated_at` FROM memories "
            "WHERE (`updated_at`, `id`) > (?, ?) ORDER BY `updated_at`, `id` LIMIT ?"
        )
        async with mysql_errors():
            rows = await fetch(driver, sql, [*after, limit])
        return [ChangedRecord(*row) for row in rows]

    async def count(self, filter: MemoryFilter) -> int:
        driver = await self._ready()
        params = Params()
        where = where_clause(filter, params, now_from(self._clock))
        async with mysql_errors():
            rows = await fetch(
                driver, f"SELECT COUNT(*) FROM memories m WHERE {where}", params.values
            )
        return int(rows[0][0])

    async def health(self) -> dict[str, object]:
        """``integrity`` (``OK`` when ``CHECK TABLE`` finds the records and their history
        sound) and ``schema_version``."""
        driver = await self._ready()
        async with mysql_errors():
            version = await fetch(
                driver, "SELECT value FROM ditto_meta WHERE name = 'schema_version'"
            )
            # One status row per table checked; the last says whether it is sound ("OK").
            checked = await fetch(driver, "CHECK TABLE memories, memory_history")
        statuses = {str(row[3]) for row in checked if str(row[2]).lower() == "status"}
        return {
            "integrity": "OK" if statuses == {"OK"} else ", ".join(sorted(statuses)),
            "schema_version": int(bytes(version[0][0]).decode()),
        }

    async def search(self, input: SearchInput, ctx: NodeContext | None = None) -> list[SearchHit]:
        """Keyword search: candidates from InnoDB FULLTEXT, Okapi BM25 of the query's words
        OR-ed on the calibrated scale (``search``); filters before the limit."""
        words, explain = keyword_request(input, "the MySQL store")
        if not words:
            return []
        driver = await self._ready()
        async with mysql_errors():
            hits = await keyword_search(
                driver,
                self._statistics,
                words,
                input.filter,
                input.limit or 10,
                now_from(self._clock),
                self.search_budget,
            )
        return explained([SearchHit(row_to_item(row), score) for row, score in hits], explain)

    # ----------------------------------------------------------------- writes

    async def write(
        self,
        drafts: Sequence[MemoryDraft],
        mode: WriteMode,
        vectors: Vectors | None = None,
        guard: WriteGuard | None = None,
        rules: WriteRules | None = None,
    ) -> list[MemoryItem]:
        now = now_from(self._clock)
        return await self._changing(
            vectors, True, lambda db: write_batch(db, drafts, mode, now, guard, rules)
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
            lambda db: update_batch(db, patches, now, guard),
        )

    async def _changing(
        self,
        vectors: Vectors | None,
        text_changes: bool,
        change: Callable[[SqlDriver], Awaitable[list[MemoryItem]]],
    ) -> list[MemoryItem]:
        """Run ``change`` in one transaction with the records' vectors checked and stored."""

        async def changing(db: SqlDriver) -> list[MemoryItem]:
            await my_vectors.require_vectors(db, vectors, needed=text_changes)
            items = await change(db)
            if vectors is not None:
                await my_vectors.store_vectors(db, vectors, items)
            return items

        return await self._transaction(changing)

    async def delete(self, ids: Sequence[str], guard: WriteGuard | None = None) -> list[str]:
        now = now_from(self._clock)

        async def deleting(db: SqlDriver) -> list[str]:
            deleted = await delete_batch(db, ids, now, guard)
            await my_vectors.forget_vectors(db, deleted)
            return deleted

        return await self._transaction(deleting)

    async def review(
        self,
        decisions: Sequence[ReviewDecision],
        reviewer: str | None = None,
        guard: ReviewGuard | None = None,
    ) -> list[MemoryItem]:
        now = now_from(self._clock)
        rejected = [decision.id for decision in decisions if decision.decision == "reject"]

        async def reviewing(db: SqlDriver) -> list[MemoryItem]:
            reviewed = await review_batch(db, decisions, reviewer, now, guard)
            await my_vectors.forget_vectors(db, rejected)
            return reviewed

        return await self._transaction(reviewing)

    async def restore(self, items: Sequence[MemoryItem]) -> int:

        async def restoring(db: SqlDriver) -> None:
            await restore_batch(db, items)
            await my_vectors.forget_vectors(db, [], keep=items)  # re-embed changed texts

        await self._transaction(restoring)
        return len(items)

    # ----------------------------------------------------------------- usage

    async def record_usage(self, ids: Sequence[str], at: datetime) -> None:
        """Count one use of each id now, in one statement (only records that still exist: a
        deleted one may have been found a moment ago), rows locked in id order so two searches
        counting the same records wait for each other instead of deadlocking."""
        uses = Counter(sorted(ids))
        if not uses:
            return
        driver = await self._ready()
        micros = to_micros(at)
        used = " UNION ALL ".join("SELECT ? AS id, ? AS uses" for _ in uses)
        async with mysql_errors():
            await run(
                driver,
                "INSERT INTO memory_usage (`id`, `usage_count`, `last_used_at`) "
                f"SELECT u.id, u.uses, ? FROM ({used}) u JOIN memories m ON m.`id` = u.id "
                "ORDER BY u.id "
                "ON DUPLICATE KEY UPDATE `usage_count` = `usage_count` + VALUES(`usage_count`), "
                "`last_used_at` = GREATEST(`last_used_at`, VALUES(`last_used_at`))",
                [micros, *(value for pair in uses.items() for value in pair)],
            )
