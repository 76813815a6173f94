"""MEMORY.UPDATE and MEMORY.DELETE on every store: partial patches, versions and guards, all or
nothing per call, and deletes that say what they really deleted."""

from __future__ import annotations

import pytest

from ditto import ErrorCode
from tests.workers.memory.conformance.helpers import code_of
from tests.workers.memory.conftest import MemoryHarness, requires
from workers.memory import MemoryStore
from workers.memory.ports import KeywordSearch

pytestmark = [pytest.mark.anyio, requires(MemoryStore)]


# ------------------------------------------------------------------------------------- UPDATE


async def test_update_is_partial_and_metadata_replaces(memory: MemoryHarness) -> None:
    (item,) = await memory.write(
        {"key": "k", "content": "c", "summary": "s", "tags": ["t"], "metadata": {"a": 1, "b": 2}}
    )
    (updated,) = (
        await memory.ok("MEMORY.UPDATE", {"updates": [{"id": item.id, "metadata": {"c": 3}}]})
    ).items
    assert updated.metadata == {"c": 3}
    assert (updated.content, updated.summary, updated.tags, updated.key) == ("c", "s", ["t"], "k")
    assert updated.version == 2
    assert updated.updated_at > item.updated_at
    assert updated.created_at == item.created_at
    (nulled,) = (
        await memory.ok("MEMORY.UPDATE", {"updates": [{"id": item.id, "content": None}]})
    ).items
    assert nulled.content is None
    assert nulled.version == 3


async def test_an_edit_revives_an_archived_record_and_archiving_alone_does_not(
    memory: MemoryHarness,
) -> None:
    (item,) = await memory.write({"key": "k", "content": "v1"})

    async def update(patch: dict[str, object]) -> object:
        (updated,) = (
            await memory.ok("MEMORY.UPDATE", {"updates": [{"id": item.id, **patch}]})
        ).items
        return updated.archived_at

    assert await update({"archived": True}) is not None
    assert await update({"content": "v2"}) is None
    assert [i.content for i in (await memory.ok("MEMORY.GET", {"keys": ["k"]})).items] == ["v2"]
    assert await update({"archived": True}) is not None
    assert await update({"content": "v3", "archived": True}) is not None  # archived as asked
    assert await update({"archived": False}) is None


async def test_update_of_a_missing_id_changes_nothing(memory: MemoryHarness) -> None:
    (item,) = await memory.write({"content": "before"})
    result = await memory.call(
        "MEMORY.UPDATE",
        {"updates": [{"id": item.id, "content": "after"}, {"id": "gone", "content": 1}]},
    )
    assert code_of(result) == ErrorCode.NOT_FOUND
    assert (await memory.all_records())[0].content == "before"


async def test_a_stale_expected_version_is_a_conflict_and_changes_nothing(
    memory: MemoryHarness,
) -> None:
    a, b = await memory.write({"content": "a"}, {"content": "b"})
    await memory.ok(
        "MEMORY.UPDATE", {"updates": [{"id": a.id, "content": "a2", "expected_version": 1}]}
    )
    result = await memory.call(
        "MEMORY.UPDATE",
        {
            "updates": [
                {"id": b.id, "content": "b2"},
                {"id": a.id, "content": "a3", "expected_version": 1},
            ]
        },
    )
    assert code_of(result) == ErrorCode.CONFLICT
    assert sorted(r.content for r in await memory.all_records()) == ["a2", "b"]


async def test_update_input_rules(memory: MemoryHarness) -> None:
    (item,) = await memory.write({"key": "k", "content": 1})
    for bad in (
        {"updates": [{"id": item.id, "key": "other"}]},
        {"updates": [{"id": item.id}]},
        {"updates": [{"id": item.id, "content": 2}, {"id": item.id, "content": 3}]},
        {"updates": [{"id": item.id, "content": float("nan")}]},
        {"updates": [{"id": "", "content": 1}]},
    ):
        assert code_of(await memory.call("MEMORY.UPDATE", bad)) == ErrorCode.INVALID_INPUT, bad
    assert (await memory.all_records())[0].version == 1
    assert (await memory.ok("MEMORY.UPDATE", {"updates": []})).items == []


# ------------------------------------------------------------------------------------- DELETE


@requires(KeywordSearch)
async def test_delete_returns_what_it_really_deleted(memory: MemoryHarness) -> None:
    a, b = await memory.write({"key": "a", "content": "espresso"}, {"content": "b"})
    output = await memory.ok("MEMORY.DELETE", {"ids": [a.id, "missing", a.id]})
    assert output.deleted == [a.id]
    assert (await memory.ok("MEMORY.DELETE", {"ids": [a.id]})).deleted == []
    assert [r.id for r in await memory.all_records()] == [b.id]
    assert (await memory.ok("MEMORY.SEARCH", {"query": "espresso"})).hits == []
    (again,) = await memory.write({"key": "a", "content": "new"})  # the key is free again
    assert again.id != a.id


async def test_delete_by_key_in_a_namespace(memory: MemoryHarness) -> None:
    a, b, _ = await memory.write(
        {"key": "tz", "content": "UTC+8"},
        {"key": "tz", "namespace": "other", "content": "UTC-5"},
        {"key": "lang", "content": "en"},
    )
    output = await memory.ok("MEMORY.DELETE", {"keys": ["tz", "missing", "tz"]})
    assert output.deleted == [a.id]
    assert (await memory.ok("MEMORY.DELETE", {"keys": ["tz"]})).deleted == []  # already gone
    other = await memory.ok("MEMORY.DELETE", {"keys": ["tz"], "namespace": "other"})
    assert other.deleted == [b.id]
    assert [item.key for item in await memory.all_records()] == ["lang"]


async def test_delete_by_key_never_reaches_a_record_the_caller_cannot_see(
    memory: MemoryHarness,
) -> None:
    from ditto import create_ditto
    from workers.memory import AccessPolicy, create_memory_worker

    worker = create_memory_worker(memory.store, access=AccessPolicy(mode="enforce"))
    async with create_ditto(workers=[worker]) as runtime:
        written = await runtime.invoke(
            "MEMORY.WRITE",
            {"memories": [{"key": "diary", "content": "secret", "visibility": "private"}]},
            principal="alice",
        )
        (diary,) = written.unwrap().items
        by_bob = await runtime.invoke("MEMORY.DELETE", {"keys": ["diary"]}, principal="bob")
        assert by_bob.unwrap().deleted == []  # as if no record held the key
        by_alice = await runtime.invoke("MEMORY.DELETE", {"keys": ["diary"]}, principal="alice")
        assert by_alice.unwrap().deleted == [diary.id]
