"""SQL for the SQLite memory store: filters as parameterised WHERE clauses, rows as records,
and the keyword-search plan. Values always travel as ``?`` parameters; the only text spliced
into SQL comes from fixed tables here (column names, directions) or from validated metadata
keys (``^[A-Za-z0-9_:-]+$``)."""

from __future__ import annotations

import os
import re
import sqlite3
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from ditto.adapters.sqlite.journal import use_wal
from ditto.errors import ErrorCode
from workers.memory.model.contracts import MemoryFilter, MemoryItem, OrderBy, OrderField
from workers.memory.model.errors import MemoryStoreError
from workers.memory.model.records import content_text, to_micros
from workers.memory.retrieval.text import fts_phrase
from workers.memory.stores.conditions import common_conditions, keyset_order
from workers.memory.stores.rows import (
    ROW_FIELDS,
    governance_values,
    provenance_values,
    record_values,
)

__all__ = (
    "COLUMNS",
    "INSERT_COLUMNS",
    "RETURNING_COLUMNS",
    "connect",
    "fts_row",
    "item_row",
    "match_expression",
    "order_clause",
    "rows_for_ids",
    "where_clause",
)

INSERT_COLUMNS = ", ".join(ROW_FIELDS)

COLUMNS = ", ".join(f"m.{name}" for name in ROW_FIELDS)

RETURNING_COLUMNS = COLUMNS.replace("m.", "")
"""``COLUMNS`` without the alias, for ``RETURNING`` (which cannot name one)."""

ORDER_EXPRESSIONS: dict[OrderField, str] = {
    "created_at": "m.created_at",
    "updated_at": "m.updated_at",
    "usage_count": "m.usage_count",
    "last_used_at": "coalesce(m.last_used_at, -1)",
}


def item_row(item: MemoryItem) -> tuple[Any, ...]:
    """Values for ``INSERT_COLUMNS``."""
    last_used = None if item.last_used_at is None else to_micros(item.last_used_at)
    pinned, archived_at, owner, visibility = governance_values(item)
    return (
        *record_values(item),
        item.usage_count,
        last_used,
        int(pinned),
        archived_at,
        owner,
        visibility,
        *provenance_values(item),
    )


def fts_row(item: MemoryItem) -> tuple[str, str, str]:
    """``(key, summary, body)`` for the FTS index; NUL bytes become spaces (tokenizers stop at
    them)."""
    return (
        (item.key or "").replace("\x00", " "),
        (item.summary or "").replace("\x00", " "),
        content_text(item.content).replace("\x00", " "),
    )


def where_clause(filter: MemoryFilter, now: datetime) -> tuple[str, list[Any]]:
    """``filter`` at ``now`` (expiry is judged then) as SQL over the alias ``m``, with its
    parameters."""
    params: list[Any] = []

    def mark(value: Any) -> str:
        params.append(value)
        return "?"

    parts = common_conditions(filter, now, mark)
    if filter.key_prefix is not None:
        # substr is case-sensitive and counts characters, unlike LIKE.
        parts.append(
            f"substr(m.key, 1, {mark(len(filter.key_prefix))}) = {mark(filter.key_prefix)}"
        )
    if filter.tags_any is not None:
        marks = ", ".join(mark(tag) for tag in sorted(set(filter.tags_any)))
        parts.append(f"EXISTS (SELECT 1 FROM json_each(m.tags) WHERE value IN ({marks}))")
    if filter.tags_all is not None:
        tags = sorted(set(filter.tags_all))
        marks = ", ".join(mark(tag) for tag in tags)
        parts.append(
            f"(SELECT count(DISTINCT value) FROM json_each(m.tags) WHERE value IN ({marks})) = "
            f"{mark(len(tags))}"
        )
    for name, expected in (filter.metadata or {}).items():
        clause, values = _metadata_equals(name, expected)
        parts.append(clause)
        params.extend(values)
    if filter.inactive_before is not None:
        idle = to_micros(filter.inactive_before)
        parts.append(f"m.updated_at < {mark(idle)} AND coalesce(m.last_used_at, -1) < {mark(idle)}")
    return (" AND ".join(parts) or "1"), params


