"""Bounded work per request: oversized queries, filters and batches are INVALID_INPUT naming
the limit, on every store, before any store work (never a retryable store error)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.workers.memory.conftest import MemoryHarness
from workers.memory.model.contracts import (
    MAX_BATCH,
    MAX_FILTER_METADATA,
    MAX_FILTER_TAGS,
    MAX_QUERY_CHARS,
)

pytestmark = pytest.mark.anyio

OVERSIZED: list[tuple[str, dict[str, Any], str]] = [
    ("MEMORY.SEARCH", {"query": "word " * (MAX_QUERY_CHARS // 5 + 1)}, str(MAX_QUERY_CHARS)),
    (
        "MEMORY.SEARCH",
        {"query": "x", "filter": {"tags_any": [f"t{n}" for n in range(MAX_FILTER_TAGS + 1)]}},
        str(MAX_FILTER_TAGS),
    ),
    (
        "MEMORY.QUERY",
        {"filter": {"tags_all": [f"t{n}" for n in range(MAX_FILTER_TAGS + 1)]}},
        str(MAX_FILTER_TAGS),
    ),
    (
        "MEMORY.QUERY",
        {"filter": {"metadata": {f"k{n}": n for n in range(MAX_FILTER_METADATA + 1)}}},
        str(MAX_FILTER_METADATA),
    ),
    ("MEMORY.GET", {"ids": [f"id{n}" for n in range(MAX_BATCH + 1)]}, str(MAX_BATCH)),
    ("MEMORY.DELETE", {"ids": [f"id{n}" for n in range(MAX_BATCH + 1)]}, str(MAX_BATCH)),
    ("MEMORY.WRITE", {"memories": [{"content": n} for n in range(MAX_BATCH + 1)]}, str(MAX_BATCH)),
]


@pytest.mark.parametrize(
    ("node", "payload", "limit"),
    OVERSIZED,
    ids=[f"{n}-{i}" for i, (n, _, _) in enumerate(OVERSIZED)],
)
async def test_oversized_requests_are_invalid_input_naming_the_limit(
    memory: MemoryHarness, node: str, payload: dict[str, Any], limit: str
) -> None:
    result = await memory.call(node, payload)
    assert result.error is not None
    assert (result.error.code, result.error.retryable) == ("INVALID_INPUT", False)
    assert limit in result.error.message
    assert await memory.all_records() == []


async def test_requests_at_the_limits_are_served(memory: MemoryHarness) -> None:
    tags = [f"t{n}" for n in range(MAX_FILTER_TAGS)]
    found = await memory.ok(
        "MEMORY.SEARCH", {"query": "x" * MAX_QUERY_CHARS, "filter": {"tags_any": tags}}
    )
    assert found.hits == []
