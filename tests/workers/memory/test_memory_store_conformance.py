"""The MEMORY contract, run through the public API against every store in ``STORE_FACTORIES``."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import anyio
import msgspec
import pytest

from ditto import ErrorCode
from tests.workers.memory.conftest import MemoryHarness
from workers.memory.ports import KeywordSearch
from workers.memory import InProcessMemoryStore, MemoryDraft, MemoryErrorCode

pytestmark = pytest.mark.anyio


def code_of(result: Any) -> str | None:
    return result.error.code if result.error is not None else None


# ------------------------------------------------------------------------------------- WRITE


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


# ------------------------------------------------------------------------------------- GET


async def test_get_returns_ids_then_keys_in_request_order_each_once(memory: MemoryHarness) -> None:
    a, _, c = await memory.write(
        {"key": "a", "content": 1}, {"key": "b", "content": 2}, {"key": "c", "content": 3}
    )
    output = await memory.ok(
        "MEMORY.GET", {"ids": [c.id, "missing", a.id, c.id], "keys": ["b", "a", "nope"]}
    )
    assert [item.key for item in output.items] == ["c", "a", "b"]


async def test_get_looks_keys_up_in_the_given_namespace(memory: MemoryHarness) -> None:
    await memory.write({"key": "k", "namespace": "alice", "content": "alice's"})
    default = await memory.ok("MEMORY.GET", {"keys": ["k"]})
    alice = await memory.ok("MEMORY.GET", {"keys": ["k"], "namespace": "alice"})
    assert default.items == []
    assert [item.content for item in alice.items] == ["alice's"]


async def test_get_with_nothing_asked_returns_nothing(memory: MemoryHarness) -> None:
    assert (await memory.ok("MEMORY.GET", {})).items == []


# ------------------------------------------------------------------------------------- QUERY


async def seed_for_filters(memory: MemoryHarness) -> list[Any]:
    return await memory.write(
        {
            "key": "user:1",
            "namespace": "n1",
            "content": "a",
            "category": "daily",
            "tags": ["x", "y"],
            "source": "chat",
            "metadata": {"kind": "pref", "n": 1, "flag": True},
        },
        {
            "key": "user:2",
            "namespace": "n1",
            "content": "b",
            "tags": ["y"],
            "metadata": {"kind": "fact", "n": 1.0, "flag": 1},
        },
        {
            "key": "task:1",
            "namespace": "n2",
            "content": "c",
            "tags": ["z"],
            "source": "tool",
            "metadata": {"kind": "pref", "n": "1", "flag": None},
        },
        {"content": "d", "namespace": "n1", "category": "conversation"},
    )


@pytest.mark.parametrize(
    ("filter", "expected"),
    [
        ({}, ["a", "b", "c", "d"]),
        ({"namespace": "n1"}, ["a", "b", "d"]),
        ({"category": "daily"}, ["a"]),
        ({"key": "user:2"}, ["b"]),
        ({"key_prefix": "user:"}, ["a", "b"]),
        ({"key_prefix": "USER:"}, []),
        ({"tags_any": ["x", "z"]}, ["a", "c"]),
        ({"tags_all": ["x", "y"]}, ["a"]),
        ({"tags_all": ["y"]}, ["a", "b"]),
        ({"source": "tool"}, ["c"]),
        ({"metadata": {"kind": "pref"}}, ["a", "c"]),
        ({"metadata": {"n": 1}}, ["a", "b"]),  # numbers compare by value
        ({"metadata": {"n": "1"}}, ["c"]),
        ({"metadata": {"flag": True}}, ["a"]),  # JSON true is not 1
        ({"metadata": {"flag": None}}, ["c"]),
        ({"metadata": {"kind": "pref", "n": 1}}, ["a"]),
        ({"namespace": "n1", "tags_any": ["y"], "metadata": {"kind": "fact"}}, ["b"]),
    ],
)
async def test_query_filters(
    memory: MemoryHarness, filter: dict[str, Any], expected: list[str]
) -> None:
    await seed_for_filters(memory)
    output = await memory.ok("MEMORY.QUERY", {"filter": filter})
    assert sorted(item.content for item in output.items) == expected


async def test_query_time_filters(memory: MemoryHarness) -> None:
    # One batch shares one timestamp, so write the three one at a time.
    (a,), (b,), (c,) = [await memory.write({"content": name}) for name in "abc"]
    await memory.ok("MEMORY.UPDATE", {"updates": [{"id": a.id, "summary": "touched"}]})
    after_b = {"filter": {"created_after": b.created_at.isoformat()}}
    before_b = {"filter": {"created_before": b.created_at.isoformat()}}
    updated_late = {"filter": {"updated_after": c.updated_at.isoformat()}}
    assert [i.content for i in (await memory.ok("MEMORY.QUERY", after_b)).items] == ["c"]
    assert [i.content for i in (await memory.ok("MEMORY.QUERY", before_b)).items] == ["a"]
    assert [i.content for i in (await memory.ok("MEMORY.QUERY", updated_late)).items] == ["a"]


async def test_unknown_filter_fields_and_naive_times_are_invalid(memory: MemoryHarness) -> None:
    for bad in (
        {"filter": {"colour": "red"}},
        {"filter": {"created_after": "2026-01-01T00:00:00"}},
        {"filter": {"metadata": {"a.b": 1}}},
        {"filter": {"metadata": {"a": [1]}}},
        {"order_by": {"field": "content"}},
        {"limit": 0},
        {"limit": 10_001},
        {"limit": True},
    ):
        assert code_of(await memory.call("MEMORY.QUERY", bad)) == ErrorCode.INVALID_INPUT, bad


@pytest.mark.parametrize("field", ["created_at", "updated_at", "last_used_at", "usage_count"])
@pytest.mark.parametrize("direction", ["asc", "desc"])
async def test_query_orders_by_field_with_ties_broken_by_id(
    memory: MemoryHarness, field: str, direction: str
) -> None:
    items = await memory.write(*({"content": f"word{n} shared"} for n in range(6)))
    await memory.ok("MEMORY.SEARCH", {"query": "word1 word2", "limit": 2})
    await memory.ok("MEMORY.SEARCH", {"query": "word2"})
    await memory.ok("MEMORY.UPDATE", {"updates": [{"id": items[0].id, "summary": "u"}]})
    records = await memory.all_records()

    def sort_key(item: Any) -> tuple[Any, str]:
        value = getattr(item, field)
        if field == "last_used_at":
            value = -1 if value is None else value.timestamp()
        elif field != "usage_count":
            value = value.timestamp()
        return value, item.id

    expected = [i.id for i in sorted(records, key=sort_key, reverse=direction == "desc")]
    output = await memory.ok("MEMORY.QUERY", {"order_by": {"field": field, "direction": direction}})
    assert [item.id for item in output.items] == expected


async def test_query_pages_cover_every_record_exactly_once(memory: MemoryHarness) -> None:
    written = await memory.write(*({"content": n} for n in range(23)))
    seen: list[str] = []
    cursor = None
    pages = 0
    while True:
        request: dict[str, Any] = {"limit": 5, "order_by": {"direction": "desc"}}
        if cursor:
            request["cursor"] = cursor
        page = await memory.ok("MEMORY.QUERY", request)
        seen.extend(item.id for item in page.items)
        pages += 1
        cursor = page.next_cursor
        if cursor is None:
            break
    assert pages == 5
    assert sorted(seen) == sorted(item.id for item in written)
    assert len(seen) == len(set(seen))


async def test_pages_neither_skip_nor_repeat_under_concurrent_inserts(
    memory: MemoryHarness,
) -> None:
    original = await memory.write(*({"content": n} for n in range(12)))
    seen: list[str] = []
    cursor = None
    while True:
        request: dict[str, Any] = {"limit": 4}
        if cursor:
            request["cursor"] = cursor
        page = await memory.ok("MEMORY.QUERY", request)
        seen.extend(item.id for item in page.items)
        await memory.write({"content": f"inserted while paging {len(seen)}"})
        cursor = page.next_cursor
        if cursor is None:
            break
    assert len(seen) == len(set(seen))
    assert {item.id for item in original} <= set(seen)


async def test_a_cursor_is_bound_to_its_filter_and_order(memory: MemoryHarness) -> None:
    await memory.write(*({"content": n, "namespace": "n"} for n in range(3)))
    page = await memory.ok("MEMORY.QUERY", {"limit": 1, "filter": {"namespace": "n"}})
    cursor = page.next_cursor
    assert cursor
    other_filter = await memory.call("MEMORY.QUERY", {"limit": 1, "cursor": cursor})
    other_order = await memory.call(
        "MEMORY.QUERY",
        {
            "limit": 1,
            "cursor": cursor,
            "filter": {"namespace": "n"},
            "order_by": {"direction": "desc"},
        },
    )
    assert code_of(other_filter) == ErrorCode.INVALID_INPUT
    assert code_of(other_order) == ErrorCode.INVALID_INPUT


@pytest.mark.parametrize(
    "mangle",
    [
        lambda c: c[:-2] + ("A" if c[-2] != "A" else "B") + c[-1],
        lambda c: "x" + c,
        lambda c: "!!!",
        lambda c: c[:10],
    ],
)
async def test_a_tampered_cursor_is_invalid_input(memory: MemoryHarness, mangle: Any) -> None:
    await memory.write(*({"content": n} for n in range(3)))
    page = await memory.ok("MEMORY.QUERY", {"limit": 1})
    result = await memory.call("MEMORY.QUERY", {"limit": 1, "cursor": mangle(page.next_cursor)})
    assert code_of(result) == ErrorCode.INVALID_INPUT


async def test_query_default_limit_and_last_page_has_no_cursor(memory: MemoryHarness) -> None:
    await memory.write(*({"content": n} for n in range(3)))
    page = await memory.ok("MEMORY.QUERY", {})
    assert len(page.items) == 3
    assert page.next_cursor is None


# ------------------------------------------------------------------------------------- SEARCH


async def test_keyword_search_matches_content_summary_and_key(memory: MemoryHarness) -> None:
    await memory.write(
        {"content": {"note": "the espresso machine is broken"}},
        {"content": 1, "summary": "quarterly espresso budget"},
        {"key": "espresso-supplier", "content": "call them monday"},
        {"content": "tea is fine"},
    )
    hits = (await memory.ok("MEMORY.SEARCH", {"query": "espresso"})).hits
    assert len(hits) == 3
    assert all(hit.score is not None for hit in hits)
    assert "tea is fine" not in [hit.memory.content for hit in hits]


async def test_keyword_search_has_or_semantics_and_ranks_better_matches_first(
    memory: MemoryHarness,
) -> None:
    await memory.write(
        {"content": "redis keeps the working context"},
        {"content": "redis context expires, restore history from memory"},
        {"content": "postgres stores durable memory"},
        *({"content": f"filler document number {n}"} for n in range(20)),
    )
    hits = (await memory.ok("MEMORY.SEARCH", {"query": "How does Redis context expire?"})).hits
    contents = [hit.memory.content for hit in hits]
    assert contents[0] == "redis context expires, restore history from memory"
    assert "redis keeps the working context" in contents
    assert "postgres stores durable memory" not in contents
    scores = [hit.score for hit in hits]
    assert scores == sorted(scores, reverse=True)


async def test_stemming_finds_other_word_forms(memory: MemoryHarness) -> None:
    await memory.write({"content": "three records were stored"})
    hits = (await memory.ok("MEMORY.SEARCH", {"query": "record"})).hits
    assert len(hits) == 1


async def test_search_filters_apply_before_the_limit(memory: MemoryHarness) -> None:
    await memory.write(*({"content": f"shared topic {n}", "namespace": "other"} for n in range(30)))
    await memory.write(*({"content": f"shared topic {n}", "namespace": "mine"} for n in range(4)))
    hits = (
        await memory.ok(
            "MEMORY.SEARCH", {"query": "shared topic", "filter": {"namespace": "mine"}, "limit": 3}
        )
    ).hits
    assert len(hits) == 3
    assert {hit.memory.namespace for hit in hits} == {"mine"}


async def test_search_limit_default_and_bounds(memory: MemoryHarness) -> None:
    await memory.write(*({"content": f"common word {n}"} for n in range(15)))
    assert len((await memory.ok("MEMORY.SEARCH", {"query": "common"})).hits) == 10
    assert (
        code_of(await memory.call("MEMORY.SEARCH", {"query": "x", "limit": 0})) == "INVALID_INPUT"
    )


@pytest.mark.parametrize(
    "query",
    [
        'espresso" OR "tea',
        "NEAR(espresso tea)",
        "espresso*",
        "^espresso",
        "key:espresso",
        "espresso AND NOT tea",
        "(((",
        '"',
        "''; DROP TABLE memories; --",
        "\x00espresso",
        "a" * 10_000,
        "",
        "   ",
        "!!!",
        "the of and",
    ],
)
async def test_any_query_text_is_safe(memory: MemoryHarness, query: str) -> None:
    await memory.write({"content": "espresso and tea"}, {"content": "unrelated"})
    result = await memory.call("MEMORY.SEARCH", {"query": query})
    assert result.ok, result.error
    assert len(await memory.all_records()) == 2


async def test_search_rejects_what_the_store_cannot_do(memory: MemoryHarness) -> None:
    for bad in (
        {"query": 42},
        {"query": "x", "strategy": "vector-magic"},
        {"query": "x", "options": {"fuzzy": True}},
    ):
        assert code_of(await memory.call("MEMORY.SEARCH", bad)) == ErrorCode.INVALID_INPUT, bad


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


async def test_hostile_content_is_stored_and_found(memory: MemoryHarness) -> None:
    hostile = [
        "quote \" and ' apostrophe OR NOT NEAR(a b) * ^ col:term",
        "nul\x00byte inside espresso",
        "emoji 😀 and ünïcödé espresso",
        "x" * (1 << 20) + " espresso",
    ]
    written = await memory.write(*({"content": text} for text in hostile))
    stored = {item.id: item.content for item in await memory.all_records()}
    assert [stored[item.id] for item in written] == hostile
    found = {
        hit.memory.content for hit in (await memory.ok("MEMORY.SEARCH", {"query": "espresso"})).hits
    }
    assert set(hostile[1:]) <= found
    quoted = await memory.ok("MEMORY.SEARCH", {"query": "apostrophe"})
    assert [hit.memory.content for hit in quoted.hits] == [hostile[0]]


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


async def test_updated_text_is_searchable_and_old_text_is_not(memory: MemoryHarness) -> None:
    (item,) = await memory.write({"content": "espresso"})
    await memory.ok("MEMORY.UPDATE", {"updates": [{"id": item.id, "content": "matcha"}]})
    assert (await memory.ok("MEMORY.SEARCH", {"query": "espresso"})).hits == []
    assert len((await memory.ok("MEMORY.SEARCH", {"query": "matcha"})).hits) == 1


# ------------------------------------------------------------------------------------- DELETE


async def test_delete_returns_what_it_really_deleted(memory: MemoryHarness) -> None:
    a, b = await memory.write({"key": "a", "content": "espresso"}, {"content": "b"})
    output = await memory.ok("MEMORY.DELETE", {"ids": [a.id, "missing", a.id]})
    assert output.deleted == [a.id]
    assert (await memory.ok("MEMORY.DELETE", {"ids": [a.id]})).deleted == []
    assert [r.id for r in await memory.all_records()] == [b.id]
    assert (await memory.ok("MEMORY.SEARCH", {"query": "espresso"})).hits == []
    (again,) = await memory.write({"key": "a", "content": "new"})  # the key is free again
    assert again.id != a.id


# ------------------------------------------------------------------------------------- misc


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


async def test_search_unavailable_is_reported(memory: MemoryHarness) -> None:
    assert isinstance(memory.store, KeywordSearch)
    assert MemoryErrorCode.SEARCH_UNAVAILABLE == "SEARCH_UNAVAILABLE"


async def test_a_word_is_found_right_after_a_search_that_missed_it(memory: MemoryHarness) -> None:
    await memory.write({"content": "espresso"})
    assert (await memory.ok("MEMORY.SEARCH", {"query": "zebra espresso"})).hits
    assert [
        h.memory.content for h in (await memory.ok("MEMORY.SEARCH", {"query": "zebra"})).hits
    ] == []
    await memory.write({"content": "a zebra crossing"})
    hits = (await memory.ok("MEMORY.SEARCH", {"query": "zebra"})).hits
    assert [hit.memory.content for hit in hits] == ["a zebra crossing"]


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


async def test_the_first_page_cursor_works_on_a_store_opened_lazily(
    memory: MemoryHarness, store_kind: str, tmp_path: Any, request: pytest.FixtureRequest
) -> None:
    # A second, never-opened store on the same data: its first call is a QUERY, so the cursor
    # key must be loaded before the first cursor is signed.
    await memory.write(*({"content": n} for n in range(3)))
    from ditto import create_ditto
    from workers.memory import InProcessMemoryStore, SqliteMemoryStore, create_memory_worker

    if store_kind == "inprocess":
        lazy: Any = InProcessMemoryStore()  # nothing persistent: the same rule, trivially
        await lazy.write([msgspec.convert({"content": n}, MemoryDraft) for n in range(3)], "create")
    elif store_kind == "sqlite":
        lazy = SqliteMemoryStore(tmp_path / "memory.sqlite")
    else:
        from workers.memory.stores.postgres import PostgresMemoryStore

        space = request.getfixturevalue("postgres_space")
        lazy = PostgresMemoryStore.from_url(space.url, schema=space.schema)
    try:
        async with create_ditto(workers=[create_memory_worker(lazy)]) as runtime:
            first = (await runtime.invoke("MEMORY.QUERY", {"limit": 2})).unwrap()
            second = await runtime.invoke("MEMORY.QUERY", {"limit": 2, "cursor": first.next_cursor})
        assert second.ok, second.error
        assert len(first.items) + len(second.unwrap().items) == 3
    finally:
        await lazy.aclose()


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


# ------------------------------------------------------------------------------------- history


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


# ------------------------------------------------------------------------------------- restore


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


async def test_restore_refuses_a_key_held_by_another_record(memory: MemoryHarness) -> None:
    (mine,) = await memory.write({"key": "k", "content": "mine"})
    theirs = msgspec.structs.replace(mine, id="someone-else", content="theirs")
    with pytest.raises(Exception, match="belongs to another record"):
        await memory.store.restore([theirs])
    assert [record.content for record in await memory.all_records()] == ["mine"]
