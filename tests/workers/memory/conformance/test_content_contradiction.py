"""Contradictions found by content on every store: a keyless write about the same subject as
a keyless record, with another value (a moved city, a changed time, a turned preference),
supersedes it when its trust ranks at least as high and is kept beside it as ``contested``
otherwise — as a write to the same key would (``test_supersession``). A compatible update,
another subject or a record with a key is never touched."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

import pytest

from ditto import create_ditto
from tests.workers.memory.conftest import MemoryHarness, OpenStore, StoreEnv, requires
from workers.memory import AccessPolicy, MemoryStore, create_memory_worker
from workers.memory.policy.config import StageMode, StageModes, WritePolicy
from workers.memory.ports import HistoryLog

pytestmark = [pytest.mark.anyio, requires(MemoryStore)]

BERLIN = "The user lives in Berlin and works from home on Fridays."
PARIS = "The user lives in Paris and works from home on Fridays."


async def _harness(
    open_store: OpenStore, store_env: StoreEnv, mode: StageMode, *, acl: bool = False
) -> MemoryHarness:
    store = await open_store()
    worker = create_memory_worker(
        store,
        clock=store_env.clock,
        policy=WritePolicy(StageModes(contradiction=mode)),
        access=AccessPolicy("enforce") if acl else None,
    )
    return MemoryHarness(create_ditto(workers=[worker]), store, store_env.clock)


@pytest.fixture
async def guarded(open_store: OpenStore, store_env: StoreEnv) -> AsyncIterator[MemoryHarness]:
    memory = await _harness(open_store, store_env, "enforce")
    async with memory.runtime:
        yield memory


async def _write(memory: MemoryHarness, content: str, **fields: Any) -> Any:
    output = await memory.ok("MEMORY.WRITE", {"memories": [{"content": content, **fields}]})
    return output.items[0], output.outcomes[0]


async def _visible(memory: MemoryHarness, **request: Any) -> list[tuple[str, str]]:
    output = await memory.ok("MEMORY.QUERY", {"limit": 100, **request})
    return [(item.content, item.status) for item in output.items]


async def test_a_moved_city_supersedes_the_old_one(guarded: MemoryHarness) -> None:
    old, _ = await _write(guarded, BERLIN, source="chat:1", trust="user")
    guarded.clock.now += timedelta(days=30)
    new, outcome = await _write(guarded, PARIS, source="chat:2", trust="user")
    assert (outcome.outcome, outcome.supersedes) == (["superseded"], old.id)
    assert (new.supersedes, new.status) == (old.id, "active")
    assert await _visible(guarded) == [(PARIS, "active")]
    (retired,) = (
        await guarded.ok("MEMORY.GET", {"ids": [old.id], "include": ["superseded"]})
    ).items
    assert (retired.status, retired.source, retired.valid_to) == (
        "superseded",
        "chat:1",
        new.created_at,
    )
    # What was true before the move is still what an as_of read returns.
    before = guarded.clock.now - timedelta(days=1)
    as_of = {"filter": {"as_of": before.isoformat()}}
    assert await _visible(guarded, **as_of) == [(BERLIN, "superseded")]


async def test_a_lower_trust_contradiction_is_contested_never_a_replacement(
    guarded: MemoryHarness,
) -> None:
    fact = "Standup is at 9:30 every weekday in the blue room."
    claim = "Standup is at 10:30 every weekday in the blue room."
    verified, _ = await _write(guarded, fact, source="calendar", trust="verified")
    contested, outcome = await _write(guarded, claim, source="model", trust="agent")
    assert (outcome.outcome, outcome.contests) == (["contested"], verified.id)
    assert (contested.status, contested.contests) == ("contested", verified.id)
    assert await _visible(guarded) == [(fact, "active")]
    assert await _visible(guarded, filter={"include": ["contested"]}) == [
        (fact, "active"),
        (claim, "contested"),
    ]


async def test_a_turned_preference_supersedes(guarded: MemoryHarness) -> None:
    old, _ = await _write(guarded, "The user likes green tea in the afternoon.")
    _, outcome = await _write(guarded, "The user hates green tea in the afternoon.")
    assert (outcome.outcome, outcome.supersedes) == (["superseded"], old.id)


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("Oliver likes spicy food.", "Oliver dislikes spicy food."),
        ("Mei is vegetarian.", "Mei is not vegetarian."),
        ("Ana takes the 7:40 bus.", "Ana takes the 8:10 bus."),
        ("Likes sushi.", "Dislikes sushi."),  # no subject: the user's own memory
    ],
)
async def test_a_short_statement_is_matched_by_its_subject(
    guarded: MemoryHarness, old: str, new: str
) -> None:
    """Four or five words share too few shingles for the signature index to pair a statement
    with its contradiction: the records of the same subject are judged too."""
    filler = [f"Pat's note number {n} is about the garden." for n in range(20)]
    for text in filler:
        await _write(guarded, text)
    first, _ = await _write(guarded, old)
    _, outcome = await _write(guarded, new)
    assert (outcome.outcome, outcome.supersedes) == (["superseded"], first.id)


async def test_compatible_updates_and_other_subjects_are_new_records(
    guarded: MemoryHarness,
) -> None:
    await _write(guarded, BERLIN)
    _, added = await _write(guarded, BERLIN.rstrip(".") + " and at the office on Mondays.")
    _, other = await _write(guarded, "The weekly report goes out on Fridays at noon.")
    assert added.outcome == other.outcome == ["created"]
    assert len(await _visible(guarded)) == 3


async def test_a_keyed_record_changes_only_through_its_key(guarded: MemoryHarness) -> None:
    await guarded.ok("MEMORY.WRITE", {"memories": [{"key": "user:city", "content": BERLIN}]})
    _, outcome = await _write(guarded, PARIS)
    assert outcome.outcome == ["created"]
    assert sorted(await _visible(guarded)) == [(BERLIN, "active"), (PARIS, "active")]


async def test_observe_reports_and_changes_nothing(
    open_store: OpenStore, store_env: StoreEnv
) -> None:
    memory = await _harness(open_store, store_env, "observe")
    async with memory.runtime:
        await _write(memory, BERLIN)
        _, outcome = await _write(memory, PARIS)
        assert (outcome.outcome, outcome.observed) == (["created"], ["superseded"])
        assert sorted(await _visible(memory)) == [(BERLIN, "active"), (PARIS, "active")]


async def test_another_principals_private_record_is_never_matched(
    open_store: OpenStore, store_env: StoreEnv
) -> None:
    memory = await _harness(open_store, store_env, "enforce", acl=True)
    async with memory.runtime:
        first = await memory.call(
            "MEMORY.WRITE",
            {"memories": [{"content": BERLIN, "visibility": "private"}]},
            principal="alice",
        )
        second = await memory.call(
            "MEMORY.WRITE", {"memories": [{"content": PARIS}]}, principal="bob"
        )
        assert first.ok, first.error
        assert second.ok, second.error
        assert second.output.outcomes[0].outcome == ["created"]
        (kept,) = (
            await memory.call("MEMORY.GET", {"ids": [first.output.items[0].id]}, principal="alice")
        ).output.items
        assert kept.status == "active"


async def test_the_drafts_of_one_write_are_judged_in_order(guarded: MemoryHarness) -> None:
    """Two statements of one write that change a record's value: the first supersedes the
    record, the second the first — as two writes would. The first's record is stored already
    superseded, with both entries in its history."""
    old, _ = await _write(guarded, "The staging cluster has 12 nodes in the eu region.")
    output = await guarded.ok(
        "MEMORY.WRITE",
        {
            "memories": [
                {"content": "The staging cluster has 14 nodes in the eu region."},
                {"content": "The staging cluster has 16 nodes in the eu region."},
            ]
        },
    )
    first, second = output.items
    assert [o.outcome for o in output.outcomes] == [["superseded"], ["superseded"]]
    assert [o.supersedes for o in output.outcomes] == [old.id, first.id]
    assert (second.supersedes, second.status) == (first.id, "active")
    retired = {
        item.id: item
        for item in (
            await guarded.ok("MEMORY.GET", {"ids": [old.id, first.id], "include": ["superseded"]})
        ).items
    }
    assert (retired[old.id].status, retired[old.id].version) == ("superseded", 2)
    assert (retired[first.id].status, retired[first.id].version) == ("superseded", 2)
    assert retired[first.id].valid_to == second.created_at
    assert await _visible(guarded) == [(second.content, "active")]
    if isinstance(guarded.store, HistoryLog):
        assert [entry.change for entry in await guarded.store.history(first.id)] == [
            "create",
            "supersede",
        ]


async def test_no_draft_of_a_write_stands_beside_a_more_trusted_fact(
    guarded: MemoryHarness,
) -> None:
    """Handbook §9 within one write: every lower-trust draft contradicting the verified fact
    is contested, not only the last one."""
    fact, _ = await _write(guarded, BERLIN, trust="verified")
    output = await guarded.ok(
        "MEMORY.WRITE",
        {
            "memories": [
                {
                    "content": "The user lives in Rome and works from home on Fridays.",
                    "trust": "user",
                },
                {"content": PARIS, "trust": "agent"},
            ]
        },
    )
    assert [(o.outcome, o.contests) for o in output.outcomes] == [
        (["contested"], fact.id),
        (["contested"], fact.id),
    ]
    assert await _visible(guarded) == [(BERLIN, "active")]


async def test_a_draft_contradicting_an_earlier_draft_of_its_write(
    guarded: MemoryHarness,
) -> None:
    """Nothing stored yet: the later statement supersedes the earlier one when it is trusted
    as much, and is contested beside it when it is trusted less."""
    output = await guarded.ok(
        "MEMORY.WRITE",
        {"memories": [{"content": "Bob lives in Oslo."}, {"content": "Bob lives in Madrid."}]},
    )
    oslo, madrid = output.items
    assert [(o.outcome, o.supersedes) for o in output.outcomes] == [
        (["created"], None),
        (["superseded"], oslo.id),
    ]
    assert (oslo.status, madrid.status) == ("superseded", "active")
    assert await _visible(guarded) == [("Bob lives in Madrid.", "active")]
    output = await guarded.ok(
        "MEMORY.WRITE",
        {
            "memories": [
                {"content": "Carol works at Initech.", "trust": "verified"},
                {"content": "Carol works at Globex.", "trust": "agent"},
            ]
        },
    )
    initech, globex = output.items
    assert [o.outcome for o in output.outcomes] == [["created"], ["contested"]]
    assert (globex.contests, initech.status) == (initech.id, "active")


def _both_stages(open_store: OpenStore, store_env: StoreEnv) -> Any:
    async def harness() -> MemoryHarness:
        store = await open_store()
        stages = StageModes(dedupe="enforce", contradiction="enforce")
        worker = create_memory_worker(
            store, clock=store_env.clock, policy=WritePolicy(stages, default_trust="agent")
        )
        return MemoryHarness(create_ditto(workers=[worker]), store, store_env.clock)

    return harness()


async def _write_all(memory: MemoryHarness, *drafts: tuple[str, str, str | None]) -> Any:
    memories = [{"content": c, "trust": t, "source": s} for c, t, s in drafts]
    return await memory.ok("MEMORY.WRITE", {"memories": memories})


async def test_a_repeat_of_a_fact_an_earlier_draft_superseded_restates_it(
    open_store: OpenStore, store_env: StoreEnv
) -> None:
    """Never deduplicated into the record the write just retired: it contradicts the draft
    that retired it, as a second write would."""
    memory = await _both_stages(open_store, store_env)
    async with memory.runtime:
        oslo = (await _write_all(memory, ("Ida lives in Oslo", "agent", None))).items[0]
        output = await _write_all(
            memory, ("Ida lives in Bergen", "user", None), ("Ida lives in Oslo", "verified", "id")
        )
        bergen, restated = output.items
        assert [(o.outcome, o.supersedes) for o in output.outcomes] == [
            (["superseded"], oslo.id),
            (["superseded"], bergen.id),
        ]
        assert await _visible(memory) == [("Ida lives in Oslo", "active")]
        assert (restated.trust, restated.source) == ("verified", "id")


async def test_a_more_trusted_repeat_raises_trust_before_a_later_draft_is_judged(
    open_store: OpenStore, store_env: StoreEnv
) -> None:
    memory = await _both_stages(open_store, store_env)
    async with memory.runtime:
        oslo = (await _write_all(memory, ("Xena lives in Oslo", "inferred", "guess"))).items[0]
        output = await _write_all(
            memory,
            ("Xena lives in Oslo", "verified", "passport"),
            ("Xena lives in Bergen", "agent", None),
        )
        assert [(o.outcome, o.duplicate_of, o.contests) for o in output.outcomes] == [
            (["deduplicated"], oslo.id, None),
            (["contested"], None, oslo.id),
        ]
        (kept,) = (await memory.ok("MEMORY.GET", {"ids": [oslo.id]})).items
        assert (kept.trust, kept.sources) == ("verified", ["passport"])
        # Repeats of a draft of the same write raise that draft's record the same way.
        output = await _write_all(
            memory,
            ("Gina likes green tea", "agent", "a"),
            ("gina likes green tea.", "agent", "b"),
            ("Gina likes green tea", "verified", "c"),
        )
        gina = output.items[0]
        assert [o.outcome for o in output.outcomes] == [["created"], *[["deduplicated"]] * 2]
        (stored,) = (await memory.ok("MEMORY.GET", {"ids": [gina.id]})).items
        assert (stored.trust, stored.source, stored.sources) == ("verified", "a", ["b", "c"])
        turned = await _write_all(memory, ("Gina does not like green tea", "agent", None))
        assert turned.outcomes[0].contests == gina.id


async def test_a_more_trusted_repeat_of_a_contested_claim_is_judged_on_its_own_trust(
    open_store: OpenStore, store_env: StoreEnv
) -> None:
    memory = await _both_stages(open_store, store_env)
    async with memory.runtime:
        fact = (await _write_all(memory, ("Kim lives in Oslo", "verified", None))).items[0]
        output = await _write_all(
            memory,
            ("Kim lives in Bergen", "agent", None),
            ("Kim lives in Bergen", "verified", None),
        )
        assert [(o.outcome, o.contests, o.supersedes) for o in output.outcomes] == [
            (["contested"], fact.id, None),
            (["superseded"], None, fact.id),
        ]
        assert await _visible(memory) == [("Kim lives in Bergen", "active")]


async def test_a_draft_contradicting_two_records_of_one_subject_ends_both(
    guarded: MemoryHarness,
) -> None:
    """ "Bob lives in Oslo" and "Bob lives in Oslo with his cat" are one subject stated twice:
    a trusted enough contradiction supersedes both (its outcome names the first), and one
    less trusted than either is contested against the most trusted of them."""
    first, _ = await _write(guarded, "Bob lives in Oslo")
    second, _ = await _write(guarded, "Bob lives in Oslo with his cat", trust="user")
    new, outcome = await _write(guarded, "Bob does not live in Oslo", trust="inferred")
    assert (outcome.outcome, outcome.contests) == (["contested"], second.id)
    new, outcome = await _write(guarded, "Bob no longer lives in Oslo", trust="verified")
    assert outcome.outcome == ["superseded"]
    assert await _visible(guarded) == [("Bob no longer lives in Oslo", "active")]
    ended = await guarded.ok(
        "MEMORY.GET", {"ids": [first.id, second.id], "include": ["superseded"]}
    )
    assert [(item.status, item.valid_to) for item in ended.items] == [
        ("superseded", new.created_at),
        ("superseded", new.created_at),
    ]


async def test_a_near_repeat_within_one_write_is_deduplicated(
    open_store: OpenStore, store_env: StoreEnv
) -> None:
    memory = await _both_stages(open_store, store_env)
    async with memory.runtime:
        output = await _write_all(
            memory,
            ("The deploy freeze starts on Friday at noon for payments.", "agent", None),
            ("The deploy freeze for payments starts on Friday at noon.", "agent", None),
        )
        first, second = output.items
        assert [(o.outcome, o.duplicate_of) for o in output.outcomes] == [
            (["created"], None),
            (["deduplicated"], first.id),
        ]
        assert second.id == first.id
        assert len(await _visible(memory)) == 1


async def test_a_contested_claim_stated_again_is_a_repeat_not_a_second_claim(
    open_store: OpenStore, store_env: StoreEnv
) -> None:
    """With dedupe on, the same lower-trust claim written again joins the claim waiting for
    review instead of queueing a second one; a more trusted statement of it goes its own way
    (here: it supersedes the fact, as a verified write does)."""
    store = await open_store()
    policy = WritePolicy(StageModes(dedupe="enforce", contradiction="enforce"))
    worker = create_memory_worker(store, clock=store_env.clock, policy=policy)
    memory = MemoryHarness(create_ditto(workers=[worker]), store, store_env.clock)
    async with memory.runtime:
        fact, _ = await _write(memory, "The VPN gateway is vpn2.corp.example.", trust="user")
        claim, first = await _write(memory, "The VPN gateway is vpn3.corp.example.", trust="agent")
        assert (first.outcome, claim.status) == (["contested"], "contested")
        again, outcome = await _write(
            memory, "The VPN gateway is vpn3.corp.example.", trust="agent", source="chat:9"
        )
        assert (outcome.outcome, outcome.duplicate_of, again.id) == (
            ["deduplicated"],
            claim.id,
            claim.id,
        )
        pending = {"status": ["contested"], "include": ["contested"]}
        waiting = (await memory.ok("MEMORY.QUERY", {"filter": pending})).items
        assert [item.id for item in waiting] == [claim.id]
        stated, confirmed = await _write(
            memory, "The VPN gateway is vpn3.corp.example.", trust="verified"
        )
        assert (confirmed.outcome, confirmed.supersedes) == (["superseded"], fact.id)
        assert stated.status == "active"


_S50, _S60, _S70 = (f"Carl's salary is {pay} dollars" for pay in (50000, 60000, 70000))
_PAST = "2020-01-01T00:00:00Z"
_IN_ORDER: dict[str, tuple[str, list[dict[str, Any]], list[dict[str, Any]]]] = {
    "a repeat of a fact a later draft superseded": (
        "enforce",
        [],
        [
            {"content": "Bob lives in Oslo"},
            {"content": "Bob lives in Madrid"},
            {"content": "Bob lives in Oslo"},
        ],
    ),
    "a draft after one that is contested": (
        "enforce",
        [],
        [
            {"content": "Bob lives in Madrid", "trust": "user"},
            {"content": "Bob lives in Paris"},
            {"content": "Bob lives in Oslo"},
        ],
    ),
    "a repeat of a draft stored as history": (
        "enforce",
        [{"content": _S60}],
        [{"content": _S70, "valid_from": _PAST}, {"content": _S70}],
    ),
    "a draft after one stored as history": (
        "enforce",
        [],
        [{"content": _S60}, {"content": _S50, "valid_from": _PAST}, {"content": _S70}],
    ),
    "a repeat trusted as the default": (
        "enforce",
        [],
        [{"content": _S50, "trust": "inferred"}, {"content": _S50, "trust": "agent"}],
    ),
    "a repeat of a claim waiting for review": (
        "enforce",
        [{"content": _S60, "trust": "user"}],
        [{"content": _S70, "source": "s2"}, {"content": _S70, "source": "s1"}],
    ),
    "a repeat of a statement made again since": (
        "enforce",
        [],
        [
            {"content": "Ines drinks tea"},
            {"content": "Ines drinks coffee"},
            {"content": "Ines drinks tea", "trust": "user"},
            {"content": "Ines drinks tea", "trust": "inferred", "source": "s3"},
        ],
    ),
    "more trusted repeats of a claim waiting for review": (
        "enforce",
        [{"content": "Ines drinks coffee"}, {"content": "Ines drinks tea", "trust": "inferred"}],
        [
            {"content": "Ines drinks tea", "trust": "inferred", "source": "s2"},
            {"content": "Ines drinks tea", "trust": "user", "source": "s3"},
            {"content": "Ines drinks tea", "trust": "verified"},
        ],
    ),
    "a duplicate dedupe only observes, then contradicted": (
        "observe",
        [{"content": "Dana likes coffee"}],
        [{"content": "Dana likes coffee"}, {"content": "Dana dislikes coffee", "trust": "user"}],
    ),
    "a repeat dedupe only observes": (
        "observe",
        [{"content": _S60, "trust": "verified"}],
        [{"content": _S70}, {"content": _S70}],
    ),
}


@pytest.mark.parametrize(("dedupe", "stored", "drafts"), _IN_ORDER.values(), ids=_IN_ORDER.keys())
async def test_one_write_ends_as_its_drafts_written_one_call_each(
    open_store: OpenStore,
    store_env: StoreEnv,
    dedupe: StageMode,
    stored: list[dict[str, Any]],
    drafts: list[dict[str, Any]],
) -> None:
    """The same drafts in two namespaces: in one call, and one call each, in order."""
    store = await open_store()
    stages = StageModes(dedupe=dedupe, contradiction="enforce")
    policy = WritePolicy(stages, default_trust="agent")
    worker = create_memory_worker(store, clock=store_env.clock, policy=policy)
    memory = MemoryHarness(create_ditto(workers=[worker]), store, store_env.clock)
    async with memory.runtime:
        for namespace, calls in (("batched", [drafts]), ("one-by-one", [[d] for d in drafts])):
            for call in [[draft] for draft in stored] + calls:
                memories = [{**draft, "namespace": namespace} for draft in call]
                await memory.ok("MEMORY.WRITE", {"memories": memories})
        states = []
        for namespace in ("batched", "one-by-one"):
            every = {"namespace": namespace, "include": ["superseded", "contested"]}
            items = (await memory.ok("MEMORY.QUERY", {"filter": every, "limit": 100})).items
            states.append(
                sorted((i.content, i.status, i.trust, i.source, tuple(i.sources)) for i in items)
            )
        assert states[0] == states[1]
