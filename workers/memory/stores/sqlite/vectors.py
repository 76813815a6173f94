"""Vectors in the SQLite store: the SQL that keeps them with their records, and the search over
the cached index. Functions taking a connection run inside the writer's transaction or in a
reader thread (the store decides which)."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from datetime import datetime
from typing import Any

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
    ranked_filtered,
    stale_rows,
    stored_rows,
    text_hash,
    vectors_required,
)
from workers.memory.stores.rows import row_to_item
from workers.memory.stores.sqlite.sql import COLUMNS, rows_for_ids, where_clause

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


def read_state(connection: sqlite3.Connection) -> tuple[VectorState, int]:
    """The store's vector models and its generation."""
    model, dimension, target, target_dimension, generation = connection.execute(
        "SELECT model, dimension, target_model, target_dimension, generation "
        "FROM memory_vector_state"
    ).fetchone()
    active = EmbeddingModel(model, dimension) if model is not None else None
    goal = EmbeddingModel(target, target_dimension) if target is not None else None
    return VectorState(active, goal), int(generation)


def require_vectors(
    connection: sqlite3.Connection, vectors: Vectors | None, *, needed: bool
) -> None:
    """Refuse a write whose vectors do not fit the store, before anything is written: vectors
    of another model, or none (``needed``: the write changes embedded text) once the store
    holds vectors."""
    state, _ = read_state(connection)
    if vectors is not None:
        check_model(vectors.model, state, writing=True)
    elif needed and state.active is not None:
        raise vectors_required(state)


def _next_generation(connection: sqlite3.Connection) -> int:
    (generation,) = connection.execute(
        "UPDATE memory_vector_state SET generation = generation + 1 RETURNING generation"
    ).fetchone()
    return int(generation)


def store_vectors(
    connection: sqlite3.Connection,
    vectors: Vectors,
    items: Sequence[MemoryItem],
    *,
    skip_changed: bool = False,
) -> int:
    """Keep each record's vector of ``vectors.model`` (in the caller's transaction); the first
    model becomes the store's. A record whose text no longer matches its row's hash is a
    ``CONFLICT`` (or, with ``skip_changed``, left without). Returns how many were stored."""
    rows = matching_rows(items, vectors.hashes, skip=skip_changed)
    if not rows:
        return 0
    model = vectors.model
    state, _ = read_state(connection)
    if state.active is None:
        connection.execute(
            "UPDATE memory_vector_state SET model = ?, dimension = ?",
            (model.model_id, model.dimension),
        )
    generation = _next_generation(connection)
    connection.executemany(
        "INSERT OR REPLACE INTO memory_vectors (id, model, dimension, vector, text_hash, gen) "
        "VALUES (?, ?, ?, ?, ?, ?)",
        stored_rows(vectors, items, rows, generation),
    )
    # Another model's vector of a text that just changed is stale (a reindex in progress must
    # embed the record again): drop it.
    connection.executemany(
        "DELETE FROM memory_vectors WHERE id = ? AND (model != ? OR dimension != ?) "
        "AND text_hash != ?",
        stale_rows(vectors, items, rows),
    )
    return len(rows)


def forget_vectors(
    connection: sqlite3.Connection, ids: Sequence[str], keep: Sequence[MemoryItem] = ()
) -> None:
    """Drop the vectors of ``ids`` (deleted records), or of ``keep`` records whose text no longer
    matches their vector (imported ones), leaving a tombstone for other processes' indexes."""
    gone: list[str] = list(ids)
    for item in keep:
        held = connection.execute(
            "SELECT text_hash FROM memory_vectors WHERE id = ?", (item.id,)
        ).fetchall()
        if any(row[0] != text_hash(item) for row in held):
            gone.append(item.id)
    sql = "DELETE FROM memory_vectors WHERE id IN ({marks}) RETURNING id"
    removed = [row[0] for row in rows_for_ids(connection, sql, gone)]
    if removed:
        generation = _next_generation(connection)
        connection.executemany(
            "INSERT INTO memory_vector_tombstones (gen, id) VALUES (?, ?)",
            [(generation, item_id) for item_id in removed],
        )


def begin_reindex(connection: sqlite3.Connection, model: EmbeddingModel) -> None:
    state, _ = read_state(connection)
    if state.active is not None and state.active != model:
        connection.execute(
            "UPDATE memory_vector_state SET target_model = ?, target_dimension = ?",
            (model.model_id, model.dimension),
        )


def missing_vectors(
    connection: sqlite3.Connection, model: EmbeddingModel, after: str | None, limit: int
) -> list[MemoryItem]:
    rows = connection.execute(
        f"SELECT {COLUMNS} FROM memories m LEFT JOIN memory_vectors v ON v.id = m.id "
        "AND v.model = ? AND v.dimension = ? WHERE v.id IS NULL AND m.id > ? "
        "ORDER BY m.id LIMIT ?",
        (model.model_id, model.dimension, after or "", limit),
    )
    return [row_to_item(row) for row in rows]


