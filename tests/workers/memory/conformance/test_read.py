"""MEMORY.GET and MEMORY.QUERY on every store: lookups by id and key, filters, ordering, and
cursors that page through every record exactly once."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from ditto import ErrorCode, create_ditto
from tests.workers.memory.conformance.helpers import code_of
from tests.workers.memory.conftest import STORE_FACTORIES, MemoryHarness, StoreEnv, requires
from workers.memory import MemoryDraft, MemoryStore, SqliteMemoryStore, create_memory_worker
from workers.memory.ports import KeywordSearch, UsageTracking
from workers.memory.stores.markdown import MarkdownMemoryStore

pytestmark = [pytest.mark.anyio, requires(MemoryStore)]


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


@requires(KeywordSearch, UsageTracking)  # SEARCH hits give the records usage
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


async def test_the_first_page_cursor_works_on_a_store_opened_lazily(
    memory: MemoryHarness, store_kind: str, store_env: StoreEnv, request: pytest.FixtureRequest
) -> None:
    # A second, never-opened store on the same data: its first call is a QUERY, so the cursor
    # key must be loaded before the first cursor is signed.
    await memory.write(*({"content": n} for n in range(3)))
    if store_kind == "sqlite":
        lazy: Any = SqliteMemoryStore(store_env.tmp_path / "memory.sqlite")
    elif store_kind == "postgres":
        from workers.memory.stores.postgres import PostgresMemoryStore

        space = request.getfixturevalue("postgres_space")
        lazy = PostgresMemoryStore.from_url(space.url, schema=space.schema)
    elif store_kind == "markdown":
        lazy = MarkdownMemoryStore(store_env.tmp_path / "memory")
    elif store_kind == "mysql":
        from workers.memory.stores.mysql import MysqlMemoryStore

        assert store_env.mysql is not None
        lazy = MysqlMemoryStore.from_url(store_env.mysql.url)
    else:  # nothing persistent: the same rule, trivially
        lazy = await STORE_FACTORIES[store_kind](store_env)
        await lazy.write([msgspec.convert({"content": n}, MemoryDraft) for n in range(3)], "create")
    try:
        async with create_ditto(workers=[create_memory_worker(lazy)]) as runtime:
            first = (await runtime.invoke("MEMORY.QUERY", {"limit": 2})).unwrap()
            second = await runtime.invoke("MEMORY.QUERY", {"limit": 2, "cursor": first.next_cursor})
        assert second.ok, second.error
        assert len(first.items) + len(second.unwrap().items) == 3
    finally:
        await lazy.aclose()
