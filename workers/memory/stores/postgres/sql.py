"""SQL for the PostgreSQL memory store: filters, rows and orders (keyword search: ``search``).

Values always travel as ``$n`` parameters. The only text spliced into SQL is the schema name
(validated against ``^[a-z_][a-z0-9_]{0,62}$`` and quoted) and fixed fragments from this module.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from ditto.errors import InvalidInputError
from workers.memory.model.contracts import MemoryFilter, MemoryItem, OrderBy, OrderField
from workers.memory.model.records import canonical_json, content_text, to_micros
from workers.memory.retrieval.text import words
from workers.memory.stores.conditions import common_conditions, keyset_order
from workers.memory.stores.rows import (
    GOVERNANCE_COLUMNS,
    PROVENANCE_COLUMNS,
    RECORD_COLUMNS,
    governance_values,
    provenance_values,
    record_values,
)

__all__ = (
    "STORED_COLUMNS",
    "Params",
    "columns",
    "item_values",
    "order_clause",
    "quoted_schema",
    "records",
    "search_text",
    "where_clause",
)

_SCHEMA = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")


def quoted_schema(schema: str) -> str:
    """Raises:
    InvalidInputError: ``schema`` is not a plain lower-case identifier."""
    if not isinstance(schema, str) or not _SCHEMA.fullmatch(schema):
        raise InvalidInputError("schema must match ^[a-z_][a-z0-9_]{0,62}$")
    return f'"{schema}"'


STORED_COLUMNS = (
    *RECORD_COLUMNS,
    *GOVERNANCE_COLUMNS,
    *PROVENANCE_COLUMNS,
    "search_text",
    "words",
)
"""What a write stores in ``memories``, in the order of :func:`item_values`."""


def columns() -> str:
    """A record's columns over ``records(schema)``, in the order ``row_to_item`` reads."""
    return ", ".join(
        [
            *(f"m.{name}" for name in RECORD_COLUMNS),
            "coalesce(u.usage_count, 0)",
            "u.last_used_at",
            *(f"m.{name}" for name in GOVERNANCE_COLUMNS),
            *(f"m.{name}" for name in PROVENANCE_COLUMNS),
        ]
    )


def records(s: str) -> str:
    """The ``FROM`` source of records: each memory with its usage counters (alias ``m``)."""
    return f"{s}.memories m LEFT JOIN {s}.memory_usage u ON u.id = m.id"


def search_text(item: MemoryItem) -> str:
    # PostgreSQL text cannot hold NUL; the search text only feeds the index.
    return " ".join(filter(None, (item.key, item.summary, content_text(item.content)))).replace(
        "\x00", " "
    )


def item_values(item: MemoryItem) -> tuple[Any, ...]:
    """Values for ``STORED_COLUMNS``, in that order (a new record has no usage row yet).

    ``words`` is the record's length for BM25: its words as the shared tokenizer sees them
    (``retrieval.text.words``, FTS5's ``unicode61`` words), stop words included, as SQLite and
    the in-process store count a record's length."""
    text = search_text(item)
    return (
        *record_values(item),
        *governance_values(item),
        *provenance_values(item),
        text,
        len(words(text)),
    )


class Params:
    """Collects query parameters and hands out their ``$n`` placeholders."""

    def __init__(self, values: Sequence[Any] = ()) -> None:
        self.values: list[Any] = list(values)

    def add(self, value: Any) -> str:
        self.values.append(value)
        return f"${len(self.values)}"


def where_clause(filter: MemoryFilter, params: Params, schema: str, now: datetime) -> str:
    """``filter`` at ``now`` (expiry is judged then) as SQL over the alias ``m`` of ``schema``
    (quoted), ``TRUE`` when empty."""
    parts = common_conditions(filter, now, params.add)
    if filter.key_prefix is not None:
        parts.append(f"starts_with(m.key, {params.add(filter.key_prefix)})")
    if filter.tags_any is not None:
        parts.append(f"(m.tags::jsonb ?| {params.add(sorted(set(filter.tags_any)))}::text[])")
    if filter.tags_all is not None:
        parts.append(f"(m.tags::jsonb ?& {params.add(sorted(set(filter.tags_all)))}::text[])")
    for name, expected in (filter.metadata or {}).items():
        # jsonb equality: numbers by value (1 = 1.0), and true is never 1.
        path = params.add(name)
        value = params.add(canonical_json(expected).decode())
        parts.append(f"(m.metadata::jsonb -> {path}::text) = {value}::jsonb")
    if filter.inactive_before is not None:
        # Usage lives in its own table; a subquery keeps this usable where only `m` is joined.
        idle = params.add(to_micros(filter.inactive_before))
        parts.append(
            f"m.updated_at < {idle} AND NOT EXISTS (SELECT 1 FROM {schema}.memory_usage used "
            f"WHERE used.id = m.id AND used.last_used_at >= {idle})"
        )
    return " AND ".join(parts) or "TRUE"


_ORDER: dict[OrderField, str] = {
    "created_at": "m.created_at",
    "updated_at": "m.updated_at",
    "usage_count": "coalesce(u.usage_count, 0)",
    "last_used_at": "coalesce(u.last_used_at, -1)",
}


def order_clause(order: OrderBy) -> tuple[str, str, str]:
    """``(expression, direction, comparison)`` for keyset pagination on ``(expression, id)``."""
    return keyset_order(order, _ORDER)
