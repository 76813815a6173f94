"""Provenance and validity on every store: trust, principal, expiry, ``as_of`` reads and the
statuses that share a key (write policy, handbook §9). Records of other statuses than
``active`` reach a store here by import, as a store-to-store copy brings them."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import msgspec
import pytest

from ditto import ErrorCode
from tests.workers.memory.conformance.helpers import code_of
from tests.workers.memory.conftest import MemoryHarness, requires
from workers.memory import MemoryStore, MemoryStoreError
from workers.memory.ports import KeywordSearch, RecordImport

pytestmark = [pytest.mark.anyio, requires(MemoryStore)]


async def test_provenance_fields_are_stored_and_read_back(memory: MemoryHarness) -> None:
    valid_from = memory.clock.now - timedelta(days=30)
    expires_at = memory.clock.now + timedelta(days=30)
    (written,) = await memory.write(
        {
            "key": "fact",
            "content": "the office is in Berlin",
            "trust": "verified",
            "valid_from": valid_from.isoformat(),
            "expires_at": expires_at.isoformat(),
        }
    )
    (read,) = (await memory.ok("MEMORY.GET", {"ids": [written.id]})).items
    assert read == written
    assert (read.trust, read.status, read.valid_from, read.valid_to, read.expires_at) == (
        "verified",
        "active",
        valid_from,
        None,
        expires_at,
    )


async def test_the_calling_principal_is_stamped_as_the_writer(memory: MemoryHarness) -> None:
    result = await memory.call(
        "MEMORY.WRITE", {"memories": [{"content": "x", "principal": "mallory"}]}, principal="ann"
    )
    assert result.ok, result.error
    assert result.output.items[0].principal == "ann"
    (local,) = await memory.write({"content": "y"})
    assert local.principal is None


async def test_ttl_sets_expires_at_from_the_write(memory: MemoryHarness) -> None:
    (item,) = await memory.write({"content": "short-lived", "ttl": 60})
    assert item.expires_at == item.created_at + timedelta(seconds=60)


async def test_expires_at_and_ttl_together_are_refused(memory: MemoryHarness) -> None:
    later = (memory.clock.now + timedelta(days=1)).isoformat()
    result = await memory.call(
        "MEMORY.WRITE", {"memories": [{"content": "x", "ttl": 5, "expires_at": later}]}
    )
    assert code_of(result) == ErrorCode.INVALID_INPUT
    assert await memory.all_records() == []


async def _expired_pair(memory: MemoryHarness) -> tuple[Any, Any]:
    kept, fading = await memory.write(
        {"key": "kept", "content": "lasting fact about apples"},
        {"key": "fading", "content": "passing fact about apples", "ttl": 60},
    )
    memory.clock.now += timedelta(seconds=61)
    return kept, fading


async def test_an_expired_record_is_hidden_from_get_and_query_unless_included(
    memory: MemoryHarness,
) -> None:
    kept, fading = await _expired_pair(memory)
    got = await memory.ok("MEMORY.GET", {"ids": [kept.id, fading.id], "keys": ["fading"]})
    assert [item.id for item in got.items] == [kept.id]
    with_expired = await memory.ok(
        "MEMORY.GET", {"ids": [fading.id], "keys": ["fading"], "include": ["expired"]}
    )
    assert [item.id for item in with_expired.items] == [fading.id]
    assert [item.id for item in await memory.all_records()] == [kept.id]
    everything = await memory.ok("MEMORY.QUERY", {"filter": {"include": ["expired"]}})
    assert {item.id for item in everything.items} == {kept.id, fading.id}


@requires(KeywordSearch)
async def test_an_expired_record_is_hidden_from_search_unless_included(
    memory: MemoryHarness,
) -> None:
    kept, fading = await _expired_pair(memory)
    hits = (await memory.ok("MEMORY.SEARCH", {"query": "apples"})).hits
    assert [hit.memory.id for hit in hits] == [kept.id]
    hits = (
        await memory.ok("MEMORY.SEARCH", {"query": "apples", "filter": {"include": ["expired"]}})
    ).hits
    assert {hit.memory.id for hit in hits} == {kept.id, fading.id}


async def test_a_write_to_an_expired_key_replaces_it_even_in_create_mode(
    memory: MemoryHarness,
) -> None:
    _, fading = await _expired_pair(memory)
    (renewed,) = await memory.write({"key": "fading", "content": "a new fact"})
    assert (renewed.id, renewed.version, renewed.expires_at) == (fading.id, 2, None)
    (again,) = await memory.write({"key": "fading", "content": "a new fact"})
    assert again == renewed  # now a live record: the same draft replays it


async def test_an_upsert_keeps_trust_and_expiry_unless_it_sets_them(memory: MemoryHarness) -> None:
    (first,) = await memory.write({"key": "k", "content": 1, "trust": "user", "ttl": 3600})
    (second,) = await memory.write({"key": "k", "content": 2}, mode="upsert")
    assert (second.trust, second.expires_at) == ("user", first.expires_at)
    (third,) = await memory.write({"key": "k", "content": 2, "trust": "verified"}, mode="upsert")
    assert (third.trust, third.version) == ("verified", 3)
    (replayed,) = await memory.write({"key": "k", "content": 2, "ttl": 10})
    assert replayed == third  # a ttl alone does not make a rerun a change


async def test_as_of_reads_what_was_valid_then(memory: MemoryHarness) -> None:
    start = memory.clock.now
    (old_fact,) = await memory.write(
        {"content": "lived in Paris", "valid_from": (start - timedelta(days=10)).isoformat()}
    )
    (new_fact,) = await memory.write({"content": "lives in Berlin"})
    before = (start - timedelta(days=20)).isoformat()
    between = (start - timedelta(days=5)).isoformat()
    later = (memory.clock.now + timedelta(seconds=1)).isoformat()
    for moment, expected in (
        (before, set()),
        (between, {old_fact.id}),
        (later, {old_fact.id, new_fact.id}),
    ):
        page = await memory.ok("MEMORY.QUERY", {"filter": {"as_of": moment}})
        assert {item.id for item in page.items} == expected, moment
        got = await memory.ok("MEMORY.GET", {"ids": [old_fact.id, new_fact.id], "as_of": moment})
        assert {item.id for item in got.items} == expected, moment


@requires(RecordImport)
async def test_records_of_other_statuses_share_the_active_records_key(
    memory: MemoryHarness,
) -> None:
    (current,) = await memory.write({"key": "city", "content": "lives in Berlin", "trust": "user"})
    start = current.created_at
    superseded = msgspec.structs.replace(
        current,
        id="0190c0de-0000-7000-8000-000000000001",
        content="lives in Paris",
        status="superseded",
        created_at=start - timedelta(days=100),
        updated_at=start - timedelta(days=100),
        valid_to=start,
    )
    contested = msgspec.structs.replace(
        current,
        id="0190c0de-0000-7000-8000-000000000002",
        content="lives in Rome",
        status="contested",
        trust="inferred",
    )
    assert await memory.store.restore([superseded, contested]) == 2
    by_key = await memory.ok("MEMORY.GET", {"keys": ["city"]})
    assert [item.id for item in by_key.items] == [current.id]
    every = await memory.ok(
        "MEMORY.GET", {"keys": ["city"], "include": ["superseded", "contested"]}
    )
    assert every.items[0].id == current.id
    assert {item.id for item in every.items} == {current.id, superseded.id, contested.id}
    assert [item.id for item in await memory.all_records()] == [current.id]
    back_then = (start - timedelta(days=1)).isoformat()
    page = await memory.ok("MEMORY.QUERY", {"filter": {"as_of": back_then}})
    assert [item.id for item in page.items] == [superseded.id]
    (rewritten,) = await memory.write({"key": "city", "content": "lives in Munich"}, mode="upsert")
    assert rewritten.id == current.id  # a write lands on the active record only
    stored = await memory.ok(
        "MEMORY.GET", {"ids": [superseded.id, contested.id], "include": ["superseded", "contested"]}
    )
    assert [item.content for item in stored.items] == ["lives in Paris", "lives in Rome"]


@requires(RecordImport)
async def test_a_second_active_record_under_a_key_is_refused(memory: MemoryHarness) -> None:
    (current,) = await memory.write({"key": "city", "content": "lives in Berlin"})
    rival = msgspec.structs.replace(current, id="0190c0de-0000-7000-8000-000000000003")
    with pytest.raises(MemoryStoreError) as raised:
        await memory.store.restore([rival])
    assert raised.value.code == ErrorCode.CONFLICT


async def test_expires_before_selects_what_expires_by_then(memory: MemoryHarness) -> None:
    soon, later, never = await memory.write(
        {"content": "soon", "ttl": 60}, {"content": "later", "ttl": 3600}, {"content": "never"}
    )
    cutoff = (memory.clock.now + timedelta(minutes=10)).isoformat()
    page = await memory.ok("MEMORY.QUERY", {"filter": {"expires_before": cutoff}})
    assert [item.id for item in page.items] == [soon.id]
    assert never.expires_at is None
    assert later.id not in {item.id for item in page.items}


async def test_hygiene_deletes_what_stayed_expired_past_the_grace(memory: MemoryHarness) -> None:
    from workers.memory import RetentionPolicy, run_hygiene

    gone, renewed, pinned, fresh = await memory.write(
        {"key": "gone", "content": "old note", "ttl": 60},
        {"key": "renewed", "content": "renewed note", "ttl": 60},
        {"key": "pinned", "content": "pinned note", "ttl": 60, "pinned": True},
        {"key": "fresh", "content": "fresh note", "ttl": 86_400 * 3},
    )
    memory.clock.now += timedelta(days=2)  # a day past the one-day grace
    policy = RetentionPolicy()
    planned = await run_hygiene(memory.store, policy, dry_run=True, clock=memory.clock)
    assert set(planned.expired) == {gone.id, renewed.id}
    await memory.write({"key": "renewed", "content": "renewed note", "ttl": 600})
    report = await run_hygiene(memory.store, policy, clock=memory.clock)
    assert report.expired == [gone.id]  # the renewed one has a new expiry: not due
    left = await memory.ok("MEMORY.QUERY", {"filter": {"include": ["expired"]}, "limit": 10})
    assert {item.id for item in left.items} == {renewed.id, pinned.id, fresh.id}


async def test_a_record_renewed_after_the_plan_is_not_deleted(memory: MemoryHarness) -> None:
    from workers.memory.maintenance.expiry import delete_expired, expired_before

    (note,) = await memory.write({"key": "note", "content": "a note", "ttl": 60})
    memory.clock.now += timedelta(days=2)
    moment = memory.clock.now - timedelta(days=1)
    planned = await expired_before(memory.store, moment)
    assert [item.id for item in planned] == [note.id]
    await memory.write({"key": "note", "content": "a note", "ttl": 600})  # renewed meanwhile
    deleted, left = await delete_expired(memory.store, planned, moment, 100)
    assert (deleted, left) == ([], [note.id])
