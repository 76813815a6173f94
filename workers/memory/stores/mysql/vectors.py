"""Vectors in the MySQL store: float32 ``LONGBLOB`` rows kept in the record's transaction,
ranked by the process's cached numpy index (as on PostgreSQL without pgvector).

Every vector change takes the next *generation* from the single ``memory_vector_state`` row,
whose row lock it then holds until commit: writers of vectors commit in generation order, so
once generation G is committed every change up to G is, and a process brings its index up to
date by reading only the changes in ``(its generation, G]``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from datetime import datetime

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
from workers.memory.stores.mysql.sql import Params, columns, marks, records, where_clause
from workers.memory.stores.rows import row_to_item
from workers.memory.stores.sql_driver import SqlDriver, fetch, run

__all__ = (
    "VECTOR_STEPS",
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


def VECTOR_STEPS(table: str) -> tuple[str, ...]:
    """Schema step 2: the vector tables (``table``: the options every table gets)."""
    return (
        f"""
        CREATE TABLE memory_vectors (
            `id` VARCHAR(255) NOT NULL,
            `model` VARCHAR(255) NOT NULL,
            `dimension` INT NOT NULL,
            `vector` LONGBLOB NOT NULL,
            `text_hash` VARCHAR(128) NOT NULL,
            `gen` BIGINT NOT NULL,
            PRIMARY KEY (`id`, `model`, `dimension`),
            KEY memory_vectors_gen (`gen`)
        ) {table}
        """,
        f"""
        CREATE TABLE memory_vector_tombstones (
            `gen` BIGINT NOT NULL,
            `id` VARCHAR(255) NOT NULL,
            KEY memory_vector_tombstones_gen (`gen`)
        ) {table}
        """,
        f"""
        CREATE TABLE memory_vector_state (
            `singleton` INT NOT NULL PRIMARY KEY,
            `model` VARCHAR(255) NULL,
            `dimension` INT NULL,
            `target_model` VARCHAR(255) NULL,
            `target_dimension` INT NULL,
            `generation` BIGINT NOT NULL
        ) {table}
        """,
        "INSERT INTO memory_vector_state (`singleton`, `generation`) VALUES (1, 0)",
    )


async def read_state(db: SqlDriver) -> tuple[VectorState, int]:
    ((model, dimension, target, target_dimension, generation),) = await fetch(
        db,
        "SELECT `model`, `dimension`, `target_model`, `target_dimension`, `generation` "
        "FROM memory_vector_state",
    )
    active = EmbeddingModel(model, dimension) if model is not None else None
    goal = EmbeddingModel(target, target_dimension) if target is not None else None
    return VectorState(active, goal), int(generation)


async def require_vectors(db: SqlDriver, vectors: Vectors | None, *, needed: bool) -> None:
    """See ``sqlite_vectors.require_vectors``."""
    state, _ = await read_state(db)
    if vectors is not None:
        check_model(vectors.model, state, writing=True)
    elif needed and state.active is not None:
        raise vectors_required(state)


async def _next_generation(db: SqlDriver) -> int:
    """The next generation; the state row stays locked until commit (the lock order of every
    vector writer: this row first)."""
    # LAST_INSERT_ID(expr) hands the new value back on this connection without a re-read.
    await run(db, "UPDATE memory_vector_state SET `generation` = LAST_INSERT_ID(`generation` + 1)")
    ((generation,),) = await fetch(db, "SELECT LAST_INSERT_ID()")
    return int(generation)


async def store_vectors(
    db: SqlDriver,
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
    generation = await _next_generation(db)
    await run(
        db,
        "UPDATE memory_vector_state SET `model` = ?, `dimension` = ? WHERE `model` IS NULL",
        (model.model_id, model.dimension),
    )
    stored = stored_rows(vectors, items, rows, generation)
    await run(
        db,
        "INSERT INTO memory_vectors (`id`, `model`, `dimension`, `vector`, `text_hash`, `gen`) "
        "VALUES "
        + ", ".join("(?, ?, ?, ?, ?, ?)" for _ in stored)
        + " ON DUPLICATE KEY UPDATE `vector` = VALUES(`vector`), "
        "`text_hash` = VALUES(`text_hash`), `gen` = VALUES(`gen`)",
        [value for row in stored for value in row],
    )
    # Another model's vector of a text that just changed is stale: drop it (see SQLite's).
    for item_id, model_id, dimension, digest in stale_rows(vectors, items, rows):
        await run(
            db,
            "DELETE FROM memory_vectors WHERE `id` = ? AND (`model` != ? OR `dimension` != ?) "
            "AND `text_hash` != ?",
            (item_id, model_id, dimension, digest),
        )
    return len(rows)


async def forget_vectors(
    db: SqlDriver, ids: Sequence[str], keep: Sequence[MemoryItem] = ()
) -> None:
    """See ``sqlite_vectors.forget_vectors``."""
    gone = list(ids)
    if keep:
        wanted = [item.id for item in keep]
        held = await fetch(
            db,
            f"SELECT `id`, `text_hash` FROM memory_vectors WHERE `id` IN ({marks(len(wanted))})",
            wanted,
        )
        hashes = {item.id: text_hash(item) for item in keep}
        gone += sorted({row[0] for row in held if row[1] != hashes[row[0]]})
    if not gone:
        return
    present = await fetch(
        db, f"SELECT DISTINCT `id` FROM memory_vectors WHERE `id` IN ({marks(len(gone))})", gone
    )
    if not present:
        return
    removed = sorted(row[0] for row in present)
    generation = await _next_generation(db)
    await run(db, f"DELETE FROM memory_vectors WHERE `id` IN ({marks(len(removed))})", removed)
    await run(
        db,
        "INSERT INTO memory_vector_tombstones (`gen`, `id`) VALUES "
        + ", ".join("(?, ?)" for _ in removed),
        [value for item_id in removed for value in (generation, item_id)],
    )


async def begin_reindex(db: SqlDriver, model: EmbeddingModel) -> None:
    await run(
        db,
        "UPDATE memory_vector_state SET `target_model` = ?, `target_dimension` = ? "
        "WHERE `model` IS NOT NULL AND (`model` != ? OR `dimension` != ?)",
        (model.model_id, model.dimension, model.model_id, model.dimension),
    )


_MISSING = (
    "LEFT JOIN memory_vectors v ON v.`id` = m.`id` AND v.`model` = ? AND v.`dimension` = ? "
    "WHERE v.`id` IS NULL"
)


async def missing_vectors(
    db: SqlDriver, model: EmbeddingModel, after: str | None, limit: int
) -> list[MemoryItem]:
    rows = await fetch(
        db,
        f"SELECT {columns()} FROM {records()} {_MISSING} AND m.`id` > ? ORDER BY m.`id` LIMIT ?",
        (model.model_id, model.dimension, after or "", limit),
    )
    return [row_to_item(row) for row in rows]


async def count_missing_vectors(db: SqlDriver, model: EmbeddingModel) -> int:
    ((count,),) = await fetch(
        db, f"SELECT COUNT(*) FROM memories m {_MISSING}", (model.model_id, model.dimension)
    )
    return int(count)


async def put_vectors(db: SqlDriver, ids: Sequence[str], vectors: Vectors) -> int:
    state, _ = await read_state(db)
    check_model(vectors.model, state, writing=True)
    await _next_generation(db)  # the lock order of every vector writer
    wanted = list(dict.fromkeys(ids))
    rows = await fetch(
        db,
        f"SELECT {columns()} FROM {records()} WHERE m.`id` IN ({marks(len(wanted))})",
        wanted,
    )
    items = {item.id: item for item in map(row_to_item, rows)}
    present = [index for index, item_id in enumerate(ids) if item_id in items]
    kept = vectors.select(present)
    return await store_vectors(db, kept, [items[ids[i]] for i in present], skip_changed=True)


async def finish_reindex(db: SqlDriver, model: EmbeddingModel) -> None:
    if await missing_vectors(db, model, None, 1):
        raise conflict("some records still lack a vector of the new model; run reindex again")
    await _next_generation(db)
    await run(
        db,
        "DELETE FROM memory_vectors WHERE `model` != ? OR `dimension` != ?",
        (model.model_id, model.dimension),
    )
    await run(
        db,
        "UPDATE memory_vector_state SET `model` = ?, `dimension` = ?, `target_model` = NULL, "
        "`target_dimension` = NULL",
        (model.model_id, model.dimension),
    )


async def search_vectors(
    db: SqlDriver,
    index: VectorIndex,
    refreshing: asyncio.Lock,
    model: EmbeddingModel,
    query: Matrix,
    filter: MemoryFilter,
    limit: int,
    now: datetime,
) -> list[tuple[MemoryItem, float]]:
    state, generation = await read_state(db)
    check_model(model, state, writing=False)
    if state.active is None:
        return []
    if index.model != state.active or generation > index.generation:
        async with refreshing:  # one refresh at a time, never back to an older generation
            await _refresh(db, index, state.active, generation)
    params = Params()
    where = where_clause(filter, params, now)

    async def matching(ids: list[str]) -> list[MemoryItem]:
        rows = await fetch(
            db,
            f"SELECT {columns()} FROM {records()} WHERE m.`id` IN ({marks(len(ids))}) AND {where}",
            [*ids, *params.values],
        )
        return [row_to_item(row) for row in rows]

    return await ranked_filtered_async(index, query, limit, matching, lambda item: item.id)


async def _refresh(
    db: SqlDriver, index: VectorIndex, active: EmbeddingModel, generation: int
) -> None:
    if index.model != active:
        index.reset(active)
    since = index.generation
    if generation <= since:
        return
    # Bounded by `generation`: everything up to it is committed (writers commit in order);
    # a later change is read by the next refresh.
    removed = await fetch(
        db,
        "SELECT `id` FROM memory_vector_tombstones WHERE `gen` > ? AND `gen` <= ?",
        (since, generation),
    )
    rows = await fetch(
        db,
        "SELECT `id`, `vector` FROM memory_vectors WHERE `gen` > ? AND `gen` <= ? "
        "AND `model` = ? AND `dimension` = ?",
        (since, generation, active.model_id, active.dimension),
    )
    index.remove([row[0] for row in removed])
    if rows:
        matrix, counts = from_blobs([bytes(row[1]) for row in rows], active.dimension)
        index.upsert([row[0] for row in rows], matrix, counts)
    index.generation = generation
