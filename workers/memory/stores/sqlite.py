"""``SqliteMemoryStore``: the embedded default — one SQLite file, no server.

Design:

* **Threads.** sqlite3 blocks, so the store owns one writer thread (every transaction, in
  order) and a few reader threads, each with its own connection; each operation is one thread
  hop, never one per row. WAL lets readers run while the writer commits.
* **Transactions.** Every write is ``BEGIN IMMEDIATE`` ... ``COMMIT`` with the FTS index kept in
  sync in the same transaction, so a failure or a crash mid-batch leaves no partial batch.
* **Usage counters** are collected in memory without waiting (off the read path) and applied
  in one transaction by the writer: at most ``_USAGE_DELAY`` seconds later, or first thing in
  the next write transaction, whichever comes first; :meth:`flush` applies them now. Coalescing
  them keeps a busy search path from turning into one write transaction per search.
* **Schema** is versioned with ``PRAGMA user_version`` (``sqlite_schema``); SQL is parameterised
  (``sqlite_sql``); keyword search is planned FTS5 BM25 (``sqlite_search``).
"""

from __future__ import annotations

import asyncio
import logging
import os
import sqlite3
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import msgspec

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
from workers.memory.errors import MemoryStoreError, key_taken, not_found
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
from workers.memory.stores.rows import row_to_item
from workers.memory.stores.sqlite_schema import migrate, read_cursor_secret
from workers.memory.stores.sqlite_search import DEFAULT_BUDGET, KeywordPlanner, keyword_search
from workers.memory.stores.sqlite_sql import (
    COLUMNS,
    INSERT_COLUMNS,
    RETURNING_COLUMNS,
    connect,
    fts_row,
    item_row,
    order_clause,
    rows_for_ids,
    where_clause,
)
from workers.memory.stores.sqlite_vectors import (
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
from workers.memory.vectors import VECTOR_THREAD, VectorIndex, Vectors, VectorState

if TYPE_CHECKING:
    from ditto.runtime.context import NodeContext

__all__ = ("SqliteMemoryStore",)

logger = logging.getLogger("ditto.workers.memory.sqlite")

T = TypeVar("T")

_BY_ID = f"SELECT {COLUMNS} FROM memories m WHERE m.id IN ({{marks}})"
_USAGE_DELAY = 0.05
_INSERT = f"INSERT INTO memories ({INSERT_COLUMNS}) VALUES ({', '.join('?' * 18)})"
_REPLACE = (
    "UPDATE memories SET content = ?, summary = ?, category = ?, tags = ?, metadata = ?, "
    "source = ?, updated_at = ?, version = ?, pinned = ?, archived_at = ?, owner = ?, "
    "visibility = ? WHERE id = ? RETURNING seq"
)


def _by_key(connection: sqlite3.Connection, namespace: str, keys: Sequence[str]) -> list[Any]:
    """Rows of the records with ``keys`` in ``namespace``."""
    sql = f"SELECT {COLUMNS} FROM memories m WHERE m.key IN ({{marks}}) AND m.namespace = ?"
    return rows_for_ids(connection, sql, keys, [namespace])


class SqliteMemoryStore(MemoryStore):
    """Memory records in one SQLite file.

    Example::

        async with SqliteMemoryStore("memory.sqlite") as store:
            runtime = create_ditto(workers=[create_memory_worker(store)])

    Args:
        path: The database file (created if missing). ``:memory:`` is refused: memory must
            survive the process.
        readers: Reader threads (and connections).
        clock: Source of timestamps (default: system clock, UTC).
        search_budget: Postings one keyword search may rank by BM25 before frequent words are
            left to the fill phase (see ``sqlite_search``).

    Raises:
        InvalidInputError: ``path`` is ``:memory:`` or empty.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        readers: int = 4,
        clock: Clock = utc_now,
        search_budget: int = DEFAULT_BUDGET,
    ) -> None:
        super().__init__()
        text = os.fspath(path)
        if not text or text == ":memory:" or text.startswith("file::memory:"):
            raise InvalidInputError(
                "SqliteMemoryStore needs a file path; use InProcessMemoryStore for memory that "
                "may vanish with the process"
            )
        if readers < 1:
            raise InvalidInputError("readers must be at least 1")
        self.path = Path(text)
        self._readers_count = readers
        self._clock = clock
        self._budget = search_budget
        self._local = threading.local()
        self._connections: list[sqlite3.Connection] = []
        self._connections_lock = threading.Lock()
        self._writer: ThreadPoolExecutor | None = None
        self._readers: ThreadPoolExecutor | None = None
        self._open_lock = asyncio.Lock()
        self._closed = False
        self._usage_lock = threading.Lock()
        self._pending_usage: dict[str, tuple[int, int]] = {}
        self._usage_timer: asyncio.TimerHandle | None = None
        self._index = VectorIndex()

    # ----------------------------------------------------------------- lifecycle

    async def open(self) -> None:
        """Create the file if needed, migrate the schema and start the threads. Idempotent."""
        async with self._open_lock:
            if self._writer is not None:
                return
            if self._closed:
                raise MemoryStoreError("the memory store is closed")
            writer = ThreadPoolExecutor(1, "ditto-sqlite-writer")
            try:
                self.cursor_secret = await asyncio.wrap_future(writer.submit(self._setup))
            except BaseException:
                writer.shutdown(wait=True)
                self._close_connections()
                raise
            self._writer = writer
            self._readers = ThreadPoolExecutor(self._readers_count, "ditto-sqlite-reader")

    def _setup(self) -> bytes:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        connection = self._connection()
        migrate(connection)
        return read_cursor_secret(connection)

    def _connection(self) -> sqlite3.Connection:
        """This thread's connection (opened on first use)."""
        connection: sqlite3.Connection | None = getattr(self._local, "connection", None)
        if connection is None:
            connection = connect(str(self.path))
            self._local.connection = connection
            self._local.planner = KeywordPlanner(connection)
            with self._connections_lock:
                self._connections.append(connection)
        return connection

    async def aclose(self) -> None:
        """Apply pending usage counters, stop the threads and close every connection."""
        await self.flush()
        async with self._open_lock:
            self._closed = True
            writer, readers = self._writer, self._readers
            self._writer = self._readers = None
        for executor in (readers, writer):
            if executor is not None:
                await asyncio.to_thread(executor.shutdown, True)
        self._close_connections()

    def _close_connections(self) -> None:
        with self._connections_lock:
            connections, self._connections = self._connections, []
        for connection in connections:
            connection.close()

    async def _read(self, function: Callable[..., T], *args: Any) -> T:
        if self._readers is None:
            await self.open()
        assert self._readers is not None
        return await asyncio.wrap_future(self._readers.submit(function, *args))

    async def _write(self, function: Callable[..., T], *args: Any) -> T:
        if self._writer is None:
            await self.open()
        assert self._writer is not None
        return await asyncio.wrap_future(self._writer.submit(self._transaction, function, *args))

    def _transaction(self, function: Callable[..., T], *args: Any) -> T:
        connection = self._connection()
        with self._usage_lock:
            usage, self._pending_usage = self._pending_usage, {}
        try:
            connection.execute("BEGIN IMMEDIATE")
            try:
                if usage:
                    connection.executemany(
                        "UPDATE memories SET usage_count = usage_count + ?, "
                        "last_used_at = max(coalesce(last_used_at, ?), ?) WHERE id = ?",
                        [(count, at, at, item_id) for item_id, (count, at) in usage.items()],
                    )
                result = function(connection, *args)
                connection.execute("COMMIT")
            except BaseException:
                if connection.in_transaction:
                    connection.execute("ROLLBACK")
                raise
        except BaseException:
            with self._usage_lock:  # the counters were not stored: keep them for next time
                for item_id, (count, at) in usage.items():
                    pending = self._pending_usage.get(item_id, (0, at))
                    self._pending_usage[item_id] = (pending[0] + count, max(pending[1], at))
            raise
        return result

    # ----------------------------------------------------------------- reads

    async def get(
        self, ids: Sequence[str], keys: Sequence[str], namespace: str
    ) -> list[MemoryItem]:
        return await self._read(self._get, list(ids), list(keys), namespace)

    def _get(self, ids: list[str], keys: list[str], namespace: str) -> list[MemoryItem]:
        connection = self._connection()
        rows = rows_for_ids(connection, _BY_ID, ids) + _by_key(connection, namespace, keys)
        return [row_to_item(row) for row in rows]

    async def query(
        self, filter: MemoryFilter, order: OrderBy, limit: int, after: QueryPosition | None
    ) -> list[MemoryItem]:
        return await self._read(self._query, filter, order, limit, after)

    def _query(
        self, filter: MemoryFilter, order: OrderBy, limit: int, after: QueryPosition | None
    ) -> list[MemoryItem]:
        where, params = where_clause(filter)
        expression, direction, comparison = order_clause(order)
        if after is not None:
            where += f" AND ({expression}, m.id) {comparison} (?, ?)"
            params += [after[0], after[1]]
        rows = self._connection().execute(
            f"SELECT {COLUMNS} FROM memories m WHERE {where} "
            f"ORDER BY {expression} {direction}, m.id {direction} LIMIT ?",
            [*params, limit],
        )
        return [row_to_item(row) for row in rows]

    async def count(self, filter: MemoryFilter) -> int:
        return await self._read(self._count, filter)

    def _count(self, filter: MemoryFilter) -> int:
        where, params = where_clause(filter)
        sql = f"SELECT count(*) FROM memories m WHERE {where}"
        return int(self._connection().execute(sql, params).fetchone()[0])

    async def health(self) -> dict[str, object]:
        return await self._read(self._health)

    def _health(self) -> dict[str, object]:
        connection = self._connection()
        (records,) = connection.execute("SELECT count(*) FROM memories").fetchone()
        (indexed,) = connection.execute("SELECT count(*) FROM memory_fts").fetchone()
        (check,) = connection.execute("PRAGMA quick_check").fetchone()
        return {
            "keyword_index_rows": indexed,
            "keyword_index_in_sync": indexed == records,
            "integrity": check,
            "schema_version": connection.execute("PRAGMA user_version").fetchone()[0],
        }

    async def search(self, input: SearchInput, ctx: NodeContext | None = None) -> list[SearchHit]:
        """Keyword search (strategy ``None`` or ``"keyword"``): planned FTS5 BM25, OR semantics,
        filters before the limit, any text safe. Scores are ``-bm25``: higher is better."""
        words, explain = keyword_request(input, "the SQLite store")
        if not words:
            return []
        hits = await self._read(self._search, words, input.filter, input.limit or 10)
        return explained(hits, explain)

    def _search(self, words: list[str], filter: MemoryFilter, limit: int) -> list[SearchHit]:
        self._connection()
        hits = keyword_search(self._local.planner, words, filter, limit, self._budget)
        return [SearchHit(row_to_item(row), score) for row, score in hits]

    # ----------------------------------------------------------------- writes

    async def write(
        self,
        drafts: Sequence[MemoryDraft],
        mode: WriteMode,
        vectors: Vectors | None = None,
        guard: WriteGuard | None = None,
    ) -> list[MemoryItem]:
        return await self._write(
            self._write_batch, list(drafts), mode, now_from(self._clock), vectors, guard
        )

    def _write_batch(
        self,
        connection: sqlite3.Connection,
        drafts: list[MemoryDraft],
        mode: WriteMode,
        now: datetime,
        vectors: Vectors | None,
        guard: WriteGuard | None,
    ) -> list[MemoryItem]:
        require_vectors(connection, vectors, needed=True)
        existing: dict[tuple[str, str], MemoryItem] = {}
        by_namespace: dict[str, list[str]] = {}
        for draft in drafts:
            if draft.key is not None:
                by_namespace.setdefault(draft.namespace, []).append(draft.key)
        for namespace, keys in by_namespace.items():
            for row in _by_key(connection, namespace, keys):
                item = row_to_item(row)
                existing[(item.namespace, item.key or "")] = item
        steps = plan_writes(drafts, mode, existing, now, guard)
        inserts = [step.item for step in steps if step.action == "insert"]
        if inserts:
            connection.executemany(_INSERT, [item_row(item) for item in inserts])
            first_seq = connection.execute("SELECT last_insert_rowid()").fetchone()[0]
            # executemany in one transaction assigns consecutive rowids to a table that only
            # this writer inserts into, so the batch's seqs end at last_insert_rowid().
            start = first_seq - len(inserts) + 1
            connection.executemany(
                "INSERT INTO memory_fts(rowid, key, summary, body) VALUES (?, ?, ?, ?)",
                [(start + offset, *fts_row(item)) for offset, item in enumerate(inserts)],
            )
        for step in steps:
            if step.action == "replace":
                self._replace(connection, step.item)
        _log(
            connection,
            [
                history_entry(step.item, CHANGE_OF_STEP[step.action], step.item.updated_at)
                for step in steps
                if step.action != "keep"
            ],
        )
        if vectors is not None:
            store_vectors(connection, vectors, [step.item for step in steps])
        return [step.item for step in steps]

    def _replace(self, connection: sqlite3.Connection, item: MemoryItem) -> None:
        row = item_row(item)
        (seq,) = connection.execute(
            _REPLACE, (*row[3:9], row[10], row[11], *row[14:18], item.id)
        ).fetchone()
        connection.execute("DELETE FROM memory_fts WHERE rowid = ?", (seq,))
        connection.execute(
            "INSERT INTO memory_fts(rowid, key, summary, body) VALUES (?, ?, ?, ?)",
            (seq, *fts_row(item)),
        )

    async def update(
        self,
        patches: Sequence[MemoryPatch],
        vectors: Vectors | None = None,
        guard: WriteGuard | None = None,
    ) -> list[MemoryItem]:
        now = now_from(self._clock)
        return await self._write(self._update, list(patches), now, vectors, guard)

    def _update(
        self,
        connection: sqlite3.Connection,
        patches: list[MemoryPatch],
        now: datetime,
        vectors: Vectors | None,
        guard: WriteGuard | None,
    ) -> list[MemoryItem]:
        require_vectors(connection, vectors, needed=any(map(changes_text, patches)))
        ids = [patch.id for patch in patches]
        stored = {row[0]: row_to_item(row) for row in rows_for_ids(connection, _BY_ID, ids)}
        missing = [item_id for item_id in ids if item_id not in stored]
        if missing:
            raise not_found(f"no record with id {missing[0]!r}")
        updated = [apply_patch(stored[patch.id], patch, now, guard) for patch in patches]
        for item in updated:
            self._replace(connection, item)
        _log(
            connection,
            [
                history_entry(item, change_of_patch(patch), now)
                for item, patch in zip(updated, patches, strict=True)
            ],
        )
        if vectors is not None:
            store_vectors(connection, vectors, updated)
        return updated

    async def delete(self, ids: Sequence[str], guard: WriteGuard | None = None) -> list[str]:
        return await self._write(self._delete, list(ids), now_from(self._clock), guard)

    def _delete(
        self,
        connection: sqlite3.Connection,
        ids: list[str],
        now: datetime,
        guard: WriteGuard | None,
    ) -> list[str]:
        if guard is not None:  # every check before any change: all or nothing
            rows = rows_for_ids(connection, _BY_ID, ids)
            allowed = {row[0] for row in rows if guard.check_delete(row_to_item(row))}
            ids = [item_id for item_id in ids if item_id in allowed]
        deleted: list[str] = []
        entries: list[HistoryEntry] = []
        for item_id in ids:
            row = connection.execute(
                f"DELETE FROM memories WHERE id = ? RETURNING seq, {RETURNING_COLUMNS}",
                (item_id,),
            ).fetchone()
            if row is not None:
                connection.execute("DELETE FROM memory_fts WHERE rowid = ?", (row[0],))
                entries.append(history_entry(row_to_item(row[1:]), "delete", now))
                deleted.append(item_id)
        _log(connection, entries)
        forget_vectors(connection, deleted)
        return deleted

    async def restore(self, items: Sequence[MemoryItem]) -> int:
        return await self._write(self._restore, list(items))

    def _restore(self, connection: sqlite3.Connection, items: list[MemoryItem]) -> int:
        for item in items:
            row = connection.execute("SELECT seq FROM memories WHERE id = ?", (item.id,)).fetchone()
            if row is not None:  # replaced in place: drop the old row and its index entry
                connection.execute("DELETE FROM memories WHERE seq = ?", (row[0],))
                connection.execute("DELETE FROM memory_fts WHERE rowid = ?", (row[0],))
            try:
                connection.execute(_INSERT, item_row(item))
            except sqlite3.IntegrityError:
                raise key_taken(item.namespace, item.key) from None
            (seq,) = connection.execute("SELECT last_insert_rowid()").fetchone()
            connection.execute(
                "INSERT INTO memory_fts(rowid, key, summary, body) VALUES (?, ?, ?, ?)",
                (seq, *fts_row(item)),
            )
        forget_vectors(connection, [], keep=items)  # a changed text needs a new vector
        return len(items)

    # ----------------------------------------------------------------- vectors

    async def vector_state(self) -> VectorState:
        return await self._read(lambda: read_state(self._connection())[0])

    async def vector_search(
        self, model: EmbeddingModel, query: Matrix, filter: MemoryFilter, limit: int
    ) -> list[tuple[MemoryItem, float]]:
        if self._readers is None:
            await self.open()
        # On the vector thread (see VECTOR_THREAD), with that thread's own connection.
        searching = VECTOR_THREAD.submit(
            lambda: search_vectors(self._connection(), self._index, model, query, filter, limit)
        )
        return await asyncio.wrap_future(searching)

    async def begin_reindex(self, model: EmbeddingModel) -> None:
        await self._write(begin_reindex, model)

    async def missing_vectors(
        self, model: EmbeddingModel, after: str | None, limit: int
    ) -> list[MemoryItem]:
        return await self._read(lambda: missing_vectors(self._connection(), model, after, limit))

    async def put_vectors(self, ids: Sequence[str], vectors: Vectors) -> int:
        return await self._write(put_vectors, list(ids), vectors)

    async def finish_reindex(self, model: EmbeddingModel) -> None:
        await self._write(finish_reindex, model)

    async def history(self, id: str) -> list[HistoryEntry]:
        return await self._read(self._history, id)

    def _history(self, item_id: str) -> list[HistoryEntry]:
        rows = self._connection().execute(
            "SELECT record, change, at FROM memory_history WHERE id = ? ORDER BY seq", (item_id,)
        )
        entries = []
        for record, change, at in rows:
            item = _decode_item(record)
            entries.append(HistoryEntry(item.id, item.version, change, from_micros(at), item))
        return entries

    async def restore_history(self, entries: Sequence[HistoryEntry]) -> int:
        return await self._write(self._restore_history, list(entries))

    def _restore_history(self, connection: sqlite3.Connection, entries: list[HistoryEntry]) -> int:
        added = 0
        for entry in entries:
            present = connection.execute(
                "SELECT 1 FROM memory_history WHERE id = ? AND version = ? AND change = ?",
                (entry.id, entry.version, entry.change),
            ).fetchone()
            if present is None:
                _log(connection, [entry])
                added += 1
        return added

    async def append_audit(self, events: Sequence[AuditEvent]) -> None:
        rows = [
            (
                to_micros(e.at),
                e.principal,
                e.node,
                _encode_item.encode(list(e.ids)).decode(),
                e.decision,
                e.detail,
            )
            for e in events
        ]
        await self._write(_append_audit, rows)

    async def audit_log(
        self, *, after: int = 0, limit: int = 100, principal: str | None = None
    ) -> list[AuditEntry]:
        return await self._read(self._audit_log, after, limit, principal)

    def _audit_log(self, after: int, limit: int, principal: str | None) -> list[AuditEntry]:
        sql = (
            "SELECT seq, at, principal, node, ids, decision, detail FROM memory_audit WHERE seq > ?"
        )
        params: list[Any] = [after]
        if principal is not None:
            sql += " AND principal = ?"
            params.append(principal)
        rows = self._connection().execute(sql + " ORDER BY seq LIMIT ?", [*params, limit])
        return [_audit_entry(row) for row in rows]

    async def purge_audit(self, before: datetime, *, dry_run: bool = False) -> int:
        return await self._write(_purge_audit, to_micros(before), dry_run)

    async def record_usage(self, ids: Sequence[str], at: datetime) -> None:
        micros = to_micros(at)
        with self._usage_lock:
            for item_id in ids:
                count, last = self._pending_usage.get(item_id, (0, micros))
                self._pending_usage[item_id] = (count + 1, max(last, micros))
        if self._usage_timer is None and not self._closed:
            loop = asyncio.get_running_loop()
            self._usage_timer = loop.call_later(_USAGE_DELAY, self._apply_usage_soon)

    def _apply_usage_soon(self) -> None:
        self._usage_timer = None
        if self._writer is not None:
            self._writer.submit(self._transaction, _nothing).add_done_callback(_log_failure)

    async def flush(self) -> None:
        if self._usage_timer is not None:
            self._usage_timer.cancel()
            self._usage_timer = None
        if self._writer is not None:
            await asyncio.wrap_future(self._writer.submit(self._transaction, _nothing))


def _nothing(connection: sqlite3.Connection) -> None:
    """A transaction that only applies pending usage counters."""


_encode_item = msgspec.json.Encoder()
_decode_item = msgspec.json.Decoder(MemoryItem).decode


def _log(connection: sqlite3.Connection, entries: list[HistoryEntry]) -> None:
    """Append history entries inside the caller's transaction."""
    if entries:
        connection.executemany(
            "INSERT INTO memory_history (id, version, change, at, record) VALUES (?, ?, ?, ?, ?)",
            [
                (e.id, e.version, e.change, to_micros(e.at), _encode_item.encode(e.record).decode())
                for e in entries
            ],
        )


def _append_audit(connection: sqlite3.Connection, rows: list[tuple[Any, ...]]) -> None:
    connection.executemany(
        "INSERT INTO memory_audit (at, principal, node, ids, decision, detail) "
        "VALUES (?, ?, ?, ?, ?, ?)",
        rows,
    )


def _purge_audit(connection: sqlite3.Connection, before: int, dry_run: bool) -> int:
    if dry_run:
        (count,) = connection.execute(
            "SELECT count(*) FROM memory_audit WHERE at < ?", (before,)
        ).fetchone()
        return int(count)
    return connection.execute("DELETE FROM memory_audit WHERE at < ?", (before,)).rowcount


def _audit_entry(row: Any) -> AuditEntry:
    seq, at, principal, node, ids, decision, detail = row
    return AuditEntry(
        seq, from_micros(at), principal, node, msgspec.json.decode(ids), decision, detail
    )


def _log_failure(future: Future[None]) -> None:
    if not future.cancelled() and future.exception() is not None:
        logger.error("recording memory usage failed", exc_info=future.exception())
