"""Vectors in the PostgreSQL store (without pgvector, which this server lacks): float32 ``bytea``
rows kept in the record's transaction, ranked by the process's cached numpy index.

Every vector change takes the next *generation* from the single ``memory_vector_state`` row,
whose row lock it then holds until commit: writers of vectors commit in generation order, so a
reader that sees generation G in its snapshot sees every change up to G, and a process brings
its index up to date by reading only what is newer than its own generation.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from workers.memory.model.contracts import MemoryFilter, MemoryItem
from workers.memory.model.errors import conflict
from workers.memory.retrieval.embeddings.base import EmbeddingModel, Matrix
from workers.memory.retrieval.vectors import (
    VectorIndex,
    Vectors,
    VectorState,
    check_model,
    from_blobs,
    matching_rows,
    ranked_filtered_async,
    stale_rows,
    stored_rows,
    text_hash,
    vectors_required,
)
from workers.memory.stores.postgres.sql import Params, columns, records, where_clause
from workers.memory.stores.rows import row_to_item

if TYPE_CHECKING:
    from workers.memory.stores.postgres.pool import Connection

__all__ = (
    "begin_reindex",
    "count_missing_vectors",
    "finish_reindex",
    "forget_vectors",
    "missing_vectors",
    "put_vectors",
    "read_state",
    "require_vectors",
    "search_vectors",
    "store_vectors",
)


async def read_state(connection: Connection, s: str) -> tuple[VectorState, int]:
    row = await connection.fetchrow(
        "SELECT model, dimension, target_model, target_dimension, generation "
        f"FROM {s}.memory_vector_state"
    )
    assert row is not None
    active = EmbeddingModel(row[0], row[1]) if row[0] is not None else None
    target = EmbeddingModel(row[2], row[3]) if row[2] is not None else None
    return VectorState(active, target), int(row[4])


async def require_vectors(
    connection: Connection, s: str, vectors: Vectors | None, *, needed: bool
) -> None:
    """See ``sqlite_vectors.require_vectors``."""
    state, _ = await read_state(connection, s)
    if vectors is not None:
        check_model(vectors.model, state, writing=True)
    elif needed and state.active is not None:
        raise vectors_required(state)


async def _next_generation(connection: Connection, s: str) -> int:
    return int(
        await connection.fetchval(
            f"UPDATE {s}.memory_vector_state SET generation = generation + 1 RETURNING generation"
        )
    )


async def store_vectors(
    connection: Connection,
    s: str,
    vectors: Vectors,
    items: Sequence[MemoryItem],
    *,
    skip_changed: bool = False,
) -> int:
    """See ``sqlite_vectors.store_vectors``."""
    rows = matching_rows(items, vectors.hashes, skip=skip_changed)
    if not rows:
        return 0
    model = vectors.model
    generation = await _next_generation(connection, s)  # locks the state row until commit
    await connection.execute(
        f"UPDATE {s}.memory_vector_state SET model = $1, dimension = $2 WHERE model IS NULL",
        model.model_id,
        model.dimension,
    )
    await connection.executemany(
        f"INSERT INTO {s}.memory_vectors (id, model, dimension, vector, text_hash, gen) "
        "VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (id, model, dimension) DO UPDATE SET "
        "vector = excluded.vector, text_hash = excluded.text_hash, gen = excluded.gen",
        stored_rows(vectors, items, rows, generation),
    )
    # Another model's vector of a text that just changed is stale: drop it (see SQLite's).
    await connection.executemany(
        f"DELETE FROM {s}.memory_vectors WHERE id = $1 AND (model != $2 OR dimension != $3) "
        "AND text_hash != $4",
        stale_rows(vectors, items, rows),
    )
    return len(rows)


async def forget_vectors(
    connection: Connection, s: str, ids: Sequence[str], keep: Sequence[MemoryItem] = ()
) -> None:
    """See ``sqlite_vectors.forget_vectors``."""
    gone = list(ids)
    if keep:
        held = await connection.fetch(
            f"SELECT id, text_hash FROM {s}.memory_vectors WHERE id = ANY($1::text[])",
            [item.id for item in keep],
        )
        hashes = {item.id: text_hash(item) for item in keep}
        gone += sorted({row["id"] for row in held if row["text_hash"] != hashes[row["id"]]})
    if not gone:
        return
    # The generation lock first, as every vector writer takes it: vector rows are only ever
    # locked after it, so a delete and a reindex cannot deadlock.
    generation = await _next_generation(connection, s)
    removed = await connection.fetch(
        f"DELETE FROM {s}.memory_vectors WHERE id = ANY($1::text[]) RETURNING id", gone
    )
    if removed:
        await connection.executemany(
            f"INSERT INTO {s}.memory_vector_tombstones (gen, id) VALUES ($1, $2)",
            [(generation, item_id) for item_id in sorted({row["id"] for row in removed})],
        )


async def begin_reindex(connection: Connection, s: str, model: EmbeddingModel) -> None:
    await connection.execute(
        f"UPDATE {s}.memory_vector_state SET target_model = $1, target_dimension = $2 "
        "WHERE model IS NOT NULL AND (model != $1 OR dimension != $2)",
        model.model_id,
        model.dimension,
    )


async def missing_vectors(
    connection: Connection, s: str, model: EmbeddingModel, after: str | None, limit: int
) -> list[MemoryItem]:
    rows = await connection.fetch(
        f"SELECT {columns()} FROM {records(s)} LEFT JOIN {s}.memory_vectors v ON v.id = m.id "
        "AND v.model = $1 AND v.dimension = $2 WHERE v.id IS NULL AND m.id > $3 "
        "ORDER BY m.id LIMIT $4",
        model.model_id,
        model.dimension,
        after or "",
        limit,
    )
    return [row_to_item(row) for row in rows]


async def count_missing_vectors(connection: Connection, s: str, model: EmbeddingModel) -> int:
    count = await connection.fetchval(
        f"SELECT count(*) FROM {s}.memories m LEFT JOIN {s}.memory_vectors v ON v.id = m.id "
        "AND v.model = $1 AND v.dimension = $2 WHERE v.id IS NULL",
        model.model_id,
        model.dimension,
    )
    return int(count)


async def put_vectors(connection: Connection, s: str, ids: Sequence[str], vectors: Vectors) -> int:
    state, _ = await read_state(connection, s)
    check_model(vectors.model, state, writing=True)
    await _next_generation(connection, s)  # the lock order of every vector writer
    rows = await connection.fetch(
        f"SELECT {columns()} FROM {records(s)} WHERE m.id = ANY($1::text[])", list(ids)
    )
    items = {row["id"]: row_to_item(row) for row in rows}
    present = [index for index, item_id in enumerate(ids) if item_id in items]
    kept = vectors.select(present)
    items_kept = [items[ids[i]] for i in present]
    return await store_vectors(connection, s, kept, items_kept, skip_changed=True)


async def finish_reindex(connection: Connection, s: str, model: EmbeddingModel) -> None:
    if await missing_vectors(connection, s, model, None, 1):
        raise conflict("some records still lack a vector of the new model; run reindex again")
    await _next_generation(connection, s)
    await connection.execute(
        f"DELETE FROM {s}.memory_vectors WHERE model != $1 OR dimension != $2",
        model.model_id,
        model.dimension,
    )
    await connection.execute(
        f"UPDATE {s}.memory_vector_state SET model = $1, dimension = $2, target_model = NULL, "
        "target_dimension = NULL",
        model.model_id,
        model.dimension,
    )


async def search_vectors(
    pool: Any,
    s: str,
    index: VectorIndex,
    refreshing: asyncio.Lock,
    model: EmbeddingModel,
    query: Matrix,
    filter: MemoryFilter,
    limit: int,
    now: datetime,
) -> list[tuple[MemoryItem, float]]:
    async with pool.acquire() as connection:
        async with connection.transaction(isolation="repeatable_read", readonly=True):
            state, generation = await read_state(connection, s)
            check_model(model, state, writing=False)
            if state.active is None:
                return []
            if index.model != state.active or generation > index.generation:
                async with refreshing:  # one refresh at a time, never back to an older snapshot
                    await _refresh(connection, s, index, state.active, generation)
        params = Params()
        where = where_clause(filter, params, s, now)
        mark = params.add(None)  # the candidate ids, filled per round

        async def matching(ids: list[str]) -> list[MemoryItem]:
            values = list(params.values)
            values[int(mark[1:]) - 1] = ids
            rows = await connection.fetch(
                f"SELECT {columns()} FROM {records(s)} WHERE m.id = ANY({mark}::text[]) "
                f"AND {where}",
                *values,
            )
            return [row_to_item(row) for row in rows]

        return await ranked_filtered_async(index, query, limit, matching, lambda item: item.id)


async def _refresh(
    connection: Connection, s: str, index: VectorIndex, active: EmbeddingModel, generation: int
) -> None:
    if index.model != active:
        index.reset(active)
    since = index.generation
    if generation <= since:
        return
    removed = await connection.fetch(
        f"SELECT id FROM {s}.memory_vector_tombstones WHERE gen > $1", since
    )
    rows = await connection.fetch(
        f"SELECT id, vector FROM {s}.memory_vectors WHERE gen > $1 AND model = $2 "
        "AND dimension = $3",
        since,
        active.model_id,
        active.dimension,
    )
    index.remove([row["id"] for row in removed])
    if rows:
        matrix, counts = from_blobs([bytes(row["vector"]) for row in rows], active.dimension)
        index.upsert([row["id"] for row in rows], matrix, counts)
    index.generation = generation
