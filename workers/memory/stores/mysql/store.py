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
* **Failures** of the driver become coded store errors at one boundary (``errors``); messages
  never contain the URL or a password.

Vectors are not stored (no ``VectorStore`` capability): hybrid search needs another store.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Self, TypeVar

from ditto.errors import ErrorCode
from ditto.extras import install_hint
from workers.memory.model.contracts import (
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
from workers.memory.model.errors import MemoryStoreError
from workers.memory.model.planning import WriteGuard, WriteRules
from workers.memory.model.records import Clock, now_from, to_micros, utc_now
from workers.memory.ports import (
    AuditEvent,
    AuditLog,
    HistoryLog,
    KeywordSearch,
    MemoryStore,
    QueryPosition,
    RecordImport,
    UsageTracking,
)
from workers.memory.retrieval.keyword import explained, keyword_request
from workers.memory.stores.mysql import logs
from workers.memory.stores.mysql.errors import committing, error_number, mysql_errors
from workers.memory.stores.mysql.schema import migrate
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
from workers.memory.stores.mysql.writes import (
    delete_batch,
    restore_batch,
    update_batch,
    write_batch,
)
from workers.memory.stores.rows import row_to_item
from workers.memory.stores.sql_driver import SqlDriver, fetch, run

if TYPE_CHECKING:
    from ditto.runtime.context import NodeContext
    from workers.memory.retrieval.vectors import Vectors

__all__ = ("MysqlMemoryStore",)

T = TypeVar("T")

_DEADLOCK = 1213
_ATTEMPTS = 3
"""A transaction InnoDB chose as a deadlock victim was rolled back whole: run it again (at
most this many times) before reporting a retryable ``CONFLICT``."""


class MysqlMemoryStore(
    MemoryStore, UsageTracking, KeywordSearch, HistoryLog, AuditLog, RecordImport
):
    """Memory records in MySQL or MariaDB.

    Build it with :meth:`from_url` (the store owns and closes its driver), or pass a ready
    :class:`~workers.memory.stores.sql_driver.SqlDriver` (the application owns it). Open it
    (``async with`` or :meth:`open`) to apply migrations; operations also open it on first use.

    Args:
        driver: The SQL driver (its connections run ``READ COMMITTED``, ``utf8mb4``).
        clock: Source of timestamps (default: system clock, UTC).
        owns_driver: Close ``driver`` in :meth:`aclose`.
    """

    def __init__(
        self, driver: SqlDriver, *, clock: Clock = utc_now, owns_driver: bool = False
    ) -> None:
        super().__init__()
        self.driver = driver
        self._clock = clock
        self._owns = owns_driver
        self._opened = False
        self._open_lock = asyncio.Lock()

    @classmethod
    def from_url(cls, url: str, *, pool_size: int = 10, clock: Clock = utc_now) -> Self:
        """A store over its own asyncmy pool (``mysql://user:password@host:3306/database``),
        connected on first use and closed by :meth:`aclose`.

        Raises:
            MemoryStoreError: ``STORE_UNAVAILABLE`` naming the install command when asyncmy
                (the ``mysql`` extra) is not installed.
            InvalidInputError: ``url`` is not a ``mysql://`` URL naming a database.
        """
        try:
            from workers.memory.stores.mysql.asyncmy_driver import AsyncmyDriver
        except ImportError as exc:
            if (exc.name or "").partition(".")[0] != "asyncmy":
                raise  # not the missing extra: a real bug, with its traceback
            raise MemoryStoreError(
                f"a MySQL memory store needs the mysql extra (asyncmy): {install_hint('mysql')}",
                code=ErrorCode.STORE_UNAVAILABLE,
            ) from None

        return cls(AsyncmyDriver(url, pool_size=pool_size), clock=clock, owns_driver=True)

    # ----------------------------------------------------------------- lifecycle

    async def open(self) -> None:
        """Migrate the schema. Idempotent and safe to call concurrently."""
        if self._opened:
            return
        async with self._open_lock, mysql_errors():
            if not self._opened:
                self.cursor_secret = await migrate(self.driver)
                self._opened = True

    async def aclose(self) -> None:
        if self._owns:
            await self.driver.aclose()
        self._opened = False

    async def _ready(self) -> SqlDriver:
        if not self._opened:
            await self.open()
        return self.driver

    async def _transaction(self, change: Callable[[SqlDriver], Awaitable[T]]) -> T:
        """``change`` in one transaction, run again when InnoDB picked it as a deadlock
        victim (it was rolled back whole, so nothing of it is stored)."""
        driver = await self._ready()
        for attempt in range(1, _ATTEMPTS + 1):
            try:
                async with mysql_errors(), committing(driver) as bound:
                    return await change(bound)
            except MemoryStoreError as exc:
                cause = exc.__cause__
                if attempt == _ATTEMPTS or cause is None or error_number(cause) != _DEADLOCK:
                    raise
        raise AssertionError("unreachable")  # the loop returns or raises

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
        wanted = set(keys)
        return [
            item
            for item in map(row_to_item, rows)
            if item.id in ids or (item.namespace == namespace and item.key in wanted)
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
                driver, words, input.filter, input.limit or 10, now_from(self._clock)
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
        _no_vectors(vectors)
        now = now_from(self._clock)
        return await self._transaction(lambda db: write_batch(db, drafts, mode, now, guard, rules))

    async def update(
        self,
        patches: Sequence[MemoryPatch],
        vectors: Vectors | None = None,
        guard: WriteGuard | None = None,
    ) -> list[MemoryItem]:
        _no_vectors(vectors)
        now = now_from(self._clock)
        return await self._transaction(lambda db: update_batch(db, patches, now, guard))

    async def delete(self, ids: Sequence[str], guard: WriteGuard | None = None) -> list[str]:
        now = now_from(self._clock)
        return await self._transaction(lambda db: delete_batch(db, ids, now, guard))

    async def restore(self, items: Sequence[MemoryItem]) -> int:
        await self._transaction(lambda db: restore_batch(db, items))
        return len(items)

    # ----------------------------------------------------------------- usage

    async def record_usage(self, ids: Sequence[str], at: datetime) -> None:
        """Count one use of each id now, in one statement (only records that still exist: a
        deleted one may have been found a moment ago)."""
        uses = Counter(ids)
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
                "ON DUPLICATE KEY UPDATE `usage_count` = `usage_count` + VALUES(`usage_count`), "
                "`last_used_at` = GREATEST(`last_used_at`, VALUES(`last_used_at`))",
                [micros, *(value for pair in uses.items() for value in pair)],
            )

    # ----------------------------------------------------------------- logs

    async def history(self, id: str) -> list[HistoryEntry]:
        driver = await self._ready()
        async with mysql_errors():
            return await logs.history_of(driver, id)

    async def history_page(
        self, after: int, limit: int, *, namespace: str | None = None, key: str | None = None
    ) -> tuple[list[HistoryEntry], int]:
        driver = await self._ready()
        async with mysql_errors():
            return await logs.history_page(driver, after, limit, namespace, key)

    async def restore_history(self, entries: Sequence[HistoryEntry]) -> int:
        return await self._transaction(lambda db: logs.restore_history(db, entries))

    async def append_audit(self, events: Sequence[AuditEvent]) -> None:
        driver = await self._ready()
        async with mysql_errors():
            await logs.append_audit(driver, events)

    async def audit_log(
        self, *, after: int = 0, limit: int = 100, principal: str | None = None
    ) -> list[AuditEntry]:
        driver = await self._ready()
        async with mysql_errors():
            return await logs.read_audit(driver, after, limit, principal)

    async def purge_audit(self, before: datetime, *, dry_run: bool = False) -> int:
        driver = await self._ready()
        async with mysql_errors():
            return await logs.purge_audit(driver, to_micros(before), dry_run)


def _no_vectors(vectors: Vectors | None) -> None:
    # The worker embeds only for a VectorStore; a caller passing vectors anyway must learn
    # they are not kept rather than lose them silently.
    if vectors is not None:
        raise MemoryStoreError("the MySQL memory store keeps no vectors")
