"""Pruning: old checkpoints go, the newest ``keep_last`` stay whatever their age, a dry run
deletes nothing, and bad bounds are refused before anything is touched."""

from __future__ import annotations

import pytest

from ditto import InvalidInputError
from ditto.runtime.checkpoints import InProcessCheckpointStore, prune_checkpoints
from tests.runtime.checkpoints.conftest import FakeClock

pytestmark = pytest.mark.anyio

DAY = 86_400.0


async def _store_with_ages(clock: FakeClock, ages_in_days: list[int]) -> InProcessCheckpointStore:
    """Checkpoint ``c<age>`` last updated ``age`` days before ``clock.now`` (oldest first)."""
    store = InProcessCheckpointStore(clock=clock)
    start = clock.now
    for age in sorted(ages_in_days, reverse=True):
        clock.now = start - age * DAY
        await store.save(f"c{age}", "graph:g" if age % 2 else "loop:l", b"{}")
    clock.now = start
    return store


async def test_checkpoints_older_than_the_age_are_deleted() -> None:
    clock = FakeClock()
    store = await _store_with_ages(clock, [1, 3, 8, 30])
    gone = await prune_checkpoints(store, older_than=7 * DAY, now=clock.now)
    assert [info.id for info in gone] == ["c8", "c30"]
    assert [info.id for info in await store.list()] == ["c1", "c3"]


async def test_the_newest_are_kept_whatever_their_age() -> None:
    clock = FakeClock()
    store = await _store_with_ages(clock, [10, 20, 30, 40])
    gone = await prune_checkpoints(store, older_than=DAY, keep_last=2, now=clock.now)
    assert [info.id for info in gone] == ["c30", "c40"]
    assert [info.id for info in await store.list()] == ["c10", "c20"]
    assert [info.id for info in await prune_checkpoints(store, keep_last=1)] == ["c20"]


async def test_a_dry_run_deletes_nothing_and_a_scope_limits_the_prune() -> None:
    clock = FakeClock()
    store = await _store_with_ages(clock, [8, 9, 10, 11])
    would = await prune_checkpoints(store, older_than=DAY, dry_run=True, now=clock.now)
    assert [info.id for info in would] == ["c8", "c9", "c10", "c11"]
    assert len(await store.list()) == 4
    gone = await prune_checkpoints(store, older_than=DAY, scope="graph:g", now=clock.now)
    assert [info.id for info in gone] == ["c9", "c11"]
    assert [info.id for info in await store.list()] == ["c8", "c10"]


@pytest.mark.parametrize(
    "bounds",
    [{}, {"older_than": 0}, {"older_than": -1.0}, {"older_than": True}, {"keep_last": -1}],
)
async def test_bad_bounds_are_refused_before_anything(bounds: dict[str, object]) -> None:
    clock = FakeClock()
    store = await _store_with_ages(clock, [30])
    with pytest.raises(InvalidInputError):
        await prune_checkpoints(store, **bounds)  # type: ignore[arg-type]
    assert len(await store.list()) == 1


async def test_a_leased_checkpoint_is_kept_and_reported_busy_and_the_prune_goes_on() -> None:
    clock = FakeClock(step=0.0)
    store = await _store_with_ages(clock, [8, 9, 10, 11])
    running = await store.acquire("c9", "host:1:run", DAY)  # a run still going, renewing
    expired = await store.acquire("c11", "host:2:crashed", 60.0)
    clock.now = expired.expires_at + 1.0  # c11's run crashed: its lease ran out
    gone = await prune_checkpoints(store, older_than=DAY, now=clock.now)
    assert [info.id for info in gone] == ["c8", "c10", "c11"]
    assert [info.id for info in gone.busy] == ["c9"]
    assert [info.id for info in await store.list()] == ["c9"]
    await store.release(running)
    again = await prune_checkpoints(store, older_than=DAY, now=clock.now)
    assert ([info.id for info in again], again.busy) == (["c9"], ())
    assert await store.list() == []


async def test_a_dry_run_reports_no_busy_checkpoint_and_deletes_nothing() -> None:
    clock = FakeClock(step=0.0)
    store = await _store_with_ages(clock, [8, 9])
    await store.acquire("c9", "host:1:run", DAY)
    would = await prune_checkpoints(store, older_than=DAY, dry_run=True, now=clock.now)
    assert ([info.id for info in would], would.busy) == (["c8", "c9"], ())
    assert len(await store.list()) == 2