def count_missing_vectors(connection: sqlite3.Connection, model: EmbeddingModel) -> int:
    (count,) = connection.execute(
        "SELECT count(*) FROM memories m LEFT JOIN memory_vectors v ON v.id = m.id "
        "AND v.model = ? AND v.dimension = ? WHERE v.id IS NULL",
        (model.model_id, model.dimension),
    ).fetchone()
    return int(count)


def put_vectors(connection: sqlite3.Connection, ids: Sequence[str], vectors: Vectors) -> int:
    state, _ = read_state(connection)
    check_model(vectors.model, state, writing=True)
    sql = f"SELECT {COLUMNS} FROM memories m WHERE m.id IN ({{marks}})"
    items = {row[0]: row_to_item(row) for row in rows_for_ids(connection, sql, ids)}
    present = [index for index, item_id in enumerate(ids) if item_id in items]
    kept = vectors.select(present)
    return store_vectors(connection, kept, [items[ids[i]] for i in present], skip_changed=True)


def finish_reindex(connection: sqlite3.Connection, model: EmbeddingModel) -> None:
    if missing_vectors(connection, model, None, 1):
        raise conflict("some records still lack a vector of the new model; run reindex again")
    connection.execute(
        "DELETE FROM memory_vectors WHERE model != ? OR dimension != ?",
        (model.model_id, model.dimension),
    )
    connection.execute(
        "UPDATE memory_vector_state SET model = ?, dimension = ?, target_model = NULL, "
        "target_dimension = NULL",
        (model.model_id, model.dimension),
    )
    _next_generation(connection)


def search_vectors(
    connection: sqlite3.Connection,
    index: VectorIndex,
    model: EmbeddingModel,
    query: Matrix,
    filter: MemoryFilter,
    limit: int,
    now: datetime,
    *,
    quick_only: bool = False,
) -> list[tuple[MemoryItem, float]] | None:
    """Bring ``index`` up to date with the file, then rank within it: candidate ids are
    filtered in SQL (ids only), and only the ``limit`` best are read as records.

    ``quick_only``: do only the quick case — the index is up to date and the ``limit`` best
    pass the filter — and return ``None`` for anything more (a refresh, a wider search)."""
    state, generation = read_state(connection)
    check_model(model, state, writing=False)
    if state.active is None:
        return []
    if index.model != state.active or generation > index.generation:
        if quick_only:
            return None
        connection.execute("BEGIN")  # one snapshot for the state and the rows read with it
        try:
            state, generation = read_state(connection)
            if state.active is not None:
                with index.lock:
                    _refresh(connection, index, state.active, generation)
        finally:
            connection.execute("COMMIT")
    where, params = where_clause(filter, now)

    def records(ids: Sequence[str]) -> dict[str, MemoryItem]:
        if not ids:
            return {}
        rows = connection.execute(
            f"SELECT {COLUMNS} FROM memories m WHERE m.id IN ({', '.join('?' * len(ids))}) "
            f"AND {where}",
            [*ids, *params],
        )
        return {row[0]: row_to_item(row) for row in rows}

    def passing(ids: list[str]) -> list[str]:
        sql = f"SELECT m.id FROM memories m WHERE m.id IN ({{marks}}) AND {where}"
        return [row[0] for row in rows_for_ids(connection, sql, ids, params)]

    # Usually the best `limit` candidates pass the filter, and one read returns them.
    ids, scores = index.top(query, limit)
    found = records(ids)
    if len(found) < len(ids) and len(index) > len(ids):
        if quick_only:
            return None
        # Some were filtered out: widen the candidates (ids only), then read the best.
        best = ranked_filtered(index, query, limit, passing, lambda item_id: item_id)
        ids, scores = [item_id for item_id, _ in best], [score for _, score in best]
        found = records(ids)
    # A record deleted or changed since it was ranked is left out (never returned stale).
    return [
        (found[item_id], score)
        for item_id, score in zip(ids, scores, strict=True)
        if item_id in found
    ]


def _refresh(
    connection: sqlite3.Connection, index: VectorIndex, active: EmbeddingModel, generation: int
) -> None:
    if index.model != active:
        index.reset(active)
    if generation <= index.generation:  # up to date, or another reader had a newer snapshot
        return
    since = index.generation
    removed = [
        row[0]
        for row in connection.execute(
            "SELECT id FROM memory_vector_tombstones WHERE gen > ?", (since,)
        )
    ]
    index.remove(removed)
    rows: Any = connection.execute(
        "SELECT id, vector FROM memory_vectors WHERE gen > ? AND model = ? AND dimension = ?",
        (since, active.model_id, active.dimension),
    ).fetchall()
    if rows:
        matrix, counts = from_blobs([row[1] for row in rows], active.dimension)
        index.upsert([row[0] for row in rows], matrix, counts)
    index.generation = generation
