"""``PostgresMemoryStore``: the production backend, on asyncpg (the ``postgres`` extra).

Every node behaves exactly as on SQLite (the same conformance suites run on both):

* **Schema** lives in its own PostgreSQL schema (``ditto`` by default). :meth:`open` applies
  versioned migrations inside one transaction guarded by an advisory lock (``schema``).
* **Writes** of a batch are one transaction (``writes``). Keyed drafts take a
  transaction-scoped advisory lock per ``(namespace, key)`` before they look for the stored
  record: concurrent writers of one key serialise instead of failing on the unique index.
* **Keyword search** is a generated ``tsvector`` column with a GIN index: the exact Okapi BM25
  top-k on the same calibrated scale as SQLite, OR semantics, with statistics the database
  keeps exact in every write (``search_schema``) and MaxScore pruning of the frequent words'
  postings (``search``). Each word becomes a ``tsquery`` through
  ``websearch_to_tsquery``: user text is never SQL and never raw tsquery syntax.
* **Usage** counters are coalesced in memory and applied by one statement for many searches
  (``usage``): one statement per search would make every search a costly write.
* **Failures** of the driver become coded store errors at one boundary (``errors``); messages
  never contain the URL or a password.

The class is assembled from parts, one module each: ``store_base`` (pool, lifecycle,
connections, usage), ``store_reads``, ``store_vectors`` and ``store_logs``; the writes are here.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING

from workers.memory.model.contracts import MemoryDraft, MemoryItem, MemoryPatch, WriteMode
from workers.memory.model.patches import changes_text
from workers.memory.model.planning import WriteGuard, WriteRules
from workers.memory.model.records import now_from
from workers.memory.model.review_plan import ReviewGuard
from workers.memory.model.reviews import ReviewDecision
from workers.memory.ports import (
    AuditLog,
    ChangeFeed,
    HistoryLog,
    KeywordSearch,
    MemoryStore,
    RecordImport,
    UsageTracking,
    VectorStore,
)
from workers.memory.retrieval.vectors import Vectors
from workers.memory.stores.postgres import vectors as pg_vectors
from workers.memory.stores.postgres.pool import PoolRecipe
from workers.memory.stores.postgres.store_logs import PostgresLogs
from workers.memory.stores.postgres.store_reads import PostgresReads
from workers.memory.stores.postgres.store_vectors import PostgresVectors
from workers.memory.stores.postgres.transactions import committing
from workers.memory.stores.postgres.writes import (
    delete_batch,
    restore_batch,
    review_batch,
    update_batch,
    write_batch,
)

if TYPE_CHECKING:
    from workers.memory.stores.postgres.pool import Connection

__all__ = ("PoolRecipe", "PostgresMemoryStore")


class PostgresMemoryStore(
    PostgresReads,
    PostgresVectors,
    PostgresLogs,
    MemoryStore,
    UsageTracking,
    KeywordSearch,
    VectorStore,
    HistoryLog,
    AuditLog,
    RecordImport,
    ChangeFeed,
):
    """Memory records in PostgreSQL.

    Build it with :meth:`from_url` (the store owns and closes its pool), or pass a ready
    ``asyncpg`` pool (the application owns it). Open it (``async with`` or :meth:`open`) to
    apply migrations; operations also open it on first use.

    Args:
        pool: An ``asyncpg.Pool``, or the :class:`PoolRecipe` that ``from_url`` passes.
        schema: The PostgreSQL schema holding the tables (created if missing).
        clock: Source of timestamps (default: system clock, UTC).

    Raises:
        InvalidInputError: ``schema`` is not a plain lower-case identifier.
    """

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
            vectors,
            True,
            lambda connection: write_batch(
                connection, self.schema, self._s, drafts, mode, now, guard, rules
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

    async def review(
        self,
        decisions: Sequence[ReviewDecision],
        reviewer: str | None = None,
        guard: ReviewGuard | None = None,
    ) -> list[MemoryItem]:
        now = now_from(self._clock)
        rejected = [decision.id for decision in decisions if decision.decision == "reject"]
        async with self._connection() as connection, committing(connection):
            reviewed = await review_batch(
                connection, self.schema, self._s, decisions, reviewer, now, guard
            )
            await pg_vectors.forget_vectors(connection, self._s, rejected)
        return reviewed

    async def restore(self, items: Sequence[MemoryItem]) -> int:
        async with self._connection(transaction=True) as connection:
            await restore_batch(connection, self._s, items)
            await pg_vectors.forget_vectors(connection, self._s, [], keep=items)  # re-embed
        return len(items)
