"""Governance on every store: retention (archive, purge, pinning, dry runs), access control
(enforce and observe), the audit log and history of archives."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack
from datetime import UTC, datetime, timedelta
from typing import Any

import anyio
import pytest

from ditto import Ditto, InvalidInputError, create_ditto
from tests.workers.memory.conftest import OpenStore, StoreEnv, TickingClock
from workers.memory import (
    AccessPolicy,
    AuditEvent,
    MemoryFilter,
    MemoryPatch,
    MemoryStore,
    OrderBy,
    RetentionPolicy,
    RetentionRule,
    create_memory_worker,
    run_hygiene,
)

pytestmark = pytest.mark.anyio

DAY = timedelta(days=1)
POLICY = RetentionPolicy(
    {
        "conversation": RetentionRule(archive_after_days=3, purge_after_days=30),
        "daily": RetentionRule(archive_after_days=7, purge_after_days=30),
    }
)


class Governed:
    """A store, its clock, and runtimes over it with chosen worker options."""

    def __init__(self, store: MemoryStore, clock: TickingClock, stack: AsyncExitStack) -> None:
        self.store = store
        self.clock = clock
        self.stack = stack

    async def runtime(self, **options: Any) -> Ditto:
        worker = create_memory_worker(self.store, clock=self.clock, **options)
        return await self.stack.enter_async_context(create_ditto(workers=[worker]))

    async def everything(self) -> list[Any]:
        await self.store.flush()
        return await self.store.query(MemoryFilter(archived="include"), OrderBy(), 10_000, None)

    def at(self, moment: datetime) -> Any:
        return lambda: moment


@pytest.fixture
async def governed(open_store: OpenStore, store_env: StoreEnv) -> AsyncIterator[Governed]:
    store = await open_store()
    async with AsyncExitStack() as stack:
        yield Governed(store, store_env.clock, stack)


async def ok(runtime: Ditto, node: str, payload: Any, principal: str | None = None) -> Any:
    result = await runtime.invoke(node, payload, principal=principal)
    assert result.ok, result.error
    return result.output


async def code(runtime: Ditto, node: str, payload: Any, principal: str | None = None) -> str:
    result = await runtime.invoke(node, payload, principal=principal)
    assert not result.ok, result.output
    assert result.error is not None
    return result.error.code


# ----------------------------------------------------------------- retention


async def test_hygiene_archives_then_purges_and_a_dry_run_predicts_it_exactly(
    governed: Governed,
) -> None:
    runtime = await governed.runtime(track_usage=True)
    written = await ok(
        runtime,
        "MEMORY.WRITE",
        {
            "memories": [
                {"key": "chat:old", "content": "old chat about tea", "category": "conversation"},
                {
                    "key": "chat:pinned",
                    "content": "pinned",
                    "category": "conversation",
                    "pinned": True,
                },
                {"key": "chat:used", "content": "espresso recipe", "category": "conversation"},
                {"key": "day:1", "content": "daily log", "category": "daily"},
                {"key": "fact:1", "content": "the user is left-handed"},
            ]
        },
    )
    ids = {item.key: item.id for item in written.items}
    # Four days later the espresso record is used (a SEARCH hit), which keeps it live.
    governed.clock.now += 4 * DAY
    hits = await ok(runtime, "MEMORY.SEARCH", {"query": "espresso"})
    assert [hit.memory.key for hit in hits.hits] == ["chat:used"]
    await governed.store.flush()

    moment = governed.clock.now + timedelta(minutes=1)
    before = await governed.everything()
    preview = await run_hygiene(governed.store, POLICY, dry_run=True, clock=governed.at(moment))
    assert await governed.everything() == before  # a dry run changes nothing
    report = await run_hygiene(governed.store, POLICY, clock=governed.at(moment))
    assert preview.dry_run
    assert not report.dry_run
    assert report.archived == preview.archived == [ids["chat:old"]]
    assert report.purged == preview.purged == []
    assert report.skipped == []

    # Archived: hidden from GET, QUERY and SEARCH unless asked for.
    got = await ok(runtime, "MEMORY.GET", {"keys": ["chat:old"]})
    assert got.items == []
    got = await ok(runtime, "MEMORY.GET", {"keys": ["chat:old"], "include_archived": True})
    assert got.items[0].archived_at is not None
    listed = await ok(runtime, "MEMORY.QUERY", {})
    assert ids["chat:old"] not in {item.id for item in listed.items}
    only = await ok(runtime, "MEMORY.QUERY", {"filter": {"archived": "only"}})
    assert [item.id for item in only.items] == [ids["chat:old"]]
    assert (await ok(runtime, "MEMORY.SEARCH", {"query": "tea"})).hits == []
    found = await ok(runtime, "MEMORY.SEARCH", {"query": "tea", "filter": {"archived": "include"}})
    assert [hit.memory.id for hit in found.hits] == [ids["chat:old"]]
    history = await governed.store.history(ids["chat:old"])
    assert [entry.change for entry in history] == ["create", "archive"]
    assert [entry.version for entry in history] == [1, 2]

    # A month later: the archived record is purged; the others are archived now (not purged in
    # the same run); pinned and core records are never touched.
    later = moment + 31 * DAY
    preview = await run_hygiene(governed.store, POLICY, dry_run=True, clock=governed.at(later))
    report = await run_hygiene(governed.store, POLICY, clock=governed.at(later))
    assert report.purged == preview.purged == [ids["chat:old"]]
    assert sorted(report.archived) == sorted(preview.archived)
    assert sorted(report.archived) == sorted([ids["chat:used"], ids["day:1"]])
    remaining = {item.key: item for item in await governed.everything()}
    assert set(remaining) == {"chat:pinned", "chat:used", "day:1", "fact:1"}
    assert remaining["chat:pinned"].archived_at is None
    assert remaining["fact:1"].archived_at is None
    assert [e.change for e in await governed.store.history(ids["chat:old"])][-1] == "delete"


async def test_an_update_revives_an_archived_record_and_a_changed_record_is_skipped(
    governed: Governed,
) -> None:
    runtime = await governed.runtime()
    (item,) = (
        await ok(
            runtime,
            "MEMORY.WRITE",
            {"memories": [{"key": "c", "content": "x", "category": "conversation"}]},
        )
    ).items
    moment = governed.clock.now + 4 * DAY
    assert (await run_hygiene(governed.store, POLICY, clock=governed.at(moment))).archived == [
        item.id
    ]
    revived = await ok(runtime, "MEMORY.UPDATE", {"updates": [{"id": item.id, "archived": False}]})
    assert revived.items[0].archived_at is None
    # The upsert of an archived record's key revives it too.
    await ok(runtime, "MEMORY.UPDATE", {"updates": [{"id": item.id, "archived": True}]})
    upserted = await ok(
        runtime,
        "MEMORY.WRITE",
        {"memories": [{"key": "c", "content": "y", "category": "conversation"}], "mode": "upsert"},
    )
    assert upserted.items[0].archived_at is None
    assert upserted.items[0].id == item.id


async def test_retention_rules_are_checked() -> None:
    with pytest.raises(InvalidInputError, match="core"):
        RetentionPolicy({"core": RetentionRule(archive_after_days=1)})
    with pytest.raises(InvalidInputError, match="archive"):
        RetentionRule(purge_after_days=3)
    with pytest.raises(InvalidInputError, match="less"):
        RetentionRule(archive_after_days=5, purge_after_days=3)


async def test_periodic_hygiene_runs_in_the_worker_and_stops_with_the_runtime(
    governed: Governed,
) -> None:
    # Records written "ten days ago" by the real clock, which the worker's hygiene reads: due
    # for archiving (3 days), not for purging (30). The test clock's fixed date drifted into
    # purge range as the calendar moved on, and a run between the archive and the end of the
    # runtime then deleted the record.
    governed.clock.now = datetime.now(UTC) - 10 * DAY
    async with create_ditto(
        workers=[
            create_memory_worker(
                governed.store, retention=POLICY, hygiene_interval_s=0.01
            )  # ... checked against the real clock
        ]
    ) as runtime:
        await ok(
            runtime,
            "MEMORY.WRITE",
            {"memories": [{"key": "c", "content": "x", "category": "conversation"}]},
        )
        for _ in range(1000):  # the background run archives it within a few intervals
            if not (await ok(runtime, "MEMORY.GET", {"keys": ["c"]})).items:
                break
            await anyio.sleep(0.01)
        else:
            pytest.fail("periodic hygiene never archived the record")
        await anyio.sleep(0.2)  # later runs leave it archived: not due for purging
    got = await governed.store.get([], ["c"], "default")
    assert got[0].archived_at is not None


# ----------------------------------------------------------------- access control


async def _alice_and_bob(runtime: Ditto) -> dict[str, str]:
    bob = await ok(
        runtime,
        "MEMORY.WRITE",
        {
            "memories": [
                {"key": "bob:secret", "content": "secret plan of bob"},
                {
                    "key": "bob:shared",
                    "content": "secret recipe bob shares",
                    "visibility": "shared",
                },
            ]
        },
        principal="bob",
    )
    alice = await ok(
        runtime,
        "MEMORY.WRITE",
        {"memories": [{"key": f"alice:{n}", "content": f"secret note {n}"} for n in range(12)]},
        principal="alice",
    )
    ids = {item.key: item.id for item in bob.items + alice.items}
    assert {item.owner for item in bob.items} == {"bob"}
    assert [item.visibility for item in bob.items] == ["private", "shared"]
    return ids


async def test_enforced_access_hides_and_protects_another_principals_private_records(
    governed: Governed,
) -> None:
    runtime = await governed.runtime(access=AccessPolicy("enforce"))
    ids = await _alice_and_bob(runtime)
    secret = ids["bob:secret"]

    got = await ok(
        runtime, "MEMORY.GET", {"ids": [secret], "keys": ["bob:secret", "bob:shared"]}, "alice"
    )
    assert [item.key for item in got.items] == ["bob:shared"]

    # QUERY pages never hold Bob's private record, and every page is full.
    seen: list[str] = []
    cursor = None
    while True:
        request: dict[str, Any] = {"limit": 5}
        if cursor:
            request["cursor"] = cursor
        page = await ok(runtime, "MEMORY.QUERY", request, "alice")
        assert len(page.items) == 5 or page.next_cursor is None
        seen += [item.id for item in page.items]
        cursor = page.next_cursor
        if cursor is None:
            break
    assert secret not in seen
    assert len(seen) == 13  # alice's twelve and bob's shared one

    # SEARCH filters inside the store: "secret" matches all fourteen, the limit is still met.
    hits = await ok(runtime, "MEMORY.SEARCH", {"query": "secret plan", "limit": 10}, "alice")
    assert len(hits.hits) == 10
    assert secret not in {hit.memory.id for hit in hits.hits}

    for node, payload in (
        ("MEMORY.UPDATE", {"updates": [{"id": secret, "content": "mine now"}]}),
        ("MEMORY.DELETE", {"ids": [secret]}),
        ("MEMORY.WRITE", {"memories": [{"key": "bob:secret", "content": "x"}], "mode": "upsert"}),
        ("MEMORY.WRITE", {"memories": [{"content": "x", "owner": "bob"}]}),
        ("MEMORY.QUERY", {"filter": {"visible_to": "bob"}}),
        ("MEMORY.UPDATE", {"updates": [{"id": ids["bob:shared"], "visibility": "private"}]}),
    ):
        assert await code(runtime, node, payload, "alice") == "FORBIDDEN", node
    assert await code(runtime, "MEMORY.QUERY", {}) == "FORBIDDEN"  # no principal at all

    # Nothing of Bob's changed; Bob still sees (and may change) his own private record.
    (stored,) = await governed.store.get([secret], [], "default")
    assert (stored.version, stored.content) == (1, "secret plan of bob")
    mine = await ok(runtime, "MEMORY.GET", {"ids": [secret]}, "bob")
    assert [item.id for item in mine.items] == [secret]
    await ok(runtime, "MEMORY.UPDATE", {"updates": [{"id": secret, "content": "v2"}]}, "bob")
    # A shared record may be edited by others (only its visibility is the owner's).
    await ok(
        runtime, "MEMORY.UPDATE", {"updates": [{"id": ids["bob:shared"], "summary": "s"}]}, "alice"
    )


async def test_observe_mode_denies_nothing_but_logs_and_audits_what_enforce_would_deny(
    governed: Governed, caplog: pytest.LogCaptureFixture
) -> None:
    runtime = await governed.runtime(access=AccessPolicy("observe"), audit=True)
    ids = await _alice_and_bob(runtime)
    secret = ids["bob:secret"]
    with caplog.at_level(logging.WARNING, logger="ditto.workers.memory.access"):
        got = await ok(runtime, "MEMORY.GET", {"ids": [secret]}, "alice")
        deleted = await ok(runtime, "MEMORY.DELETE", {"ids": [secret]}, "alice")
    assert [item.id for item in got.items] == [secret]
    assert deleted.deleted == [secret]
    assert sum("would deny" in record.getMessage() for record in caplog.records) == 2
    entries = await governed.store.audit_log(principal="alice", limit=1000)
    would = [(entry.node, entry.ids) for entry in entries if entry.decision == "would-deny"]
    assert would == [("MEMORY.GET", [secret]), ("MEMORY.DELETE", [secret])]


# ----------------------------------------------------------------- audit


async def test_the_audit_log_records_every_read_and_write_in_order(governed: Governed) -> None:
    runtime = await governed.runtime(access=AccessPolicy("enforce"), audit=True)
    written = await ok(
        runtime, "MEMORY.WRITE", {"memories": [{"content": "apple banana"}]}, "alice"
    )
    record = written.items[0].id
    await ok(runtime, "MEMORY.GET", {"ids": [record]}, "alice")
    await ok(runtime, "MEMORY.QUERY", {}, "alice")
    await ok(runtime, "MEMORY.SEARCH", {"query": "apple"}, "alice")
    await ok(runtime, "MEMORY.UPDATE", {"updates": [{"id": record, "content": "c"}]}, "alice")
    assert await code(runtime, "MEMORY.DELETE", {"ids": [record]}, "bob") == "FORBIDDEN"
    await ok(runtime, "MEMORY.DELETE", {"ids": [record]}, "alice")

    entries = await governed.store.audit_log(limit=100)
    assert [(e.principal, e.node, e.ids, e.decision) for e in entries] == [
        ("alice", "MEMORY.WRITE", [record], "allow"),
        ("alice", "MEMORY.GET", [record], "allow"),
        ("alice", "MEMORY.QUERY", [record], "allow"),
        ("alice", "MEMORY.SEARCH", [record], "allow"),
        ("alice", "MEMORY.UPDATE", [record], "allow"),
        ("bob", "MEMORY.DELETE", [record], "deny"),
        ("alice", "MEMORY.DELETE", [record], "allow"),
    ]
    seqs = [entry.seq for entry in entries]
    assert seqs == sorted(set(seqs))
    page = await governed.store.audit_log(after=seqs[2], limit=2)
    assert [entry.seq for entry in page] == seqs[3:5]
    assert [e.node for e in await governed.store.audit_log(principal="bob")] == ["MEMORY.DELETE"]


async def test_a_call_without_a_principal_under_enforce_is_audited_as_denied(
    governed: Governed,
) -> None:
    runtime = await governed.runtime(access=AccessPolicy("enforce"), audit=True)
    assert await code(runtime, "MEMORY.GET", {"keys": ["diary"]}) == "FORBIDDEN"
    assert await code(runtime, "MEMORY.WRITE", {"memories": [{"content": "x"}]}) == "FORBIDDEN"
    entries = await governed.store.audit_log(limit=100)
    assert [(e.principal, e.node, e.keys, e.decision) for e in entries] == [
        (None, "MEMORY.GET", ["diary"], "deny"),
        (None, "MEMORY.WRITE", [], "deny"),
    ]
    assert all(e.detail is not None and "principal" in e.detail for e in entries)


async def test_audit_retention_trims_only_old_entries(governed: Governed) -> None:
    start = governed.clock.now
    events = [AuditEvent(start + n * DAY, "p", "MEMORY.GET", [f"id{n}"], "allow") for n in range(5)]
    await governed.store.append_audit(events)
    cutoff = start + 2 * DAY
    assert await governed.store.purge_audit(cutoff, dry_run=True) == 2
    assert len(await governed.store.audit_log()) == 5
    assert await governed.store.purge_audit(cutoff) == 2
    left = await governed.store.audit_log()
    assert [entry.ids for entry in left] == [["id2"], ["id3"], ["id4"]]
    policy = RetentionPolicy(audit_days=1)
    report = await run_hygiene(governed.store, policy, clock=governed.at(start + 5 * DAY))
    assert report.audit_purged == 2  # id2 and id3 are more than a day older than that


async def test_imported_history_is_appended_once(governed: Governed) -> None:
    runtime = await governed.runtime()
    (item,) = (await ok(runtime, "MEMORY.WRITE", {"memories": [{"content": "x"}]})).items
    await ok(runtime, "MEMORY.UPDATE", {"updates": [{"id": item.id, "content": "y"}]})
    history = await governed.store.history(item.id)
    assert await governed.store.restore_history(history) == 0  # already held
    foreign = [
        entry.__class__(f"other-{n}", entry.version, entry.change, entry.at, entry.record)
        for n, entry in enumerate(history)
    ]
    assert await governed.store.restore_history(foreign) == 2
    assert await governed.store.restore_history(foreign) == 0
    assert [e.change for e in await governed.store.history("other-0")] == ["create"]


# ----------------------------------------------------------------- races and edge rules


class Hook:
    """An embedder that runs ``action`` (another principal's change) once, in the middle of a
    write — after the worker's own access check, before the store's transaction."""

    model_id = "hook"
    dimension = 4

    def __init__(self) -> None:
        self.action: Any = None

    async def embed(self, texts: list[str]) -> list[list[float]]:
        action, self.action = self.action, None
        if action is not None:
            await action()
        return [[1.0, float(len(text)), 0.0, 1.0] for text in texts]


async def test_a_change_between_the_check_and_the_write_cannot_slip_through(
    governed: Governed,
) -> None:
    hook = Hook()
    runtime = await governed.runtime(access=AccessPolicy("enforce"), embedder=hook, audit=True)

    async def bob_takes_the_key() -> None:
        await ok(runtime, "MEMORY.WRITE", {"memories": [{"key": "t", "content": "bob's"}]}, "bob")

    hook.action = bob_takes_the_key
    upsert = {"memories": [{"key": "t", "content": "alice's"}], "mode": "upsert"}
    assert await code(runtime, "MEMORY.WRITE", upsert, "alice") == "FORBIDDEN"
    (stored,) = await governed.store.get([], ["t"], "default")
    assert (stored.owner, stored.content) == ("bob", "bob's")

    shared = await ok(
        runtime,
        "MEMORY.WRITE",
        {"memories": [{"content": "bob shares", "visibility": "shared"}]},
        "bob",
    )
    record = shared.items[0].id

    async def bob_makes_it_private() -> None:
        await ok(
            runtime, "MEMORY.UPDATE", {"updates": [{"id": record, "visibility": "private"}]}, "bob"
        )

    hook.action = bob_makes_it_private
    edit = {"updates": [{"id": record, "content": "alice was here"}]}
    assert await code(runtime, "MEMORY.UPDATE", edit, "alice") == "FORBIDDEN"
    (after,) = await governed.store.get([record], [], "default")
    assert (after.visibility, after.content) == ("private", "bob shares")
    # Refused inside the store's transaction, and audited as denials all the same.
    denied = [e for e in await governed.store.audit_log(limit=100) if e.decision == "deny"]
    assert [(e.principal, e.node) for e in denied] == [
        ("alice", "MEMORY.WRITE"),
        ("alice", "MEMORY.UPDATE"),
    ]
    assert denied[1].ids == [record]


async def test_only_the_owner_changes_visibility_also_through_upsert_and_ownerless_records(
    governed: Governed,
) -> None:
    plain = await governed.runtime()  # written before access control: no owner
    legacy = (await ok(plain, "MEMORY.WRITE", {"memories": [{"content": "old"}]})).items[0].id
    runtime = await governed.runtime(access=AccessPolicy("enforce"))
    await ok(
        runtime,
        "MEMORY.WRITE",
        {"memories": [{"key": "s", "content": "x", "visibility": "shared"}]},
        "bob",
    )
    grab = {"memories": [{"key": "s", "content": "x", "visibility": "private"}], "mode": "upsert"}
    assert await code(runtime, "MEMORY.WRITE", grab, "alice") == "FORBIDDEN"
    hide = {"updates": [{"id": legacy, "visibility": "private"}]}
    assert await code(runtime, "MEMORY.UPDATE", hide, "mallory") == "FORBIDDEN"
    (still,) = await governed.store.get([legacy], [], "default")
    assert still.visibility == "shared"
    # Shared records stay editable by others: content, yes; visibility, no.
    same = {"memories": [{"key": "s", "content": "y"}], "mode": "upsert"}
    assert (await ok(runtime, "MEMORY.WRITE", same, "alice")).items[0].owner == "bob"


async def test_hygiene_archives_on_a_store_with_vectors(governed: Governed) -> None:
    runtime = await governed.runtime(embedder=Hook())
    (item,) = (
        await ok(
            runtime,
            "MEMORY.WRITE",
            {"memories": [{"content": "chat", "category": "conversation"}]},
        )
    ).items
    moment = governed.clock.now + 4 * DAY
    preview = await run_hygiene(governed.store, POLICY, dry_run=True, clock=governed.at(moment))
    report = await run_hygiene(governed.store, POLICY, clock=governed.at(moment))
    assert report.archived == preview.archived == [item.id]


async def test_a_record_revived_or_used_after_the_plan_is_not_purged_or_archived(
    governed: Governed,
) -> None:
    runtime = await governed.runtime()
    written = await ok(
        runtime,
        "MEMORY.WRITE",
        {
            "memories": [
                {"key": "a", "content": "alpha", "category": "conversation"},
                {"key": "b", "content": "beta", "category": "conversation"},
            ]
        },
    )
    first, second = (item.id for item in written.items)
    moment = governed.clock.now + 4 * DAY
    assert len((await run_hygiene(governed.store, POLICY, clock=governed.at(moment))).archived) == 2
    store = governed.store
    original_delete, original_update = store.delete, store.update

    async def delete_after_a_revival(ids: Any, guard: Any = None) -> Any:
        # Someone revives `first` just before the purge's transaction starts.
        await original_update([MemoryPatch(first, archived=False)])
        return await original_delete(ids, guard=guard)

    store.delete = delete_after_a_revival  # type: ignore[method-assign]
    later = moment + 31 * DAY
    report = await run_hygiene(store, POLICY, clock=governed.at(later))
    assert report.purged == [second]
    assert report.skipped == [first]
    assert [item.id for item in await store.get([first, second], [], "default")] == [first]
    store.delete = original_delete  # type: ignore[method-assign]

    # Used between the plan and the archive: it stays live.
    (third,) = (
        await ok(
            runtime,
            "MEMORY.WRITE",
            {"memories": [{"key": "c", "content": "gamma", "category": "conversation"}]},
        )
    ).items

    async def update_after_a_use(patches: Any, vectors: Any = None, guard: Any = None) -> Any:
        await store.record_usage([third.id], later + 40 * DAY)
        await store.flush()
        return await original_update(patches, vectors, guard)

    store.update = update_after_a_use  # type: ignore[method-assign]
    report = await run_hygiene(store, POLICY, clock=governed.at(later + 40 * DAY))
    assert third.id in report.skipped
    assert third.id not in report.archived
