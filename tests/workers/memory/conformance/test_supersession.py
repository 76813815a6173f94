"""Contradictions by key on every store (handbook §9): a write of at least the stored record's
trust supersedes it, a lower-trust one is kept beside it as ``contested`` — a verified fact is
never replaced by a lower-trust write — and ``as_of`` reads return what was true then."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

import pytest

from ditto import ErrorCode, create_ditto
from tests.workers.memory.conformance.helpers import code_of
from tests.workers.memory.conftest import MemoryHarness, OpenStore, StoreEnv, requires
from workers.memory import MemoryStore, create_memory_worker
from workers.memory.policy.config import StageMode, StageModes, WritePolicy
from workers.memory.ports import HistoryLog

pytestmark = [pytest.mark.anyio, requires(MemoryStore)]


def _policy(contradiction: StageMode = "enforce") -> WritePolicy:
    return WritePolicy(StageModes(contradiction=contradiction))


@pytest.fixture
async def guarded(open_store: OpenStore, store_env: StoreEnv) -> AsyncIterator[MemoryHarness]:
    """A memory worker whose contradiction stage enforces, with the default trust scale."""
    store = await open_store()
    worker = create_memory_worker(store, clock=store_env.clock, policy=_policy())
    async with create_ditto(workers=[worker]) as runtime:
        yield MemoryHarness(runtime, store, store_env.clock)


async def _write(memory: MemoryHarness, *drafts: dict[str, Any], mode: str = "create") -> Any:
    return await memory.ok("MEMORY.WRITE", {"memories": list(drafts), "mode": mode})


async def test_a_verified_fact_is_never_replaced_by_a_lower_trust_write(
    guarded: MemoryHarness,
) -> None:
    fact = {"key": "user:city", "content": "lives in Berlin", "source": "passport"}
    verified = await _write(guarded, {**fact, "trust": "verified"})
    guess = {"key": "user:city", "content": "lives in Paris", "source": "model", "trust": "agent"}
    contested = await _write(guarded, guess, mode="upsert")
    (outcome,) = contested.outcomes
    assert outcome.outcome == ["contested"]
    assert outcome.contests == verified.items[0].id
    stored = contested.items[0]
    assert (stored.status, stored.contests, stored.source) == (
        "contested",
        verified.items[0].id,
        "model",
    )
    # The key still names the verified fact; the contested claim is kept beside it.
    (current,) = (await guarded.ok("MEMORY.GET", {"keys": ["user:city"]})).items
    assert (current.content, current.trust, current.source, current.version) == (
        "lives in Berlin",
        "verified",
        "passport",
        1,
    )
    both = await guarded.ok("MEMORY.GET", {"keys": ["user:city"], "include": ["contested"]})
    assert [(item.content, item.status) for item in both.items] == [
        ("lives in Berlin", "active"),
        ("lives in Paris", "contested"),
    ]
    # The same lower-trust claim again is not stored twice.
    again = await _write(guarded, guess)
    assert again.outcomes[0].outcome == ["deduplicated"]
    assert again.items[0].id == stored.id


async def test_an_equal_or_higher_trust_write_supersedes_and_keeps_the_old_fact(
    guarded: MemoryHarness,
) -> None:
    first = await _write(
        guarded, {"key": "user:city", "content": "lives in Berlin", "trust": "user"}
    )
    old = first.items[0]
    assert first.outcomes[0].outcome == ["created"]
    guarded.clock.now += timedelta(days=1)
    moved = await _write(
        guarded,
        {"key": "user:city", "content": "lives in Paris", "trust": "user", "source": "chat"},
    )
    (outcome,) = moved.outcomes
    new = moved.items[0]
    assert (outcome.outcome, outcome.supersedes) == (["superseded"], old.id)
    assert new.id != old.id
    assert (new.status, new.supersedes, new.version) == ("active", old.id, 1)
    (current,) = (await guarded.ok("MEMORY.GET", {"keys": ["user:city"]})).items
    assert current.id == new.id
    (kept,) = (await guarded.ok("MEMORY.GET", {"ids": [old.id], "include": ["superseded"]})).items
    assert (kept.content, kept.status, kept.valid_to, kept.version) == (
        "lives in Berlin",
        "superseded",
        new.created_at,
        2,
    )
    assert (await guarded.ok("MEMORY.GET", {"ids": [old.id]})).items == []  # hidden by default
    # as_of: what was true then.
    before_move = (new.created_at - timedelta(hours=1)).isoformat()
    after_move = (new.created_at + timedelta(seconds=1)).isoformat()
    then = await guarded.ok("MEMORY.QUERY", {"filter": {"as_of": before_move}})
    now = await guarded.ok("MEMORY.QUERY", {"filter": {"as_of": after_move}})
    assert [item.content for item in then.items] == ["lives in Berlin"]
    assert [item.content for item in now.items] == ["lives in Paris"]


async def test_a_successor_dated_in_the_past_ends_the_old_fact_when_it_began(
    guarded: MemoryHarness,
) -> None:
    """A write learned late ("she has worked at Globex since March") supersedes with the old
    fact true until the new one's ``valid_from``, so ``as_of`` between the two answers Globex."""
    (old,) = (
        await _write(
            guarded,
            {
                "key": "job",
                "content": "works at Acme",
                "trust": "user",
                "valid_from": "2019-01-01T00:00:00Z",
            },
        )
    ).items
    guarded.clock.now += timedelta(days=30)
    began = guarded.clock.now - timedelta(days=10)
    moved = await _write(
        guarded,
        {
            "key": "job",
            "content": "works at Globex",
            "trust": "user",
            "valid_from": began.isoformat(),
        },
    )
    assert moved.outcomes[0].outcome == ["superseded"]
    (kept,) = (await guarded.ok("MEMORY.GET", {"ids": [old.id], "include": ["superseded"]})).items
    assert kept.valid_to == began
    meanwhile = (began + timedelta(days=1)).isoformat()
    then = await guarded.ok("MEMORY.QUERY", {"filter": {"as_of": meanwhile}})
    assert [item.content for item in then.items] == ["works at Globex"]
    earlier = (began - timedelta(days=1)).isoformat()
    before = await guarded.ok("MEMORY.QUERY", {"filter": {"as_of": earlier}})
    assert [item.content for item in before.items] == ["works at Acme"]


