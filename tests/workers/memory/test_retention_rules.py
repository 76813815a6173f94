"""Retention's two safety rules, on every store: an archived record is purged only after a
grace period, and custom categories follow ``daily``'s rule unless they have their own."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta

import pytest

from ditto import InvalidInputError
from tests.workers.memory.conftest import OpenStore, StoreEnv
from workers.memory import (
    MemoryDraft,
    MemoryFilter,
    OrderBy,
    RetentionPolicy,
    RetentionRule,
    run_hygiene,
)

pytestmark = pytest.mark.anyio

DAY = timedelta(days=1)
RULE = RetentionRule(archive_after_days=7, purge_after_days=7)


def at(moment: datetime) -> Callable[[], datetime]:
    return lambda: moment


async def test_a_record_archived_by_one_run_is_not_purged_by_the_next_within_the_grace(
    open_store: OpenStore, store_env: StoreEnv
) -> None:
    store = await open_store()
    (item,) = await store.write([MemoryDraft(content="old", category="daily")], "create")
    policy = RetentionPolicy({"daily": RULE}, purge_grace_days=2)
    store_env.clock.now += 30 * DAY  # the store stamps archived_at with its own clock
    first = store_env.clock.now + timedelta(seconds=1)
    archived = await run_hygiene(store, policy, clock=at(first))
    assert archived.archived == [item.id]

    # Seconds later the record is long inactive, but it has only just been archived.
    soon = await run_hygiene(store, policy, clock=at(first + timedelta(seconds=5)))
    assert soon.purged == []
    stored = await store.query(MemoryFilter(archived="include"), OrderBy(), 10, None)
    assert [record.id for record in stored] == [item.id]

    preview = await run_hygiene(store, policy, dry_run=True, clock=at(first + 2 * DAY + DAY / 24))
    report = await run_hygiene(store, policy, clock=at(first + 2 * DAY + DAY / 24))
    assert report.purged == preview.purged == [item.id]


async def test_custom_categories_follow_the_daily_rule_unless_they_have_their_own(
    open_store: OpenStore, store_env: StoreEnv
) -> None:
    store = await open_store()
    written = await store.write(
        [
            MemoryDraft(content="custom", category="project-notes"),
            MemoryDraft(content="own rule", category="scratch"),
            MemoryDraft(content="conversation", category="conversation"),
            MemoryDraft(content="core"),
            MemoryDraft(content="daily", category="daily"),
        ],
        "create",
    )
    ids = {record.category: record.id for record in written}
    policy = RetentionPolicy(
        {"daily": RULE, "scratch": RetentionRule(archive_after_days=100)}, purge_grace_days=0
    )
    moment = store_env.clock.now + 10 * DAY
    report = await run_hygiene(store, policy, clock=at(moment))
    assert sorted(report.archived) == sorted([ids["project-notes"], ids["daily"]])

    without_daily = RetentionPolicy({"scratch": RetentionRule(archive_after_days=1)})
    later = await run_hygiene(store, without_daily, clock=at(moment))
    assert later.archived == [ids["scratch"]]  # custom categories need daily's rule to follow


def test_the_grace_period_is_checked() -> None:
    with pytest.raises(InvalidInputError, match="purge_grace_days"):
        RetentionPolicy(purge_grace_days=-1)
