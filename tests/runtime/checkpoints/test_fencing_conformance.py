"""Fenced writes (``save``/``append``/``delete`` with ``fence=``) and the lease check of an
unfenced ``delete``, run against every backend: a holder whose lease expired, was released or
was taken over writes nothing, and nobody deletes a running run's checkpoint by accident."""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Any

import anyio
import pytest

from ditto.errors import ErrorCode
from ditto.runtime.checkpoints import CheckpointError, CheckpointStore, StoredCheckpoint
from ditto.runtime.checkpoints.port import Lease
from tests.runtime.checkpoints.conftest import LONG, SHORT, Backend, refusal

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("still_clock")]


async def _code(call: Awaitable[Any]) -> str:
    error = await refusal(call)
    if error.code == ErrorCode.CHECKPOINT_LEASE_LOST:
        assert error.retryable is False
    return error.code


async def _loaded(store: CheckpointStore, checkpoint_id: str) -> StoredCheckpoint:
    stored = await store.load(checkpoint_id)
    assert stored is not None
    return stored


def _stale_writes(store: CheckpointStore, lease: Lease) -> list[Awaitable[Any]]:
    return [
        store.save("run", "graph:stale", b"stale", fence=lease),
        store.append("run", [("stale", b"x")], fence=lease),
        store.append("run", [], fence=lease),
        store.delete("run", fence=lease),
    ]


async def test_writes_fenced_by_the_current_lease_land(store: CheckpointStore) -> None:
    lease = await store.acquire("run", "holder", LONG)
    await store.save("run", "graph:g", b"env", fence=lease)
    await store.append("run", [("t1", b"a"), ("t2", b"b")], fence=lease)
    renewed = await store.renew(lease, LONG)
    await store.append("run", [("t3", b"c")], fence=renewed)
    await store.append("run", [("t4", b"d")], fence=lease)  # same token: the same lease
    stored = await _loaded(store, "run")
    assert (stored.scope, stored.envelope) == ("graph:g", b"env")
    assert [key for key, _ in stored.records] == ["t1", "t2", "t3", "t4"]


async def test_concurrent_fenced_appends_each_land_exactly_once(store: CheckpointStore) -> None:
    lease = await store.acquire("run", "holder", LONG)
    await store.save("run", "graph:g", b"", fence=lease)

    async def append(n: int) -> None:
        await store.append("run", [(f"t{n}", b"v")], fence=lease)

    async with anyio.create_task_group() as group:
        for n in range(200):
            group.start_soon(append, n)
    stored = await _loaded(store, "run")
    assert sorted(key for key, _ in stored.records) == sorted(f"t{n}" for n in range(200))


async def test_a_fenced_delete_deletes_and_releases(store: CheckpointStore) -> None:
    lease = await store.acquire("run", "holder", LONG)
    await store.save("run", "graph:g", b"", fence=lease)
    assert await store.delete("run", fence=lease) is True
    assert await store.load("run") is None
    after = await store.acquire("run", "next", LONG)  # free at once: released
    assert after.token > lease.token
    assert await store.delete("run", fence=after) is False  # nothing left to delete


async def test_a_stale_holder_after_a_takeover_writes_nothing(
    backend: Backend, store: CheckpointStore
) -> None:
    old = await store.acquire("run", "old", SHORT)
    await backend.expire(old)
    new = await store.acquire("run", "new", LONG)
    await store.save("run", "graph:g", b"new envelope", fence=new)
    await store.append("run", [("t1", b"new")], fence=new)
    for call in _stale_writes(store, old):
        assert await _code(call) == ErrorCode.CHECKPOINT_LEASE_LOST
    stored = await _loaded(store, "run")
    assert (stored.scope, stored.envelope, stored.records) == (
        "graph:g",
        b"new envelope",
        (("t1", b"new"),),
    )
    [info] = await store.list()
    assert (info.id, info.records) == ("run", 1)
    await store.append("run", [("t2", b"new")], fence=new)  # the new holder goes on


