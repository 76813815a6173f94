"""SQL for the MySQL memory store, written with the neutral ``?`` marker (``sql_driver``).

Values always travel as parameters. The only text spliced into SQL is fixed fragments from
this module and column names from the shared row tables, each quoted with backticks (``key``,
``change`` and ``keys`` are reserved words in MySQL).
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from workers.memory.model.contracts import MemoryFilter, MemoryItem, OrderBy, OrderField
from workers.memory.model.errors import MemoryStoreError
from workers.memory.model.records import content_text, to_micros
from workers.memory.retrieval.text import light_stem
from workers.memory.retrieval.text import words as text_words
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
    "key_hash",
    "marks",
    "order_clause",
    "quoted",
    "records",
    "term_token",
    "terms_of",
    "where_clause",
)


_METADATA_KEY = re.compile(r"^[A-Za-z0-9_:\-]{1,128}$")


def quoted(name: str) -> str:
    return f"`{name}`"


STORED_COLUMNS = (
    *RECORD_COLUMNS,
    *GOVERNANCE_COLUMNS,
    *PROVENANCE_COLUMNS,
    "search_terms",
    "search_length",
)
"""What a write stores in ``memories``, in the order of :func:`item_values`."""


def columns() -> str:
    """A record's columns over :func:`records`, in the order ``row_to_item`` reads."""
    return ", ".join(
        [
            *(f"m.{quoted(name)}" for name in RECORD_COLUMNS),
            "COALESCE(u.`usage_count`, 0)",
            "u.`last_used_at`",
            *(f"m.{quoted(name)}" for name in GOVERNANCE_COLUMNS),
            *(f"m.{quoted(name)}" for name in PROVENANCE_COLUMNS),
        ]
    )


def records() -> str:
    """The ``FROM`` source of records: each memory with its usage counters (alias ``m``)."""
    return "memories m LEFT JOIN memory_usage u ON u.`id` = m.`id`"


def term_token(term: str) -> str:
    """One search term as the word the FULLTEXT index holds: ``w`` and the term's UTF-8 in
    hex, so InnoDB's own tokenizer, stop words and minimum word length never apply (the terms
    are the shared ones, ``retrieval.text``); a term too long for a FULLTEXT word (84) is
    hashed instead."""
    token = "w" + term.encode().hex()
    return token if len(token) <= 80 else "h" + hashlib.blake2b(term.encode()).hexdigest()[:64]


def terms_of(item: MemoryItem) -> Counter[str]:
    """The stemmed words of a record's key, summary and content, counted (as the in-process
    store counts them, so BM25 scores agree)."""
    text = " ".join(filter(None, (item.key, item.summary, content_text(item.content))))
    return Counter(light_stem(word) for word in text_words(text))


def item_values(item: MemoryItem) -> tuple[Any, ...]:
    """Values for ``STORED_COLUMNS``, in that order (a new record has no usage row yet)."""
    terms = terms_of(item)
    tokens = " ".join(term_token(term) for term in terms.elements())
    return (
        *record_values(item),
        *governance_values(item),
        *provenance_values(item),
        tokens,
        terms.total(),
    )


def key_hash(namespace: str, key: str) -> bytes:
    """The ``key_hash`` column of ``(namespace, key)``: the schema computes the same bytes."""
    return hashlib.sha256(f"{namespace}\0{key}".encode()).digest()


def marks(count: int) -> str:
    """``count`` markers for an ``IN`` list (``NULL`` for none: ``IN (NULL)`` matches nothing)."""
    return ", ".join("?" * count) if count else "NULL"


class Params:
    """Collects query parameters and hands out their ``?`` markers."""

    def __init__(self, values: Sequence[Any] = ()) -> None:
        self.values: list[Any] = list(values)

    def add(self, value: Any) -> str:
        self.values.append(value)
        return "?"


def _metadata_equals(name: str, expected: object, params: Params) -> str:
    # The contract validates keys, but a filter built in Python skips that: check again, and
    # bind the JSON path as a parameter anyway, so nothing from a filter is ever SQL.
    if not _METADATA_KEY.fullmatch(name):
        raise MemoryStoreError("metadata filter keys must match ^[A-Za-z0-9_:-]{1,128}$")
    path = f'$."{name}"'
    kind = f"JSON_TYPE(JSON_EXTRACT(m.`metadata`, {params.add(path)}))"
    if expected is None:
        return f"{kind} = 'NULL'"
    if isinstance(expected, bool):
        return f"{kind} = 'BOOLEAN' AND JSON_EXTRACT(m.`metadata`, {params.add(path)}) = " + (
            "'true'" if expected else "'false'"
        )
    if isinstance(expected, int | float):
        # By value, as a double on both sides: 1 = 1.0, and true is never 1.
        return (
            f"{kind} IN ('INTEGER', 'UNSIGNED INTEGER', 'DOUBLE', 'DECIMAL') AND "
            f"JSON_VALUE(m.`metadata`, {params.add(path)}) + 0e0 = {params.add(float(expected))}"
        )
    # Bytes on both sides: exact, whatever collation the connection has.
    return (
        f"{kind} = 'STRING' AND CAST(JSON_VALUE(m.`metadata`, {params.add(path)}) AS BINARY) "
        f"= CAST({params.add(expected)} AS BINARY)"
    )


def _tag_condition(tag: str, params: Params) -> str:
    return f"JSON_CONTAINS(m.`tags`, JSON_ARRAY(CAST({params.add(tag)} AS CHAR)))"


def _quoted(name: str) -> str:
    return f"m.`{name}`"  # `key` is a reserved word in MySQL


def where_clause(filter: MemoryFilter, params: Params, now: datetime) -> str:
    """``filter`` at ``now`` (expiry is judged then) as SQL over the alias ``m``, ``TRUE``
    when empty."""
    parts = common_conditions(filter, now, params.add, _quoted)
    if filter.key_prefix is not None:
        prefix = filter.key_prefix
        parts.append(f"LEFT(m.`key`, {params.add(len(prefix))}) = {params.add(prefix)}")
    if filter.tags_any is not None:
        tags = sorted(set(filter.tags_any))
        parts.append("(" + " OR ".join(_tag_condition(tag, params) for tag in tags) + ")")
    if filter.tags_all is not None:
        tags = sorted(set(filter.tags_all))
        parts.extend(_tag_condition(tag, params) for tag in tags)
    for name, expected in (filter.metadata or {}).items():
        parts.append(_metadata_equals(name, expected, params))
    if filter.inactive_before is not None:
        # Usage lives in its own table; a subquery keeps this usable where only `m` is joined.
        idle = to_micros(filter.inactive_before)
        parts.append(
            f"m.`updated_at` < {params.add(idle)} AND NOT EXISTS (SELECT 1 FROM memory_usage "
            f"used WHERE used.`id` = m.`id` AND used.`last_used_at` >= {params.add(idle)})"
        )
    return " AND ".join(parts) or "TRUE"


_ORDER: dict[OrderField, str] = {
    "created_at": "m.`created_at`",
    "updated_at": "m.`updated_at`",
    "usage_count": "COALESCE(u.`usage_count`, 0)",
    "last_used_at": "COALESCE(u.`last_used_at`, -1)",
}


def order_clause(order: OrderBy) -> tuple[str, str, str]:
    """``(expression, direction, comparison)`` for keyset pagination on ``(expression, id)``."""
    return keyset_order(order, _ORDER)