_METADATA_KEY = re.compile(r"^[A-Za-z0-9_:\-]{1,128}$")


def _metadata_equals(name: str, expected: object) -> tuple[str, list[Any]]:
    # The contract validates keys, but a filter built in Python skips that: check again, and
    # bind the JSON path as a parameter anyway, so nothing from a filter is ever SQL.
    if not _METADATA_KEY.fullmatch(name):
        raise MemoryStoreError("metadata filter keys must match ^[A-Za-z0-9_:-]{1,128}$")
    path = f'$."{name}"'
    if expected is None:
        return "json_type(m.metadata, ?) = 'null'", [path]
    if isinstance(expected, bool):
        return "json_type(m.metadata, ?) = ?", [path, "true" if expected else "false"]
    if isinstance(expected, int | float):
        return (
            "json_type(m.metadata, ?) IN ('integer', 'real') AND json_extract(m.metadata, ?) = ?",
            [path, path, expected],
        )
    return (
        "json_type(m.metadata, ?) = 'text' AND json_extract(m.metadata, ?) = ?",
        [path, path, expected],
    )


def order_clause(order: OrderBy) -> tuple[str, str, str]:
    """``(expression, direction, comparison)`` for keyset pagination on ``(expression, id)``."""
    return keyset_order(order, ORDER_EXPRESSIONS)


def _read_only_uri(path: Path) -> str:
    """``mode=ro``; in a folder this process cannot write, also ``immutable`` — WAL readers
    need the ``-shm`` file beside the database, which only a writer of the folder can create.
    Immutable reads skip the write-ahead log, so they are refused while it holds changes.

    Raises:
        MemoryStoreError: ``STORE_READ_ONLY``: the log holds changes this reader cannot see.
    """
    uri = f"{path.resolve().as_uri()}?mode=ro"
    shm, wal = (path.with_name(path.name + end) for end in ("-shm", "-wal"))
    if os.access(path.parent, os.W_OK) or shm.exists():
        return uri
    if wal.exists() and wal.stat().st_size > 0:
        raise MemoryStoreError(
            f"the memory store at {path} cannot be read here: its write-ahead log holds changes "
            "and its folder is read-only (open it once where it can be written)",
            code=ErrorCode.STORE_READ_ONLY,
        )
    return uri + "&immutable=1"


_CHUNK = 500  # ids per IN (...) list, well below SQLite's parameter limit


def rows_for_ids(
    connection: sqlite3.Connection, sql: str, ids: Sequence[str], params: Sequence[Any] = ()
) -> list[Any]:
    """Run ``sql`` for ``ids`` in chunks and gather the rows. ``sql`` holds ``{marks}`` where
    the chunk's ``?`` placeholders go; its other parameters come after the ids."""
    rows: list[Any] = []
    for start in range(0, len(ids), _CHUNK):
        chunk = list(ids[start : start + _CHUNK])
        marks = ", ".join("?" * len(chunk))
        rows += connection.execute(sql.format(marks=marks), [*chunk, *params]).fetchall()
    return rows


def match_expression(words: Sequence[str]) -> str:
    """An FTS5 OR of quoted words: user text is data, never FTS5 syntax."""
    return " OR ".join(fts_phrase(word) for word in words)


def connect(path: str, busy_timeout_ms: int = 5000, read_only: bool = False) -> sqlite3.Connection:
    """A connection in autocommit mode (transactions are explicit), WAL, waiting up to
    ``busy_timeout_ms`` for another connection's lock; ``read_only`` opens an existing file
    that every write then refuses (``SQLITE_READONLY``)."""
    target = _read_only_uri(Path(path)) if read_only else path
    connection = sqlite3.connect(
        target, isolation_level=None, check_same_thread=False, uri=read_only
    )
    # Before anything that may wait on a lock: switching to WAL needs one too.
    connection.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")
    if not read_only:  # a read-only connection keeps the journal mode the file has
        use_wal(connection, busy_timeout_ms)
    connection.execute("PRAGMA synchronous = NORMAL")
    # Savepoint journals and the planner's TEMP tables stay in memory, never in temp files.
    connection.execute("PRAGMA temp_store = MEMORY")
    return connection
