"""``SqliteMemoryStore``: the embedded default — one SQLite file, no server.

* **Threads** (``threads``): one writer thread runs every transaction in order, a few reader
  threads read, each with its own connection; one hop per operation. Usage counters are
  coalesced and applied by the writer.
* **Transactions.** Every write is ``BEGIN IMMEDIATE`` ... ``COMMIT`` with the FTS index,
  history and vectors kept in sync in the same transaction, so a failure or a crash mid-batch
  leaves no partial batch.
* **Schema** is versioned with ``PRAGMA user_version`` (``schema``); SQL is parameterised
  (``sql``); keyword search is the exact FTS5 BM25 top-k (``search``, ``topk``); vectors are
  float32 blobs ranked by the shared exact index (``vectors``).
* **Failures** of the driver become coded store errors at one boundary (``errors``): a locked
  database is a retryable ``STORE_TIMEOUT``; a file that is not a database, damaged, read-only
  or a folder is ``STORE_CORRUPT``, ``STORE_READ_ONLY`` or ``STORE_UNAVAILABLE``.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from ditto.errors import InvalidInputError
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
from workers.memory.model.planning import WriteGuard, WriteRules
from workers.memory.model.records import Clock, now_from, to_micros, utc_now
from workers.memory.model.review_plan import ReviewGuard
from workers.memory.model.reviews import ReviewDecision
from workers.memory.ports import (
    AuditEvent,
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
from workers.memory.retrieval.ann_index import AnnSettings
from workers.memory.retrieval.embeddings.base import EmbeddingModel, Matrix
from workers.memory.retrieval.keyword import explained, keyword_request
from workers.memory.retrieval.vectors import VECTOR_THREAD, VectorIndex, Vectors, VectorState
from workers.memory.stores.rows import row_to_item
from workers.memory.stores.sqlite import logs
from workers.memory.stores.sqlite import vectors as sqlite_vectors
from workers.memory.stores.sqlite.search import keyword_search
from workers.memory.stores.sqlite.sql import COLUMNS, order_clause, rows_for_ids, where_clause
from workers.memory.stores.sqlite.threads import SqliteThreads
from workers.memory.stores.sqlite.writes import (
    BY_ID,
    BY_KEY,
    delete_batch,
    restore_batch,
    review_batch,
    update_batch,
    write_batch,
)

if TYPE_CHECKING:
    from ditto.runtime.context import NodeContext

__all__ = ("SqliteMemoryStore",)

_QUICK_VECTOR_FLOATS = 1 << 22
"""An up-to-date vector index of at most this many floats (10,000 x 384 fits) is searched on
the calling thread: one matrix-vector product of ~0.3 ms, less than two thread switches cost."""

_POINT_READ = 32
"""A GET of at most this many ids and keys reads on the calling thread (``read_here``)."""
_FEED_HERE = 256
"""A page of the change feed of at most this many records reads on the calling thread: one
range of the ``updated_at`` index, four narrow columns a record."""
_CHANGES = (
    "SELECT id, namespace, version, updated_at FROM memories "
    "WHERE (updated_at, id) > (?, ?) ORDER BY updated_at, id LIMIT ?"
)


class SqliteMemoryStore(
    MemoryStore,
    UsageTracking,
    KeywordSearch,
    VectorStore,
    HistoryLog,
    AuditLog,
    RecordImport,
    ChangeFeed,
):
    """Memory records in one SQLite file.

    Example::

        async with SqliteMemoryStore("memory.sqlite") as store:
            runtime = create_ditto(workers=[create_memory_worker(store)])

    Args:
        path: The database file (created if missing). ``:memory:`` is refused: memory must
            survive the process.
        readers: Reader threads (and connections).
        clock: Source of timestamps (default: system clock, UTC).
        busy_timeout_ms: How long a call waits for another process's write lock before it
            fails with a retryable ``STORE_TIMEOUT``.
        read_only: Open an existing store for reading only: nothing is created or migrated,
            and every change is ``STORE_READ_ONLY``.
        create_folder: Create the file's folder if it is missing; ``False``: a missing folder
            is ``STORE_UNAVAILABLE`` when the store opens.

    The path must go on naming the file the store opened: once the file is deleted, moved or
    replaced, every read and write fails ``STORE_UNAVAILABLE`` (nothing is acknowledged that
    went to an unlinked file).

    Raises:
        InvalidInputError: ``path`` is ``:memory:`` or empty, or a count is below 1.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        readers: int = 4,
        clock: Clock = utc_now,
        busy_timeout_ms: int = 5000,
        read_only: bool = False,
        create_folder: bool = True,
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
        if isinstance(busy_timeout_ms, bool) or not isinstance(busy_timeout_ms, int):
            raise InvalidInputError("busy_timeout_ms must be an integer")
        if busy_timeout_ms < 0:
            raise InvalidInputError("busy_timeout_ms must not be negative")
        self.path = Path(text)
        self._clock = clock
        self._threads = SqliteThreads(self.path, readers, busy_timeout_ms, read_only, create_folder)
        self._index = VectorIndex()
        if not read_only:  # the approximate graph is saved beside the file
            self._index.ann_file = self.path.with_name(self.path.name + ".ann")

    # ----------------------------------------------------------------- lifecycle

    async def open(self) -> None:
        """Create the file (and its folder, see ``create_folder``) if needed, migrate the schema
        and start the threads. Idempotent."""
        self.cursor_secret = await self._threads.open()

    async def aclose(self) -> None:
        """Apply pending usage counters, stop the threads and close every connection; save
        the approximate vector graph, if one is in use, beside the file (``<file>.ann``)."""
        await asyncio.wrap_future(VECTOR_THREAD.submit(self._index.save_ann))
        await self._threads.close()

    async def flush(self) -> None:
        await self._threads.flush()

    # ----------------------------------------------------------------- reads

    async def get(
        self, ids: Sequence[str], keys: Sequence[str], namespace: str
    ) -> list[MemoryItem]:
        if len(ids) + len(keys) <= _POINT_READ:
            return await self._threads.read_here(self._get, list(ids), list(keys), namespace)
        return await self._threads.read(self._get, list(ids), list(keys), namespace)

    def _get(self, ids: list[str], keys: list[str], namespace: str) -> list[MemoryItem]:
        connection = self._threads.connection()
        rows = rows_for_ids(connection, BY_ID, ids) if ids else []
        if keys:
            rows += rows_for_ids(connection, BY_KEY, keys, [namespace])
        return [row_to_item(row) for row in rows]

    async def query(
        self, filter: MemoryFilter, order: OrderBy, limit: int, after: QueryPosition | None
    ) -> list[MemoryItem]:
        now = now_from(self._clock)
        return await self._threads.read(self._query, filter, order, limit, after, now)

    def _query(
        self,
        filter: MemoryFilter,
        order: OrderBy,
        limit: int,
        after: QueryPosition | None,
        now: datetime,
    ) -> list[MemoryItem]:
        where, params = where_clause(filter, now)
        expression, direction, comparison = order_clause(order)
        if after is not None:
            where += f" AND ({expression}, m.id) {comparison} (?, ?)"
            params += [after[0], after[1]]
        rows = self._threads.connection().execute(
            f"SELECT {COLUMNS} FROM memories m WHERE {where} "
            f"ORDER BY {expression} {direction}, m.id {direction} LIMIT ?",
            [*params, limit],
        )
        return [row_to_item(row) for row in rows]

    async def changes_after(self, after: QueryPosition, limit: int) -> list[ChangedRecord]:
        read = self._threads.read_here if limit <= _FEED_HERE else self._threads.read
        return await read(self._changes_after, after, limit)

    def _changes_after(self, after: QueryPosition, limit: int) -> list[ChangedRecord]:
        rows = self._threads.connection().execute(_CHANGES, (*after, limit))
        return list(map(ChangedRecord._make, rows))

    async def count(self, filter: MemoryFilter) -> int:
        return await self._threads.read(self._count, filter, now_from(self._clock))

    def _count(self, filter: MemoryFilter, now: datetime) -> int:
        where, params = where_clause(filter, now)
        sql = f"SELECT count(*) FROM memories m WHERE {where}"
        return int(self._threads.connection().execute(sql, params).fetchone()[0])

    async def health(self) -> dict[str, object]:
        return await self._threads.read(self._health)

    def _health(self) -> dict[str, object]:
        connection = self._threads.connection()
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
        """Keyword search (strategy ``None`` or ``"keyword"``): the exact BM25 top-k, OR semantics,
        filters before the limit, any text safe. Scores are BM25 on the calibrated scale
        (``search.keyword.calibrated``): in [0, 1], higher is better."""
        words, explain = keyword_request(input, "the SQLite store", native=True)
        if not words:
            return []
        now = now_from(self._clock)
        hits = await self._threads.read(self._search, words, input.filter, input.limit or 10, now)
        return explained(hits, explain)

    def _search(
        self, words: list[str], filter: MemoryFilter, limit: int, now: datetime
    ) -> list[SearchHit]:
        hits = keyword_search(self._threads.planner(), words, filter, limit, now)
        return [SearchHit(row_to_item(row), score) for row, score in hits]

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
        return await self._threads.write(
            write_batch, list(drafts), mode, now, vectors, guard, rules
        )

    async def update(
        self,
        patches: Sequence[MemoryPatch],
        vectors: Vectors | None = None,
        guard: WriteGuard | None = None,
    ) -> list[MemoryItem]:
        now = now_from(self._clock)
        return await self._threads.write(update_batch, list(patches), now, vectors, guard)

    async def delete(self, ids: Sequence[str], guard: WriteGuard | None = None) -> list[str]:
        return await self._threads.write(delete_batch, list(ids), now_from(self._clock), guard)

    async def review(
        self,
        decisions: Sequence[ReviewDecision],
        reviewer: str | None = None,
        guard: ReviewGuard | None = None,
    ) -> list[MemoryItem]:
        now = now_from(self._clock)
        return await self._threads.write(review_batch, list(decisions), reviewer, now, guard)

    async def restore(self, items: Sequence[MemoryItem]) -> int:
        return await self._threads.write(restore_batch, list(items))

    async def record_usage(self, ids: Sequence[str], at: datetime) -> None:
        self._threads.record_usage(list(ids), at)

    # ----------------------------------------------------------------- vectors

    def configure_ann(self, settings: AnnSettings) -> None:
        self._index.configure_ann(settings)

    async def vector_state(self) -> VectorState:
        return await self._threads.read(
            lambda: sqlite_vectors.read_state(self._threads.connection())[0]
        )

    async def vector_search(
        self, model: EmbeddingModel, query: Matrix, filter: MemoryFilter, limit: int
    ) -> list[tuple[MemoryItem, float]]:
        index = self._index
        now = now_from(self._clock)
        if index.model == model and index.rows * model.dimension <= _QUICK_VECTOR_FLOATS:
            # A small index that is up to date answers in a fraction of a millisecond: here,
            # without the hop (which would cost half as much again), unless it needs more.
            quick = await self._threads.read_here(
                lambda: sqlite_vectors.search_vectors(
                    self._threads.connection(),
                    index,
                    model,
                    query,
                    filter,
                    limit,
                    now,
                    quick_only=True,
                )
            )
            if quick is not None:
                return quick
        # On the vector thread (see VECTOR_THREAD), with that thread's own connection.
        found = await self._threads.on(
            VECTOR_THREAD,
            lambda: sqlite_vectors.search_vectors(
                self._threads.connection(), index, model, query, filter, limit, now
            ),
        )
        assert found is not None  # only a quick search gives up
        return found

    async def begin_reindex(self, model: EmbeddingModel) -> None:
        await self._threads.write(sqlite_vectors.begin_reindex, model)

    async def missing_vectors(
        self, model: EmbeddingModel, after: str | None, limit: int
    ) -> list[MemoryItem]:
        return await self._threads.read(
            lambda: sqlite_vectors.missing_vectors(self._threads.connection(), model, after, limit)
        )

    async def count_missing_vectors(self, model: EmbeddingModel) -> int:
        return await self._threads.read(
            lambda: sqlite_vectors.count_missing_vectors(self._threads.connection(), model)
        )

    async def put_vectors(self, ids: Sequence[str], vectors: Vectors) -> int:
        return await self._threads.write(sqlite_vectors.put_vectors, list(ids), vectors)

    async def finish_reindex(self, model: EmbeddingModel) -> None:
        await self._threads.write(sqlite_vectors.finish_reindex, model)

    # ----------------------------------------------------------------- history and audit

    async def history(self, id: str) -> list[HistoryEntry]:
        return await self._threads.read(lambda: logs.history_of(self._threads.connection(), id))

    async def history_page(
        self, after: int, limit: int, *, namespace: str | None = None, key: str | None = None
    ) -> tuple[list[HistoryEntry], int]:
        return await self._threads.read(
            lambda: logs.history_page(self._threads.connection(), after, limit, namespace, key)
        )

    async def restore_history(self, entries: Sequence[HistoryEntry]) -> int:
        return await self._threads.write(logs.restore_history, list(entries))

    async def append_audit(self, events: Sequence[AuditEvent]) -> None:
        await self._threads.write(logs.append_audit, logs.audit_rows(events))

    async def audit_log(
        self, *, after: int = 0, limit: int = 100, principal: str | None = None
    ) -> list[AuditEntry]:
        return await self._threads.read(
            lambda: logs.read_audit(self._threads.connection(), after, limit, principal)
        )

    async def purge_audit(self, before: datetime, *, dry_run: bool = False) -> int:
        return await self._threads.write(logs.purge_audit, to_micros(before), dry_run)