async def test_an_older_fact_learned_late_is_history_not_a_successor(
    guarded: MemoryHarness,
) -> None:
    """A draft dated before the stored fact began ("lived in Oslo from 2020" about someone in
    Madrid since 2022) held until the stored one began; the stored one still holds, and
    ``as_of`` gives one answer at every moment."""
    madrid = {"key": "home", "content": "in Madrid", "valid_from": "2022-01-01T00:00:00Z"}
    (current,) = (await _write(guarded, madrid)).items
    oslo = {"key": "home", "content": "in Oslo", "valid_from": "2020-01-01T00:00:00Z"}
    written = await _write(guarded, oslo)
    (past,) = written.items
    assert written.outcomes[0].outcome == ["created"]
    assert (past.status, past.valid_to) == ("superseded", current.valid_from)
    (holder,) = (await guarded.ok("MEMORY.GET", {"keys": ["home"]})).items
    assert (holder.id, holder.status, holder.valid_to) == (current.id, "active", None)
    for moment, expected in (
        ("2021-06-01T00:00:00Z", ["in Oslo"]),
        ("2023-06-01T00:00:00Z", ["in Madrid"]),
    ):
        page = await guarded.ok("MEMORY.QUERY", {"filter": {"as_of": moment}})
        assert [item.content for item in page.items] == expected, moment


async def test_a_successor_dated_ahead_holds_from_its_valid_from(
    guarded: MemoryHarness,
) -> None:
    """A change announced ahead ("the office moves to Paris on the 1st"): default reads go by
    status and show the new record from the write on; ``as_of`` now still answers the old
    fact, and ``as_of`` the new one's ``valid_from`` the new one."""
    (old,) = (await _write(guarded, {"key": "office", "content": "in Berlin"})).items
    moves = guarded.clock.now + timedelta(days=10)
    announced = {"key": "office", "content": "in Paris", "valid_from": moves.isoformat()}
    assert (await _write(guarded, announced)).outcomes[0].outcome == ["superseded"]
    (current,) = (await guarded.ok("MEMORY.GET", {"keys": ["office"]})).items
    assert current.content == "in Paris"
    today = {"filter": {"as_of": (guarded.clock.now + timedelta(seconds=1)).isoformat()}}
    assert [item.id for item in (await guarded.ok("MEMORY.QUERY", today)).items] == [old.id]
    moved = {"filter": {"as_of": moves.isoformat()}}
    assert [item.content for item in (await guarded.ok("MEMORY.QUERY", moved)).items] == [
        "in Paris"
    ]


