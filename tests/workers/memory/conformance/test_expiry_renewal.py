"""Expiry changed after the write, on every store: UPDATE renews (``ttl``), sets or clears
(``expires_at``) a record's expiry, and the write policy's ``renew_on_read`` keeps a record of
a category with a ttl alive as long as GET or SEARCH keeps returning it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

import pytest

from ditto import ErrorCode, create_ditto
from tests.workers.memory.conftest import MemoryHarness, OpenStore, StoreEnv, requires
from workers.memory import MemoryStore, create_memory_worker
from workers.memory.policy.config import WritePolicy
from workers.memory.ports import HistoryLog, KeywordSearch

pytestmark = [pytest.mark.anyio, requires(MemoryStore)]

DAY = 86_400


async def _update(memory: MemoryHarness, **patch: Any) -> Any:
    (item,) = (await memory.ok("MEMORY.UPDATE", {"updates": [patch]})).items
    return item


async def test_update_renews_sets_and_clears_the_expiry(memory: MemoryHarness) -> None:
    (item,) = await memory.write({"key": "visa", "content": "Visa appointment", "ttl": 60})
    memory.clock.now += timedelta(seconds=30)
    renewed = await _update(memory, id=item.id, ttl=3600)
    assert (renewed.version, renewed.expires_at) == (2, renewed.updated_at + timedelta(hours=1))
    later = memory.clock.now + timedelta(days=2)
    moved = await _update(memory, id=item.id, expires_at=later.isoformat())
    assert moved.expires_at == later
    forever = await _update(memory, id=item.id, expires_at=None)
    assert (forever.expires_at, forever.content) == (None, "Visa appointment")


async def test_update_revives_an_expired_record(memory: MemoryHarness) -> None:
    (item,) = await memory.write({"key": "visa", "content": "Visa appointment", "ttl": 60})
    memory.clock.now += timedelta(seconds=61)
    assert (await memory.ok("MEMORY.GET", {"keys": ["visa"]})).items == []
    await _update(memory, id=item.id, ttl=60)
    (back,) = (await memory.ok("MEMORY.GET", {"keys": ["visa"]})).items
    assert (back.version, back.expires_at) == (2, back.updated_at + timedelta(seconds=60))


async def test_ttl_and_expires_at_together_are_refused(memory: MemoryHarness) -> None:
    (item,) = await memory.write({"content": "x", "ttl": 60})
    result = await memory.call(
        "MEMORY.UPDATE",
        {"updates": [{"id": item.id, "ttl": 5, "expires_at": memory.clock.now.isoformat()}]},
    )
    assert result.error is not None
    assert result.error.code == ErrorCode.INVALID_INPUT
    (unchanged,) = (await memory.ok("MEMORY.GET", {"ids": [item.id]})).items
    assert unchanged.version == 1


@pytest.fixture
async def renewing(open_store: OpenStore, store_env: StoreEnv) -> AsyncIterator[MemoryHarness]:
    store = await open_store()
    policy = WritePolicy(category_ttl_s={"daily": 10 * DAY}, renew_on_read=True)
    worker = create_memory_worker(store, clock=store_env.clock, policy=policy)
    async with create_ditto(workers=[worker]) as runtime:
        yield MemoryHarness(runtime, store, store_env.clock)


async def test_a_record_read_when_half_its_ttl_is_gone_is_renewed(
    renewing: MemoryHarness,
) -> None:
    (item,) = await renewing.write(
        {"key": "standup", "content": "standup notes", "category": "daily"}
    )
    assert item.expires_at == item.created_at + timedelta(days=10)
    renewing.clock.now += timedelta(days=4)  # 6 days left: not yet due
    (read,) = (await renewing.ok("MEMORY.GET", {"keys": ["standup"]})).items
    assert (read.version, read.expires_at) == (1, item.expires_at)
    renewing.clock.now += timedelta(days=2)  # 4 days left: renewed, and returned renewed
    (read,) = (await renewing.ok("MEMORY.GET", {"keys": ["standup"]})).items
    assert (read.version, read.expires_at) == (2, read.updated_at + timedelta(days=10))
    (stored,) = await renewing.all_records()
    assert stored == read
    renewing.clock.now += timedelta(days=1)  # just renewed: not again
    (read,) = (await renewing.ok("MEMORY.GET", {"keys": ["standup"]})).items
    assert read.version == 2


@requires(HistoryLog)
async def test_a_renewal_is_in_history(renewing: MemoryHarness) -> None:
    (item,) = await renewing.write({"content": "standup notes", "category": "daily"})
    renewing.clock.now += timedelta(days=8)
    await renewing.ok("MEMORY.GET", {"ids": [item.id]})
    history = await renewing.store.history(item.id)  # type: ignore[attr-defined]
    assert [(entry.change, entry.version) for entry in history] == [("create", 1), ("update", 2)]


@requires(KeywordSearch)
async def test_search_renews_the_hits_it_returns(renewing: MemoryHarness) -> None:
    await renewing.write(
        {"content": "the retro moved to thursday", "category": "daily"},
        {"content": "the retro board lives in the wiki", "category": "core"},
    )
    renewing.clock.now += timedelta(days=8)
    hits = (await renewing.ok("MEMORY.SEARCH", {"query": "retro", "limit": 5})).hits
    by_category = {hit.memory.category: hit.memory for hit in hits}
    assert by_category["daily"].version == 2
    renewed = by_category["daily"]
    assert renewed.expires_at == renewed.updated_at + timedelta(days=10)
    assert (by_category["core"].version, by_category["core"].expires_at) == (1, None)


async def test_an_expired_record_is_never_renewed_by_a_read(renewing: MemoryHarness) -> None:
    (item,) = await renewing.write({"content": "standup notes", "category": "daily"})
    renewing.clock.now += timedelta(days=11)
    request = {"ids": [item.id], "include": ["expired"]}
    (read,) = (await renewing.ok("MEMORY.GET", request)).items
    assert (read.version, read.expires_at) == (1, item.expires_at)


async def test_without_renew_on_read_reads_change_nothing(memory: MemoryHarness) -> None:
    (item,) = await memory.write({"content": "standup notes", "ttl": 10 * DAY})
    memory.clock.now += timedelta(days=8)
    (read,) = (await memory.ok("MEMORY.GET", {"ids": [item.id]})).items
    assert read.version == 1
