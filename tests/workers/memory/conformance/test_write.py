"""MEMORY.WRITE on every store: ids and timestamps, create and upsert, replays and conflicts per
key, and which content and fields a store refuses."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import anyio
import pytest

from ditto import ErrorCode, create_ditto
from tests.workers.memory.conformance.helpers import code_of
from tests.workers.memory.conftest import MemoryHarness, OpenStore, StoreEnv, requires
from workers.memory import AccessPolicy, MemoryStore, create_memory_worker
from workers.memory.ports import HistoryLog, KeywordSearch, UsageTracking

pytestmark = [pytest.mark.anyio, requires(MemoryStore)]


async def test_write_assigns_ids_timestamps_and_version(memory: MemoryHarness) -> None:
    (item,) = await memory.write({"content": {"text": "hello"}, "tags": ["a"], "summary": "s"})
    assert item.id
    assert item.version == 1
    assert item.usage_count == 0
    assert item.last_used_at is None
    assert item.created_at == item.updated_at
    assert item.created_at.tzinfo is not None
    assert (item.namespace, item.category, item.tags, item.summary) == (
        "default",
        "core",
        ["a"],
        "s",
    )
    assert item.metadata == {}


async def test_ids_are_uuid7_in_write_order(memory: MemoryHarness) -> None:
    import uuid

    first = await memory.write({"content": "one"})
    await anyio.sleep(0.002)  # the next millisecond
    later = await memory.write(*({"content": n} for n in range(50)))
    ids = [item.id for item in (*first, *later)]
    assert len(set(ids)) == len(ids)
    assert all(uuid.UUID(i).version == 7 and uuid.UUID(i).variant == uuid.RFC_4122 for i in ids)
    assert all(first[0].id < item.id for item in later)


async def test_write_with_the_same_key_and_fields_replays_the_stored_record(
    memory: MemoryHarness,
) -> None:
    draft = {"key": "pref:lang", "content": {"language": "zh-CN"}, "metadata": {"a": 1, "b": 2}}
    (first,) = await memory.write(draft)
    reordered = {**draft, "metadata": {"b": 2, "a": 1}}  # key order does not matter
    (again,) = await memory.write(reordered)
    assert again == first
    assert len(await memory.all_records()) == 1


async def test_a_conflicting_key_rolls_back_the_whole_batch(memory: MemoryHarness) -> None:
    await memory.write({"key": "k", "content": "original"})
    result = await memory.call(
        "MEMORY.WRITE",
        {"memories": [{"key": "fresh", "content": "new"}, {"key": "k", "content": "different"}]},
    )
    assert code_of(result) == ErrorCode.CONFLICT
    records = await memory.all_records()
    assert [(r.key, r.content) for r in records] == [("k", "original")]


async def test_json_true_and_one_are_different_content(memory: MemoryHarness) -> None:
    await memory.write({"key": "k", "content": {"flag": True}})
    result = await memory.call("MEMORY.WRITE", {"memories": [{"key": "k", "content": {"flag": 1}}]})
    assert code_of(result) == ErrorCode.CONFLICT


async def test_duplicate_keys_in_one_batch_are_invalid_input(memory: MemoryHarness) -> None:
    result = await memory.call(
        "MEMORY.WRITE", {"memories": [{"key": "k", "content": 1}, {"key": "k", "content": 1}]}
    )
    assert code_of(result) == ErrorCode.INVALID_INPUT
    assert await memory.all_records() == []


async def test_keys_are_unique_per_namespace(memory: MemoryHarness) -> None:
    a, b = await memory.write(
        {"key": "k", "namespace": "alice", "content": 1},
        {"key": "k", "namespace": "bob", "content": 2},
    )
    assert a.id != b.id


@requires(KeywordSearch, UsageTracking)
async def test_upsert_replaces_fields_and_keeps_identity_and_usage(memory: MemoryHarness) -> None:
    (first,) = await memory.write({"key": "plan:current", "content": "v1", "tags": ["x"]})
    await memory.ok("MEMORY.SEARCH", {"query": "v1"})
    await memory.store.flush()
    (replaced,) = await memory.write({"key": "plan:current", "content": "v2"}, mode="upsert")
    assert replaced.id == first.id
    assert replaced.created_at == first.created_at
    assert replaced.updated_at > first.updated_at
    assert replaced.version == 2
    assert replaced.usage_count == 1
    assert replaced.last_used_at is not None
    assert (replaced.content, replaced.tags) == ("v2", [])
    (same,) = await memory.write({"key": "plan:current", "content": "v2"}, mode="upsert")
    assert same.version == 2  # an identical upsert is a replay, not a new version


@requires(HistoryLog)
async def test_an_owners_upsert_that_changes_only_visibility_is_a_new_version(
    open_store: OpenStore, store_env: StoreEnv
) -> None:
    store = await open_store()
    assert isinstance(store, HistoryLog)
    worker = create_memory_worker(store, clock=store_env.clock, access=AccessPolicy("enforce"))
    draft = {"key": "plan", "content": "ship it", "tags": ["t"], "visibility": "shared"}
    hide = {"memories": [{**draft, "visibility": "private"}], "mode": "upsert"}
    async with create_ditto(workers=[worker]) as runtime:
        written = await runtime.invoke("MEMORY.WRITE", {"memories": [draft]}, principal="bob")
        (first,) = written.unwrap().items
        hidden = await runtime.invoke("MEMORY.WRITE", hide, principal="bob")
        (replaced,) = hidden.unwrap().items
        again = await runtime.invoke("MEMORY.WRITE", hide, principal="bob")
        (replayed,) = again.unwrap().items
    assert (first.owner, first.visibility, first.version) == ("bob", "shared", 1)
    assert replaced.id == first.id
    assert (replaced.visibility, replaced.version) == ("private", 2)
    assert replaced.updated_at > first.updated_at
    assert replayed == replaced  # the same upsert again is a replay
    assert await store.get([first.id], [], "default") == [replaced]
    history = await store.history(first.id)
    assert [(entry.change, entry.version, entry.record.visibility) for entry in history] == [
        ("create", 1, "shared"),
        ("upsert", 2, "private"),
    ]


async def test_upsert_needs_a_key_and_inserts_new_keys(memory: MemoryHarness) -> None:
    result = await memory.call("MEMORY.WRITE", {"memories": [{"content": 1}], "mode": "upsert"})
    assert code_of(result) == ErrorCode.INVALID_INPUT
    (item,) = await memory.write({"key": "new", "content": 1}, mode="upsert")
    assert item.version == 1


async def test_empty_write_returns_nothing(memory: MemoryHarness) -> None:
    assert await memory.write() == []


@pytest.mark.parametrize(
    "content",
    [float("nan"), {"x": float("inf")}, "lone \ud800 surrogate", {"\udfff": 1}],
    ids=["nan", "inf", "surrogate", "surrogate-key"],
)
async def test_content_json_cannot_hold_is_refused(memory: MemoryHarness, content: Any) -> None:
    result = await memory.call("MEMORY.WRITE", {"memories": [{"content": content}]})
    assert code_of(result) == ErrorCode.INVALID_INPUT
    assert await memory.all_records() == []


async def test_concurrent_writes_of_the_same_key_create_one_record(memory: MemoryHarness) -> None:
    results: list[Any] = []

    async def write() -> None:
        results.append(
            await memory.call("MEMORY.WRITE", {"memories": [{"key": "k", "content": 1}]})
        )

    async with anyio.create_task_group() as group:
        for _ in range(8):
            group.start_soon(write)
    assert all(result.ok for result in results)
    assert len({result.output.items[0].id for result in results}) == 1
    assert len(await memory.all_records()) == 1


async def test_timestamps_come_from_the_store_clock(memory: MemoryHarness) -> None:
    before = memory.clock.now
    (item,) = await memory.write({"content": 1})
    assert before < item.created_at <= before + timedelta(seconds=1)


@requires(KeywordSearch)
async def test_stored_records_share_nothing_with_callers(memory: MemoryHarness) -> None:
    content = {"steps": ["a"]}
    (written,) = await memory.write({"key": "plan", "content": content})
    content["steps"].append("changed by the caller after writing")
    written.content["steps"].append("changed through the returned record")
    (stored,) = (await memory.ok("MEMORY.GET", {"keys": ["plan"]})).items
    assert stored.content == {"steps": ["a"]}
    stored.content["steps"].append("b")  # read, change in place, write back: a real change
    (upserted,) = await memory.write({"key": "plan", "content": stored.content}, mode="upsert")
    assert upserted.version == 2
    assert len((await memory.ok("MEMORY.SEARCH", {"query": "b"})).hits) == 1


@pytest.mark.parametrize(
    "draft",
    [
        {"content": 1, "summary": "nul\x00here"},
        {"content": 1, "key": "k\x00"},
        {"content": 1, "tags": ["t\x00"]},
        {"content": 1, "metadata": {"note": "nul\x00here"}},
        {"content": 1, "metadata": {"nul\x00key": 1}},
        {"content": 1, "source": "s\x00"},
    ],
)
async def test_nul_outside_content_is_refused_on_every_store(
    memory: MemoryHarness, draft: dict[str, Any]
) -> None:
    result = await memory.call("MEMORY.WRITE", {"memories": [draft]})
    assert code_of(result) == ErrorCode.INVALID_INPUT
    assert await memory.all_records() == []
    filtered = await memory.call("MEMORY.QUERY", {"filter": {"namespace": "n\x00"}})
    assert code_of(filtered) == ErrorCode.INVALID_INPUT
    searched = await memory.call("MEMORY.SEARCH", {"query": "x", "filter": {"source": "\x00"}})
    assert code_of(searched) == ErrorCode.INVALID_INPUT


@pytest.mark.parametrize(
    ("node", "payload"),
    [
        ("MEMORY.WRITE", {"memories": [{"content": 1, "summary": "bad \ud800"}]}),
        ("MEMORY.WRITE", {"memories": [{"content": 1, "key": "k\udfff"}]}),
        ("MEMORY.WRITE", {"memories": [{"content": 1, "metadata": {"a": {1: "x"}}}]}),
        ("MEMORY.WRITE", {"memories": [{"content": object()}]}),
        ("MEMORY.QUERY", {"filter": {"source": "\ud800"}}),
        ("MEMORY.SEARCH", {"query": "x", "options": {"a": {1: 2}}}),
    ],
    ids=["surrogate-summary", "surrogate-key", "int-key", "object", "surrogate-filter", "options"],
)
async def test_odd_input_is_invalid_input_on_every_store(
    memory: MemoryHarness, node: str, payload: dict[str, Any]
) -> None:
    assert code_of(await memory.call(node, payload)) == ErrorCode.INVALID_INPUT
    assert await memory.all_records() == []