@requires(HistoryLog)
async def test_supersession_is_in_history(guarded: MemoryHarness) -> None:
    assert isinstance(guarded.store, HistoryLog)
    (old,) = (await _write(guarded, {"key": "k", "content": "one"})).items
    (new,) = (await _write(guarded, {"key": "k", "content": "two"})).items
    assert [entry.change for entry in await guarded.store.history(old.id)] == [
        "create",
        "supersede",
    ]
    assert [entry.change for entry in await guarded.store.history(new.id)] == ["create"]


async def test_observe_reports_what_enforcing_would_do_and_changes_nothing(
    open_store: OpenStore, store_env: StoreEnv
) -> None:
    store = await open_store()
    worker = create_memory_worker(store, clock=store_env.clock, policy=_policy("observe"))
    async with create_ditto(workers=[worker]) as runtime:
        memory = MemoryHarness(runtime, store, store_env.clock)
        (first,) = (await _write(memory, {"key": "k", "content": "a", "trust": "verified"})).items
        result = await memory.call(
            "MEMORY.WRITE", {"memories": [{"key": "k", "content": "b", "trust": "inferred"}]}
        )
        assert code_of(result) == ErrorCode.CONFLICT  # create mode, as without the policy
        written = await _write(
            memory, {"key": "k", "content": "b", "trust": "inferred"}, mode="upsert"
        )
        (outcome,) = written.outcomes
        assert (outcome.outcome, outcome.observed) == (["updated"], ["contested"])
        assert written.items[0].id == first.id


async def test_a_call_may_turn_the_stage_off_for_itself(guarded: MemoryHarness) -> None:
    await _write(guarded, {"key": "k", "content": "a"})
    written = await guarded.ok(
        "MEMORY.WRITE",
        {
            "memories": [{"key": "k", "content": "b"}],
            "mode": "upsert",
            "policy": {"contradiction": "off"},
        },
    )
    assert written.outcomes[0].outcome == ["updated"]


async def test_trust_must_be_on_the_scale_and_defaults_apply(
    open_store: OpenStore, store_env: StoreEnv
) -> None:
    store = await open_store()
    policy = WritePolicy(trust_levels=("human", "bot"), default_trust="bot")
    worker = create_memory_worker(store, clock=store_env.clock, policy=policy)
    async with create_ditto(workers=[worker]) as runtime:
        memory = MemoryHarness(runtime, store, store_env.clock)
        bad = await memory.call("MEMORY.WRITE", {"memories": [{"content": "x", "trust": "oracle"}]})
        assert code_of(bad) == ErrorCode.INVALID_INPUT
        assert "human, bot" in bad.error.message
        (item,) = await memory.write({"content": "x"})
        assert item.trust == "bot"


async def test_a_category_ttl_applies_unless_the_draft_sets_expiry(
    open_store: OpenStore, store_env: StoreEnv
) -> None:
    store = await open_store()
    policy = WritePolicy(category_ttl_s={"daily": 86_400})
    worker = create_memory_worker(store, clock=store_env.clock, policy=policy)
    async with create_ditto(workers=[worker]) as runtime:
        memory = MemoryHarness(runtime, store, store_env.clock)
        daily, pinned_expiry, core = await memory.write(
            {"content": "today", "category": "daily"},
            {"content": "an hour", "category": "daily", "ttl": 3600},
            {"content": "forever"},
        )
        assert daily.expires_at == daily.created_at + timedelta(days=1)
        assert pinned_expiry.expires_at == pinned_expiry.created_at + timedelta(hours=1)
        assert core.expires_at is None


async def test_writes_report_created_updated_and_deduplicated(memory: MemoryHarness) -> None:
    first = await memory.ok(
        "MEMORY.WRITE", {"memories": [{"key": "k", "content": 1}, {"content": 2}]}
    )
    assert [outcome.outcome for outcome in first.outcomes] == [["created"], ["created"]]
    again = await memory.ok("MEMORY.WRITE", {"memories": [{"key": "k", "content": 1}]})
    assert (again.outcomes[0].outcome, again.outcomes[0].duplicate_of) == (
        ["deduplicated"],
        first.items[0].id,
    )
    changed = await memory.ok(
        "MEMORY.WRITE", {"memories": [{"key": "k", "content": 3}], "mode": "upsert"}
    )
    assert changed.outcomes[0].outcome == ["updated"]
