"""Record history on every store that keeps it, and importing records exactly as exported."""

from __future__ import annotations

import msgspec
import pytest

from ditto import ErrorCode
from tests.workers.memory.conformance.helpers import code_of
from tests.workers.memory.conftest import MemoryHarness, requires
from workers.memory import InProcessMemoryStore, MemoryDraft, MemoryStoreError
from workers.memory.ports import HistoryLog, KeywordSearch, RecordImport

pytestmark = [pytest.mark.anyio, requires(HistoryLog)]


# ------------------------------------------------------------------------------------- history


@requires(KeywordSearch)  # a SEARCH hit, to show a use is not a change
async def test_history_records_every_change_in_order_and_outlives_the_record(
    memory: MemoryHarness,
) -> None:
    (created,) = await memory.write({"key": "plan", "content": "v1"})
    await memory.write({"key": "plan", "content": "v1"})  # a replay changes nothing
    await memory.ok("MEMORY.UPDATE", {"updates": [{"id": created.id, "summary": "s"}]})
    await memory.write({"key": "plan", "content": "v3"}, mode="upsert")
    await memory.ok("MEMORY.SEARCH", {"query": "v3"})  # a use is not a change
    await memory.ok("MEMORY.DELETE", {"ids": [created.id]})
    history = await memory.store.history(created.id)
    assert [(entry.change, entry.version) for entry in history] == [
        ("create", 1),
        ("update", 2),
        ("upsert", 3),
        ("delete", 3),
    ]
    assert [entry.record.content for entry in history] == ["v1", "v1", "v3", "v3"]
    assert history[1].record.summary == "s"
    assert all(entry.id == created.id for entry in history)
    assert [entry.at for entry in history] == sorted(entry.at for entry in history)
    assert await memory.store.history("never-existed") == []


async def test_refused_batches_leave_no_history(memory: MemoryHarness) -> None:
    (item,) = await memory.write({"key": "k", "content": "original"})
    conflict = await memory.call(
        "MEMORY.WRITE",
        {"memories": [{"key": "new", "content": 1}, {"key": "k", "content": "different"}]},
    )
    assert code_of(conflict) == ErrorCode.CONFLICT
    missing = await memory.call(
        "MEMORY.UPDATE", {"updates": [{"id": item.id, "content": 2}, {"id": "gone", "content": 3}]}
    )
    assert code_of(missing) == ErrorCode.NOT_FOUND
    assert [entry.change for entry in await memory.store.history(item.id)] == ["create"]


async def test_key_history_finds_deleted_records_and_every_holder_of_the_key(
    memory: MemoryHarness,
) -> None:
    (first,) = await memory.write({"key": "plan", "content": "v1", "namespace": "ops"})
    await memory.write({"key": "plan", "content": "elsewhere", "namespace": "other"})
    await memory.ok("MEMORY.UPDATE", {"updates": [{"id": first.id, "content": "v2"}]})
    await memory.ok("MEMORY.DELETE", {"ids": [first.id]})
    (second,) = await memory.write({"key": "plan", "content": "anew", "namespace": "ops"})
    history = await memory.store.key_history("ops", "plan")
    assert [(entry.id, entry.change, entry.record.content) for entry in history] == [
        (first.id, "create", "v1"),
        (first.id, "update", "v2"),
        (first.id, "delete", "v2"),
        (second.id, "create", "anew"),
    ]
    assert await memory.store.key_history("ops", "never") == []
    assert await memory.store.key_history("nowhere", "plan") == []


async def test_history_pages_hold_every_entry_once_deleted_records_included(
    memory: MemoryHarness,
) -> None:
    (gone,) = await memory.write({"key": "gone", "content": 1, "namespace": "ops"})
    await memory.ok("MEMORY.DELETE", {"ids": [gone.id]})
    for n in range(4):
        await memory.write({"key": f"k{n}", "content": n, "namespace": "ops" if n % 2 else "x"})
    pages = [page async for page in memory.store.history_pages(size=2)]
    assert [len(page) for page in pages] == [2, 2, 2]
    everything = [entry for page in pages for entry in page]
    assert sorted((e.record.key, e.change) for e in everything) == sorted(
        [("gone", "create"), ("gone", "delete")] + [(f"k{n}", "create") for n in range(4)]
    )
    ops = [entry async for page in memory.store.history_pages(namespace="ops") for entry in page]
    assert sorted(entry.record.key or "" for entry in ops) == ["gone", "gone", "k1", "k3"]
    page, after = await memory.store.history_page(0, 10)
    assert len(page) == 6
    assert await memory.store.history_page(after, 10) == ([], after)


# ------------------------------------------------------------------------------------- restore


@requires(RecordImport, KeywordSearch)
async def test_restore_stores_records_exactly_and_twice_changes_nothing(
    memory: MemoryHarness,
) -> None:
    source = InProcessMemoryStore()
    (original,) = await source.write(
        [
            msgspec.convert(
                {"key": "k", "content": {"a": [1, 2]}, "tags": ["t"], "metadata": {"m": True}},
                MemoryDraft,
            )
        ],
        "create",
    )
    await source.record_usage([original.id], original.created_at)
    (exported,) = await source.get([original.id], [], "default")
    assert await memory.store.restore([exported]) == 1
    assert await memory.store.restore([exported]) == 1
    records = await memory.all_records()
    assert records == [exported]
    assert await memory.store.history(exported.id) == []  # an import is not a change
    hits = (await memory.ok("MEMORY.SEARCH", {"query": "k"})).hits
    assert [hit.memory.id for hit in hits] == [exported.id]


@requires(RecordImport)
async def test_restore_refuses_a_key_held_by_another_record(memory: MemoryHarness) -> None:
    (mine,) = await memory.write({"key": "k", "content": "mine"})
    theirs = msgspec.structs.replace(mine, id="someone-else", content="theirs")
    with pytest.raises(MemoryStoreError, match="belongs to another record") as refused:
        await memory.store.restore([theirs])
    assert refused.value.code == ErrorCode.CONFLICT
    assert [record.content for record in await memory.all_records()] == ["mine"]
