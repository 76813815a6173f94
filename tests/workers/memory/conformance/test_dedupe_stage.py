"""The write policy's dedupe stage on every store: a fact stated again — exactly, or in nearly
the same words — is not stored again; the write returns the record that holds it. A changed
number, another principal's private record or a record that expired is never a duplicate."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

import pytest

from ditto import create_ditto
from tests.workers.memory.conftest import MemoryHarness, OpenStore, StoreEnv, requires
from workers.memory import (
    AccessPolicy,
    MemoryDraft,
    MemoryPatch,
    MemoryStore,
    create_memory_worker,
)
from workers.memory.model.merges import MAX_SOURCES
from workers.memory.model.planning import WriteRules
from workers.memory.policy.config import StageMode, StageModes, WritePolicy
from workers.memory.ports import HistoryLog, UsageTracking

pytestmark = [pytest.mark.anyio, requires(MemoryStore)]


async def _harness(
    open_store: OpenStore, store_env: StoreEnv, mode: StageMode, *, acl: bool = False
) -> MemoryHarness:
    store = await open_store()
    worker = create_memory_worker(
        store,
        clock=store_env.clock,
        policy=WritePolicy(StageModes(dedupe=mode)),
        access=AccessPolicy("enforce") if acl else None,
    )
    return MemoryHarness(create_ditto(workers=[worker]), store, store_env.clock)


@pytest.fixture
async def deduping(open_store: OpenStore, store_env: StoreEnv) -> AsyncIterator[MemoryHarness]:
    memory = await _harness(open_store, store_env, "enforce")
    async with memory.runtime:
        yield memory


async def _write(memory: MemoryHarness, *contents: str, principal: str | None = None) -> Any:
    result = await memory.call(
        "MEMORY.WRITE", {"memories": [{"content": text} for text in contents]}, principal=principal
    )
    assert result.ok, result.error
    return result.output


async def test_the_same_fact_again_is_not_stored_again(deduping: MemoryHarness) -> None:
    first = await _write(deduping, "The user prefers dark mode in every editor.")
    again = await _write(deduping, "the user prefers   DARK mode in every editor")
    near = await _write(deduping, "The user really prefers dark mode in every editor.")
    (original,) = first.items
    for output in (again, near):
        (outcome,) = output.outcomes
        assert (outcome.outcome, outcome.duplicate_of) == (["deduplicated"], original.id)
        assert output.items[0].id == original.id
    assert [item.id for item in await deduping.all_records()] == [original.id]


@requires(UsageTracking)
async def test_a_duplicate_counts_as_a_use(deduping: MemoryHarness) -> None:
    await _write(deduping, "Standup is at 9:30 every weekday.")
    await _write(deduping, "standup is at 9:30 every weekday")
    (item,) = await deduping.all_records()
    assert item.usage_count == 1


async def test_a_changed_number_is_a_new_fact(deduping: MemoryHarness) -> None:
    await _write(deduping, "Standup is at 9:30 every weekday.")
    changed = await _write(deduping, "Standup is at 10:30 every weekday.")
    assert changed.outcomes[0].outcome == ["created"]
    assert len(await deduping.all_records()) == 2


async def test_repeats_within_one_batch_are_stored_once(deduping: MemoryHarness) -> None:
    output = await _write(
        deduping,
        "Alice owns the billing service.",
        "alice owns the billing service",
        "Bob owns search.",
    )
    items = output.items
    assert items[0].id == items[1].id != items[2].id
    assert [o.outcome for o in output.outcomes] == [["created"], ["deduplicated"], ["created"]]
    assert len(await deduping.all_records()) == 2


async def test_a_record_written_by_another_writer_is_found(deduping: MemoryHarness) -> None:
    await _write(deduping, "First note, so the namespace is read.")
    (other,) = await deduping.store.write(
        [MemoryDraft(content="The deploy freeze starts on Monday.")], "create"
    )
    again = await _write(deduping, "the deploy freeze starts on monday")
    assert again.items[0].id == other.id


async def test_another_namespace_written_meanwhile_is_found_there(
    deduping: MemoryHarness,
) -> None:
    # One store-wide read of what changed serves every namespace the worker has read.
    await _write(deduping, "A note in the default namespace.")
    team = await deduping.ok(
        "MEMORY.WRITE", {"memories": [{"content": "Team note.", "namespace": "team"}]}
    )
    (other,) = await deduping.store.write(
        [MemoryDraft(content="The team offsite is in Lisbon.", namespace="team")], "create"
    )
    await _write(deduping, "Another note in the default namespace.")
    again = await deduping.ok(
        "MEMORY.WRITE",
        {"memories": [{"content": "the team offsite is in lisbon", "namespace": "team"}]},
    )
    assert team.outcomes[0].outcome == ["created"]
    assert (again.outcomes[0].outcome, again.items[0].id) == (["deduplicated"], other.id)


async def test_a_record_rewritten_by_another_writer_is_judged_as_it_now_reads(
    deduping: MemoryHarness,
) -> None:
    (first,) = (await _write(deduping, "The flight lands at 6pm.")).items
    await deduping.store.update([MemoryPatch(first.id, content="The flight lands at 7pm.")])
    old = await _write(deduping, "the flight lands at 6pm")
    new = await _write(deduping, "the flight lands at 7pm")
    assert old.outcomes[0].outcome == ["created"]
    assert (new.outcomes[0].outcome, new.items[0].id) == (["deduplicated"], first.id)


async def test_a_record_deleted_by_another_writer_is_no_duplicate(
    deduping: MemoryHarness,
) -> None:
    (first,) = (await _write(deduping, "The office wifi is called Orbit.")).items
    await deduping.store.delete([first.id])
    again = await _write(deduping, "the office wifi is called orbit")
    assert again.outcomes[0].outcome == ["created"]
    assert again.items[0].id != first.id


async def test_an_expired_record_is_not_a_duplicate(deduping: MemoryHarness) -> None:
    await deduping.ok(
        "MEMORY.WRITE", {"memories": [{"content": "Flight lands at 6pm.", "ttl": 60}]}
    )
    deduping.clock.now += timedelta(seconds=61)
    again = await _write(deduping, "Flight lands at 6pm.")
    assert again.outcomes[0].outcome == ["created"]


async def test_another_principals_private_record_is_never_returned(
    open_store: OpenStore, store_env: StoreEnv
) -> None:
    memory = await _harness(open_store, store_env, "enforce", acl=True)
    async with memory.runtime:
        alice = await _write(memory, "The launch code name is Bluebird.", principal="alice")
        bob = await _write(memory, "The launch code name is Bluebird.", principal="bob")
    assert bob.items[0].id != alice.items[0].id
    assert bob.outcomes[0].outcome == ["created"]


async def test_observe_reports_and_stores_anyway(
    open_store: OpenStore, store_env: StoreEnv
) -> None:
    memory = await _harness(open_store, store_env, "observe")
    async with memory.runtime:
        await _write(memory, "Coffee order: flat white.")
        again = await _write(memory, "coffee order: flat white")
        (outcome,) = again.outcomes
        assert (outcome.outcome, outcome.observed) == (["created"], ["deduplicated"])
        assert len(await memory.all_records()) == 2


@requires(HistoryLog)
async def test_sources_accumulate_on_the_record_a_duplicate_repeats(
    deduping: MemoryHarness,
) -> None:
    fact = "The office wifi password rotates every Monday."
    first = await deduping.ok("MEMORY.WRITE", {"memories": [{"content": fact, "source": "chat:1"}]})
    (original,) = first.items
    again = await deduping.ok(
        "MEMORY.WRITE",
        {
            "memories": [
                {"content": fact.lower(), "source": "chat:2"},
                {"content": fact.lower(), "source": "chat:3"},  # repeats the one before
                {"content": fact, "source": "chat:1"},  # the record's own source
            ]
        },
    )
    assert [outcome.outcome for outcome in again.outcomes] == [["deduplicated"]] * 3
    # The write returns the record as it left it: one new version naming both new sources.
    returned = again.items[0]
    assert (returned.id, returned.source, returned.sources) == (
        original.id,
        "chat:1",
        ["chat:2", "chat:3"],
    )
    assert returned.version == original.version + 1
    (stored,) = await deduping.all_records()
    assert (stored.content, stored.sources, stored.version) == (fact, ["chat:2", "chat:3"], 2)
    history = await deduping.store.history(original.id)  # type: ignore[attr-defined]
    assert [entry.change for entry in history] == ["create", "merge"]
    # Nothing new to add: no new version, no history entry.
    await deduping.ok("MEMORY.WRITE", {"memories": [{"content": fact, "source": "chat:3"}]})
    (unchanged,) = await deduping.all_records()
    assert (unchanged.sources, unchanged.version) == (["chat:2", "chat:3"], 2)


async def test_a_more_trusted_source_stating_the_fact_again_raises_its_trust(
    deduping: MemoryHarness,
) -> None:
    """A fact first inferred, then stated by a verified source, is held as verified (so a
    less trusted write can no longer supersede it); a less trusted repeat lowers nothing."""
    fact = "Nina's badge number is 5521."
    (original,) = (
        await deduping.ok("MEMORY.WRITE", {"memories": [{"content": fact, "trust": "inferred"}]})
    ).items
    confirmed = await deduping.ok(
        "MEMORY.WRITE",
        {"memories": [{"content": fact, "trust": "verified"}, {"content": fact, "trust": "user"}]},
    )
    assert [outcome.outcome for outcome in confirmed.outcomes] == [["deduplicated"]] * 2
    returned = confirmed.items[0]
    assert (returned.id, returned.trust, returned.version) == (original.id, "verified", 2)
    (stored,) = await deduping.all_records()
    assert (stored.trust, stored.sources) == ("verified", [])
    await deduping.ok("MEMORY.WRITE", {"memories": [{"content": fact, "trust": "agent"}]})
    (unchanged,) = await deduping.all_records()
    assert (unchanged.trust, unchanged.version) == ("verified", 2)


async def test_sources_keep_only_the_newest(deduping: MemoryHarness) -> None:
    fact = "Payroll runs on the last business day of the month."
    await deduping.ok("MEMORY.WRITE", {"memories": [{"content": fact, "source": "s0"}]})
    for batch in range(3):
        drafts = [{"content": fact, "source": f"s{batch * 20 + n + 1}"} for n in range(20)]
        await deduping.ok("MEMORY.WRITE", {"memories": drafts})
    (stored,) = await deduping.all_records()
    assert stored.source == "s0"
    assert stored.sources == [f"s{n}" for n in range(60 - MAX_SOURCES + 1, 61)]


async def test_a_record_replaced_in_the_same_write_takes_no_sources(
    deduping: MemoryHarness,
) -> None:
    """A store asked in one write to replace a record through its key and to merge sources
    into it (planned on its old text): the sources were stated about what it said before, so
    they are not added — and the replacement is never lost under a merge of the old version.
    (The worker never plans both: an upsert names a key for every draft, and dedupe matches
    keyless ones; a store must still be safe when asked.)"""
    store = deduping.store
    old = MemoryDraft(content="The stork eats frogs.", key="stork", source="chat:1")
    (original,) = await store.write([old], "create")
    new = MemoryDraft(content="The stork eats fish.", key="stork", source="chat:1")
    rules = WriteRules(merges={original.id: (original.version, ["chat:2"])})
    (written,) = await store.write([new], "upsert", None, None, rules)
    (stored,) = await store.get([original.id], [], "default")
    assert stored == written
    assert (stored.content, stored.sources, stored.version) == ("The stork eats fish.", [], 2)
    assert original.id not in rules.merged
    if isinstance(store, HistoryLog):
        history = await store.history(original.id)
        assert [(entry.change, entry.version) for entry in history] == [
            ("create", 1),
            ("upsert", 2),
        ]
