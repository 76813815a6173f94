"""Which capabilities each store declares, and what the worker does without one."""

from __future__ import annotations

import pytest

from ditto import create_ditto
from ditto.errors import ErrorCode
from tests.workers.memory.conftest import CrudOnlyStore, OpenStore
from workers.memory import create_memory_worker
from workers.memory.ports import CAPABILITIES, capabilities

pytestmark = pytest.mark.anyio

EVERY_CAPABILITY = [
    "usage",
    "keyword search",
    "vectors",
    "history",
    "audit log",
    "import",
    "change feed",
]
"""The names the CLI and the README use, in their order."""


async def test_a_store_with_only_the_core_has_no_capability_and_search_is_unavailable() -> None:
    store = CrudOnlyStore()
    assert capabilities(store) == []
    async with create_ditto(workers=[create_memory_worker(store)]) as runtime:
        written = await runtime.invoke("MEMORY.WRITE", {"memories": [{"content": "x"}]})
        result = await runtime.invoke("MEMORY.SEARCH", {"query": "x"})
    assert written.ok, written.error  # CRUD still works
    assert result.error is not None
    assert result.error.code == ErrorCode.SEARCH_UNAVAILABLE


@pytest.mark.parametrize("store_kind", ["inprocess", "sqlite", "postgres", "mysql"])
async def test_every_built_in_store_offers_every_capability(open_store: OpenStore) -> None:
    assert list(CAPABILITIES) == EVERY_CAPABILITY
    assert capabilities(await open_store()) == EVERY_CAPABILITY


@pytest.mark.parametrize("store_kind", ["markdown"])
async def test_the_markdown_store_offers_every_capability_but_usage_and_a_change_feed(
    open_store: OpenStore,
) -> None:
    # Usage counters would rewrite a person's files on every search. Without a change feed the
    # dedupe stage reads changes as whole records, the path every store supports.
    assert capabilities(await open_store()) == [
        c for c in EVERY_CAPABILITY if c not in ("usage", "change feed")
    ]
