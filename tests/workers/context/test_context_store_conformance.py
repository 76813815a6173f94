"""Scoped CONTEXT behaviour, run against every store (a real Redis and the in-process one)."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from ditto import create_ditto
from tests.workers.context.conftest import TTL_MS, ContextHarness, queue_worker
from workers.context import ContextScope, ContextStateStore, StoredContext
from workers.context.contracts import Context, ContextItem
from workers.context.errors import ContextError

pytestmark = pytest.mark.anyio

SCOPE = {"session_id": "s1"}
GOAL = {"id": "goal", "content": "ship the store", "metadata": {"current_goal": True}}


def code_of(result: Any) -> str | None:
    return result.error.code if result.error is not None else None


async def test_only_a_load_with_sources_creates_state(context: ContextHarness) -> None:
    for node, payload in (
        ("CONTEXT.LOAD", {"scope": SCOPE}),
        ("CONTEXT.SELECT", {"scope": SCOPE, "purpose": "infer"}),
        ("CONTEXT.UPDATE", {"scope": SCOPE, "add": [GOAL]}),
        ("CONTEXT.COMPRESS", {"scope": SCOPE, "max_items": 1}),
    ):
        assert code_of(await context.call(node, payload)) == "CONTEXT_NOT_FOUND", node
    created = await context.ok("CONTEXT.LOAD", {"scope": SCOPE, "sources": [GOAL]})
    assert [item.id for item in created.items] == ["goal"]
    assert created.version
    read = await context.ok("CONTEXT.LOAD", {"scope": SCOPE})
    assert read == created


async def test_load_with_sources_replaces_the_whole_state(context: ContextHarness) -> None:
    first = await context.ok("CONTEXT.LOAD", {"scope": SCOPE, "sources": [GOAL]})
    second = await context.ok(
        "CONTEXT.LOAD", {"scope": SCOPE, "sources": [{"role": "user", "content": "hi"}]}
    )
    assert second.version != first.version
    assert [item.metadata["source_type"] for item in second.items] == ["message"]
    cleared = await context.ok("CONTEXT.LOAD", {"scope": SCOPE, "sources": []})
    assert cleared.items == []


async def test_scopes_are_isolated_by_their_full_tuple(context: ContextHarness) -> None:
    await context.ok("CONTEXT.LOAD", {"scope": SCOPE, "sources": [GOAL]})
    turn = {"session_id": "s1", "turn_id": "t1"}
    assert code_of(await context.call("CONTEXT.LOAD", {"scope": turn})) == "CONTEXT_NOT_FOUND"
    await context.ok("CONTEXT.LOAD", {"scope": turn, "sources": []})
    assert [i.id for i in (await context.ok("CONTEXT.LOAD", {"scope": SCOPE})).items] == ["goal"]


async def test_update_and_compress_write_a_new_version(context: ContextHarness) -> None:
    loaded = await context.ok("CONTEXT.LOAD", {"scope": SCOPE, "sources": [GOAL]})
    updated = await context.ok(
        "CONTEXT.UPDATE", {"scope": SCOPE, "add": [{"id": "evidence", "content": "logs"}]}
    )
    assert [item.id for item in updated.items] == ["goal", "evidence"]
    assert updated.version not in (None, loaded.version)
    compressed = await context.ok("CONTEXT.COMPRESS", {"scope": SCOPE, "max_items": 1})
    assert [item.id for item in compressed.items] == ["goal"]
    assert compressed.version != updated.version
    assert await context.ok("CONTEXT.LOAD", {"scope": SCOPE}) == compressed


async def test_select_reads_without_writing(context: ContextHarness) -> None:
    loaded = await context.ok("CONTEXT.LOAD", {"scope": SCOPE, "sources": [GOAL]})
    selection = await context.ok("CONTEXT.SELECT", {"scope": SCOPE, "purpose": "infer", "limit": 1})
    assert selection.selected_item_ids == ["goal"]
    assert selection.context.version == loaded.version
    assert (await context.ok("CONTEXT.LOAD", {"scope": SCOPE})).version == loaded.version


async def test_expected_version_is_honoured(context: ContextHarness) -> None:
    loaded = await context.ok("CONTEXT.LOAD", {"scope": SCOPE, "sources": [GOAL]})
    stale = {"scope": SCOPE, "add": [{"id": "x", "content": 1}], "expected_version": "nope"}
    assert code_of(await context.call("CONTEXT.UPDATE", stale)) == "STATE_CONFLICT"
    fresh = {**stale, "expected_version": loaded.version}
    assert (await context.ok("CONTEXT.UPDATE", fresh)).version != loaded.version
    again = await context.call("CONTEXT.UPDATE", fresh)  # the version moved on
    assert code_of(again) == "STATE_CONFLICT"
    read_only = await context.call("CONTEXT.LOAD", {"scope": SCOPE, "expected_version": "nope"})
    assert code_of(read_only) == "STATE_CONFLICT"


async def test_state_expires_after_its_ttl(context: ContextHarness) -> None:
    loaded = await context.ok("CONTEXT.LOAD", {"scope": SCOPE, "sources": [GOAL]})
    await context.expire()
    assert code_of(await context.call("CONTEXT.LOAD", {"scope": SCOPE})) == "CONTEXT_NOT_FOUND"
    stale = {"scope": SCOPE, "add": [], "expected_version": loaded.version}
    assert code_of(await context.call("CONTEXT.UPDATE", stale)) == "STATE_CONFLICT"
    recreated = await context.ok("CONTEXT.LOAD", {"scope": SCOPE, "sources": []})
    assert recreated.version != loaded.version  # a fresh version: no ABA after expiry


async def test_writes_refresh_the_ttl_and_reads_do_not(context: ContextHarness) -> None:
    await context.ok("CONTEXT.LOAD", {"scope": SCOPE, "sources": [GOAL]})
    await context.advance(TTL_MS / 2)
    before = await context.pttl(SCOPE)
    assert before is not None
    assert before <= TTL_MS / 2 + 5
    await context.ok("CONTEXT.LOAD", {"scope": SCOPE})
    await context.ok("CONTEXT.SELECT", {"scope": SCOPE, "purpose": "infer"})
    after_reads = await context.pttl(SCOPE)
    assert after_reads is not None
    assert after_reads <= before
    await context.ok("CONTEXT.UPDATE", {"scope": SCOPE, "add": [{"id": "e", "content": 1}]})
    after_write = await context.pttl(SCOPE)
    assert after_write is not None
    assert after_write > TTL_MS * 0.75


class _Barrier:
    """Holds every reader until ``parties`` of them have read."""

    def __init__(self, parties: int) -> None:
        self.parties = parties
        self.arrived = 0
        self.all_in = anyio.Event()

    async def wait(self) -> None:
        self.arrived += 1
        if self.arrived >= self.parties:
            self.all_in.set()
        await self.all_in.wait()


def with_read_barrier(store: ContextStateStore, barrier: _Barrier) -> ContextStateStore:
    """The same store, whose reads wait for each other, so both writers read one version."""
    real_get = store.get

    async def get(scope: ContextScope) -> StoredContext | None:
        stored = await real_get(scope)
        await barrier.wait()
        return stored

    store.get = get  # type: ignore[method-assign]
    return store


async def test_two_concurrent_updates_give_one_success_and_one_conflict(
    context: ContextHarness,
) -> None:
    await context.ok("CONTEXT.LOAD", {"scope": SCOPE, "sources": [GOAL]})
    with_read_barrier(context.store, _Barrier(2))
    results: list[Any] = []

    async def update(item_id: str) -> None:
        payload = {"scope": SCOPE, "add": [{"id": item_id, "content": item_id}]}
        results.append(await context.call("CONTEXT.UPDATE", payload))

    async with anyio.create_task_group() as group:
        group.start_soon(update, "a")
        group.start_soon(update, "b")
    assert sorted(result.status for result in results) == ["failed", "success"]
    assert [code_of(result) for result in results if not result.ok] == ["STATE_CONFLICT"]


async def concurrent_updates(runtime: Any, count: int) -> list[Any]:
    """``count`` UPDATEs of SCOPE at once, each adding its own item."""
    results: list[Any] = []

    async def update(n: int) -> None:
        payload = {"scope": SCOPE, "add": [{"id": f"i{n}", "content": n}]}
        results.append(await runtime.invoke("CONTEXT.UPDATE", payload))

    async with anyio.create_task_group() as group:
        for n in range(count):
            group.start_soon(update, n)
    return results


async def test_a_queue_serialises_updates_of_one_scope(context: ContextHarness) -> None:
    async with create_ditto(workers=[queue_worker(context.store)]) as runtime:
        await runtime.invoke("CONTEXT.LOAD", {"scope": SCOPE, "sources": []})
        results = await concurrent_updates(runtime, 30)
        final = (await runtime.invoke("CONTEXT.LOAD", {"scope": SCOPE})).unwrap()
    assert all(result.ok for result in results)
    assert len(final.items) == 30  # no lost update


async def test_a_full_queue_refuses_at_once(context: ContextHarness) -> None:
    async with create_ditto(workers=[queue_worker(context.store, max_pending=1)]) as runtime:
        await runtime.invoke("CONTEXT.LOAD", {"scope": SCOPE, "sources": []})
        results = await concurrent_updates(runtime, 3)
    codes = sorted(code_of(result) or "ok" for result in results)
    assert codes.count("QUEUE_FULL") >= 1
    assert "ok" in codes
    full = next(result for result in results if code_of(result) == "QUEUE_FULL")
    assert full.error.retryable


async def test_scope_rules(context: ContextHarness) -> None:
    for payload in (
        {"scope": {}, "sources": []},
        {"scope": {"session_id": ""}, "sources": []},
        {"scope": {"user": "x"}, "sources": []},
    ):
        assert code_of(await context.call("CONTEXT.LOAD", payload)) == "INVALID_INPUT", payload
    both = {"scope": SCOPE, "context": {"items": []}, "purpose": "infer"}
    assert code_of(await context.call("CONTEXT.SELECT", both)) == "INVALID_INPUT"


async def test_state_is_a_snapshot(context: ContextHarness) -> None:
    source = {"id": "doc", "content": {"text": "original"}}
    await context.ok("CONTEXT.LOAD", {"scope": SCOPE, "sources": [source]})
    source["content"]["text"] = "mutated by the caller"  # type: ignore[index]
    read = await context.ok("CONTEXT.LOAD", {"scope": SCOPE})
    assert read.items[0].content == {"text": "original"}
    assert isinstance(read, Context)


async def test_a_context_that_cannot_be_stored_leaves_the_stored_one(
    context: ContextHarness,
) -> None:
    store = context.store
    assert store is not None
    scope = ContextScope(session_id="unstorable")
    kept = await store.compare_and_set(scope, None, Context([ContextItem("a", "fine")]))
    with pytest.raises(ContextError) as raised:
        await store.compare_and_set(scope, kept.version, Context([ContextItem("b", "\ud800")]))
    assert raised.value.code == "INVALID_INPUT"
    stored = await store.get(scope)
    assert stored is not None
    assert (stored.version, stored.context.items) == (kept.version, kept.context.items)