async def test_an_expired_lease_fences_nothing_even_if_nobody_took_it(
    backend: Backend, store: CheckpointStore
) -> None:
    lease = await store.acquire("run", "holder", SHORT)
    await store.save("run", "graph:g", b"before", fence=lease)
    await backend.expire(lease)
    for call in _stale_writes(store, lease):
        assert await _code(call) == ErrorCode.CHECKPOINT_LEASE_LOST
    stored = await _loaded(store, "run")
    assert (stored.scope, stored.envelope, stored.records) == ("graph:g", b"before", ())


async def test_a_released_lease_fences_nothing(store: CheckpointStore) -> None:
    lease = await store.acquire("run", "holder", LONG)
    await store.save("run", "graph:g", b"before", fence=lease)
    await store.release(lease)
    for call in _stale_writes(store, lease):
        assert await _code(call) == ErrorCode.CHECKPOINT_LEASE_LOST
    assert (await _loaded(store, "run")).envelope == b"before"


async def test_a_lost_fence_is_reported_before_a_missing_checkpoint(
    backend: Backend, store: CheckpointStore
) -> None:
    lease = await store.acquire("ghost", "holder", SHORT)
    code = await _code(store.append("ghost", [("t", b"")], fence=lease))
    assert code == ErrorCode.CHECKPOINT_NOT_FOUND  # held, but never saved
    await backend.expire(lease)
    code = await _code(store.append("ghost", [("t", b"")], fence=lease))
    assert code == ErrorCode.CHECKPOINT_LEASE_LOST
    assert await store.load("ghost") is None


async def test_an_unfenced_delete_of_a_leased_checkpoint_is_busy(store: CheckpointStore) -> None:
    lease = await store.acquire("run", "host-a:1:run", LONG)
    await store.save("run", "graph:g", b"env", fence=lease)
    await store.append("run", [("t", b"v")])  # unfenced save and append: as before leases
    with pytest.raises(CheckpointError) as raised:
        await store.delete("run")
    error = raised.value
    assert (error.code, error.retryable) == (ErrorCode.CHECKPOINT_BUSY, True)
    assert error.details is not None
    assert error.details["holder"] == "host-a:1:run"
    assert 0 < error.details["expires_in"] <= LONG
    assert [key for key, _ in (await _loaded(store, "run")).records] == ["t"]
    await store.acquire("not-saved-yet", "host-b:2:run", LONG)  # a run before its first save
    assert await _code(store.delete("not-saved-yet")) == ErrorCode.CHECKPOINT_BUSY
    await store.release(lease)
    assert await store.delete("run") is True


async def test_an_unfenced_delete_clears_an_expired_lease(
    backend: Backend, store: CheckpointStore
) -> None:
    lease = await store.acquire("run", "holder", SHORT)
    await store.save("run", "graph:g", b"", fence=lease)
    await backend.expire(lease)
    assert await store.delete("run") is True
    assert await _code(store.renew(lease, LONG)) == ErrorCode.CHECKPOINT_LEASE_LOST
    assert (await store.acquire("run", "next", LONG)).token > lease.token


async def test_a_fence_of_another_checkpoint_or_not_a_lease_is_invalid(
    store: CheckpointStore,
) -> None:
    other = await store.acquire("other", "holder", LONG)
    mine = await store.acquire("run", "holder", LONG)
    await store.save("run", "graph:g", b"env", fence=mine)
    bad_fences: list[Any] = [other, ("run", "holder", mine.token, mine.expires_at), "lease", 1]
    for fence in bad_fences:
        for call in (
            store.save("run", "graph:x", b"changed", fence=fence),
            store.append("run", [("t", b"")], fence=fence),
            store.delete("run", fence=fence),
        ):
            assert await _code(call) == ErrorCode.INVALID_INPUT
    stored = await _loaded(store, "run")
    assert (stored.scope, stored.envelope, stored.records) == ("graph:g", b"env", ())
