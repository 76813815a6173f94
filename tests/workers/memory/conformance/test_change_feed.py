"""The change feed on every store that has one: which records changed after a point, oldest
change first, each at its latest version, page after page without a gap or a repeat."""

from __future__ import annotations

import pytest

from tests.workers.memory.conftest import OpenStore, requires
from workers.memory import MemoryDraft, MemoryPatch, MemoryStore
from workers.memory.model.records import to_micros
from workers.memory.ports import ChangedRecord, ChangeFeed, QueryPosition

pytestmark = [pytest.mark.anyio, requires(ChangeFeed)]

_START: QueryPosition = (-(1 << 62), "")
"""Before any change."""


async def _opened(open_store: OpenStore) -> tuple[MemoryStore, ChangeFeed]:
    store = await open_store()
    assert isinstance(store, ChangeFeed)
    return store, store


async def _everything(feed: ChangeFeed, page: int = 1000) -> list[ChangedRecord]:
    listed: list[ChangedRecord] = []
    after = _START
    while True:
        changes = await feed.changes_after(after, page)
        listed += changes
        if len(changes) < page:
            return listed
        after = (changes[-1].updated_micros, changes[-1].id)


def _order(listed: list[ChangedRecord]) -> list[tuple[int, str]]:
    return [(change.updated_micros, change.id) for change in listed]


async def test_each_changed_record_is_listed_once_at_its_latest_version(
    open_store: OpenStore,
) -> None:
    store, feed = await _opened(open_store)
    first, second = await store.write(
        [MemoryDraft(content="one"), MemoryDraft(content="two", namespace="team")], "create"
    )
    (third,) = await store.write([MemoryDraft(content="three")], "create")
    (patched,) = await store.update([MemoryPatch(first.id, content="one, again")])
    listed = await _everything(feed)
    assert _order(listed) == sorted(_order(listed))
    # The first record changed last: it comes last, once, at its second version.
    assert listed[-1] == ChangedRecord(first.id, "default", 2, to_micros(patched.updated_at))
    assert sorted((c.id, c.namespace, c.version) for c in listed[:-1]) == sorted(
        [(second.id, "team", 1), (third.id, "default", 1)]
    )


async def test_pages_continue_without_a_gap_or_a_repeat(open_store: OpenStore) -> None:
    store, feed = await _opened(open_store)
    written = []
    for batch in range(4):  # a batch shares one microsecond: pages must split inside it
        drafts = [MemoryDraft(content=f"note {batch}-{n}") for n in range(5)]
        written += await store.write(drafts, "create")
    paged = await _everything(feed, page=3)
    assert _order(paged) == _order(await _everything(feed))
    assert sorted(change.id for change in paged) == sorted(item.id for item in written)


async def test_a_point_lists_what_changed_after_it_only(open_store: OpenStore) -> None:
    store, feed = await _opened(open_store)
    early = await store.write([MemoryDraft(content="a"), MemoryDraft(content="b")], "create")
    late = await store.write([MemoryDraft(content="c"), MemoryDraft(content="d")], "create")
    at = to_micros(late[0].updated_at)
    # (micros, "") starts at that microsecond: every change made in it, none before.
    assert sorted(c.id for c in await feed.changes_after((at, ""), 10)) == sorted(
        item.id for item in late
    )
    last = max(late, key=lambda item: item.id)
    assert await feed.changes_after((at, last.id), 10) == []
    assert len(await feed.changes_after(_START, 10)) == len(early) + len(late)


async def test_a_deleted_record_is_not_listed(open_store: OpenStore) -> None:
    store, feed = await _opened(open_store)
    kept, dropped = await store.write(
        [MemoryDraft(content="kept"), MemoryDraft(content="dropped")], "create"
    )
    await store.delete([dropped.id])
    assert [change.id for change in await _everything(feed)] == [kept.id]
