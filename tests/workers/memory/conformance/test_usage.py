"""Usage counters on every store that keeps them: a use is counted and stamped, never an edit."""

from __future__ import annotations

import pytest

from tests.workers.memory.conftest import MemoryHarness, requires
from workers.memory.ports import KeywordSearch, UsageTracking

pytestmark = [pytest.mark.anyio, requires(UsageTracking)]


async def test_record_usage_counts_and_stamps_each_use_and_ignores_deleted_records(
    memory: MemoryHarness,
) -> None:
    store = memory.store
    assert isinstance(store, UsageTracking)
    used, unused, gone = await memory.write({"content": 1}, {"content": 2}, {"content": 3})
    await memory.ok("MEMORY.DELETE", {"ids": [gone.id]})
    first, second = memory.clock(), memory.clock()
    await store.record_usage([used.id, gone.id], first)
    await store.record_usage([used.id], second)
    await memory.store.flush()
    items = {
        item.id: item
        for item in await memory.store.get([used.id, unused.id, gone.id], [], "default")
    }
    assert sorted(items) == sorted([used.id, unused.id])
    assert (items[used.id].usage_count, items[used.id].last_used_at) == (2, second)
    assert (items[used.id].version, items[used.id].updated_at) == (1, used.updated_at)
    assert (items[unused.id].usage_count, items[unused.id].last_used_at) == (0, None)


@requires(KeywordSearch)
async def test_search_hits_count_as_uses(memory: MemoryHarness) -> None:
    hit, miss = await memory.write({"content": "espresso"}, {"content": "tea"})
    await memory.ok("MEMORY.SEARCH", {"query": "espresso"})
    await memory.ok("MEMORY.SEARCH", {"query": "espresso"})
    await memory.store.flush()
    items = {
        item.id: item for item in (await memory.ok("MEMORY.GET", {"ids": [hit.id, miss.id]})).items
    }
    assert items[hit.id].usage_count == 2
    assert items[hit.id].last_used_at is not None
    assert items[hit.id].updated_at == hit.updated_at  # a use is not an edit
    assert items[miss.id].usage_count == 0
