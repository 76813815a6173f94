"""The lease half of the ``CheckpointStore`` contract (``acquire``, ``renew``, ``release``), run
against every backend. Fenced writes are in ``test_fencing_conformance.py``.

A lease that must stay live is taken for ``LONG`` seconds; one that must expire is taken for
``SHORT`` and :meth:`Backend.expire` returns once the store's clock has passed it (the
in-process clock is moved; SQLite's and Redis's are waited for). No test asserts a duration.
"""

from __future__ import annotations

import math
from typing import Any

import anyio
import pytest

from ditto.errors import ErrorCode
from ditto.runtime.checkpoints import CheckpointError, CheckpointStore
from ditto.runtime.checkpoints.port import Lease
from tests.runtime.checkpoints.conftest import LONG, SHORT, Backend, refusal

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("still_clock")]


async def _busy_holder(store: CheckpointStore, checkpoint_id: str) -> str:
    """Who holds the live lease of ``checkpoint_id`` (asked as a second opener would)."""
    error = await refusal(store.acquire(checkpoint_id, "someone-else", LONG))
    assert error.code == ErrorCode.CHECKPOINT_BUSY
    assert error.details is not None
    holder = error.details["holder"]
    assert isinstance(holder, str)
    return holder


# ----------------------------------------------------------------------- acquire


async def test_a_lease_names_its_checkpoint_holder_token_and_expiry(
    store: CheckpointStore,
) -> None:
    lease = await store.acquire("new-run", "host-a:41:run-1", LONG)
    assert isinstance(lease, Lease)
    assert (lease.checkpoint_id, lease.holder) == ("new-run", "host-a:41:run-1")
    assert type(lease.token) is int
    assert type(lease.expires_at) is float
    assert math.isfinite(lease.expires_at)
    assert await store.load("new-run") is None  # taken before the first save, creating nothing
    assert await store.list() == []


@pytest.mark.parametrize("second", ["host-b:7:run-2", "host-a:41:run-1"], ids=["other", "same"])
async def test_a_second_opener_is_busy_with_the_holder_and_expires_in(
    store: CheckpointStore, second: str
) -> None:
    await store.acquire("run", "host-a:41:run-1", LONG)
    error = await refusal(store.acquire("run", second, LONG))
    assert error.code == ErrorCode.CHECKPOINT_BUSY
    assert error.retryable is True
    assert error.details is not None
    assert error.details["holder"] == "host-a:41:run-1"
    expires_in = error.details["expires_in"]
    assert type(expires_in) is float
    assert 0 < expires_in <= LONG
    assert "host-a" not in error.message  # the holder is in details, the message stays generic
    assert error.to_info().details == error.details


async def test_acquire_after_expiry_gives_a_larger_token(
    backend: Backend, store: CheckpointStore
) -> None:
    first = await store.acquire("run", "first", SHORT)
    await backend.expire(first)
    second = await store.acquire("run", "second", LONG)
    assert second.holder == "second"
    assert second.token > first.token
    assert await _busy_holder(store, "run") == "second"


async def test_tokens_increase_over_every_acquire_of_the_store(store: CheckpointStore) -> None:
    tokens = [(await store.acquire(f"run-{n}", "h", LONG)).token for n in range(5)]
    assert tokens == sorted(tokens)
    assert len(set(tokens)) == 5


async def test_tokens_are_never_reused_after_release(
    backend: Backend, store: CheckpointStore
) -> None:
    first = await store.acquire("run", "h", LONG)
    await store.release(first)
    await store.delete("run")
    again = await store.acquire("run", "h", LONG)
    assert again.token > first.token
    if backend.kind != "inprocess":  # a new store object on the same file or prefix
        other = backend.open()
        assert (await other.acquire("elsewhere", "h", LONG)).token > again.token


# ----------------------------------------------------------------------- renew


async def test_renew_extends_the_lease_and_keeps_its_token(store: CheckpointStore) -> None:
    lease = await store.acquire("run", "holder", 30.0)
    renewed = await store.renew(lease, 600.0)
    assert (renewed.checkpoint_id, renewed.holder, renewed.token) == ("run", "holder", lease.token)
    assert renewed.expires_at > lease.expires_at
    error = await refusal(store.acquire("run", "other", LONG))
    assert error.details is not None
    assert error.details["expires_in"] > 30.0  # the store keeps the renewed expiry
    again = await store.renew(renewed, 600.0)
    assert (again.token, again.holder) == (lease.token, "holder")
    assert again.expires_at >= renewed.expires_at
    assert (await store.renew(lease, 600.0)).token == lease.token  # by the old value as well


async def test_renew_after_expiry_is_lease_lost_even_if_nobody_took_it(
    backend: Backend, store: CheckpointStore
) -> None:
    lease = await store.acquire("run", "holder", SHORT)
    await backend.expire(lease)
    error = await refusal(store.renew(lease, LONG))
    assert error.code == ErrorCode.CHECKPOINT_LEASE_LOST
    assert error.retryable is False
    taker = await store.acquire("run", "taker", LONG)  # nothing was renewed
    assert taker.token > lease.token


async def test_renew_after_a_takeover_is_lease_lost_and_leaves_the_new_lease(
    backend: Backend, store: CheckpointStore
) -> None:
    lease = await store.acquire("run", "old", SHORT)
    await backend.expire(lease)
    await store.acquire("run", "new", LONG)
    assert (await refusal(store.renew(lease, LONG))).code == ErrorCode.CHECKPOINT_LEASE_LOST
    assert await _busy_holder(store, "run") == "new"


# ----------------------------------------------------------------------- release


async def test_release_lets_another_take_the_lease_at_once(store: CheckpointStore) -> None:
    lease = await store.acquire("run", "first", LONG)
    await store.release(lease)
    await store.release(lease)  # idempotent
    second = await store.acquire("run", "second", LONG)
    assert second.token > lease.token
    assert (await refusal(store.renew(lease, LONG))).code == ErrorCode.CHECKPOINT_LEASE_LOST


async def test_releasing_a_lost_lease_does_nothing_to_the_new_holder(
    backend: Backend, store: CheckpointStore
) -> None:
    lease = await store.acquire("run", "old", SHORT)
    await backend.expire(lease)
    new = await store.acquire("run", "new", LONG)
    await store.release(lease)  # no error, and the new lease stays
    assert await _busy_holder(store, "run") == "new"
    assert (await store.renew(new, LONG)).token == new.token


# ----------------------------------------------------------------------- concurrency


async def test_concurrent_acquires_give_exactly_one_lease(store: CheckpointStore) -> None:
    leases: list[Lease] = []
    refusals: list[CheckpointError] = []

    async def acquire(n: int) -> None:
        try:
            leases.append(await store.acquire("run", f"opener-{n}", LONG))
        except CheckpointError as exc:
            refusals.append(exc)

    async with anyio.create_task_group() as group:
        for n in range(20):
            group.start_soon(acquire, n)
    [winner] = leases
    assert len(refusals) == 19
    assert {error.code for error in refusals} == {ErrorCode.CHECKPOINT_BUSY}
    assert all(error.details and error.details["holder"] == winner.holder for error in refusals)


# ----------------------------------------------------------------------- validation

BAD_HOLDERS = ["", "h" * 201, "a\nb", "nul\x00", "c1\x85", "lone\ud800", 7, None, b"host"]
BAD_TTLS = [0, 0.0, -1.0, math.inf, math.nan, 86_400.5, True, "5", None]


@pytest.mark.parametrize("holder", BAD_HOLDERS, ids=repr)
async def test_invalid_holders_are_refused_and_take_nothing(
    store: CheckpointStore, holder: Any
) -> None:
    assert (await refusal(store.acquire("run", holder, LONG))).code == ErrorCode.INVALID_INPUT
    await store.acquire("run", "h" * 200, LONG)  # the longest holder, and the lease was free


@pytest.mark.parametrize("ttl", BAD_TTLS, ids=repr)
async def test_invalid_ttls_are_refused_and_change_nothing(
    store: CheckpointStore, ttl: Any
) -> None:
    assert (await refusal(store.acquire("run", "h", ttl))).code == ErrorCode.INVALID_INPUT
    lease = await store.acquire("run", "h", 86_400)  # a day, as an int, is fine
    assert (await refusal(store.renew(lease, ttl))).code == ErrorCode.INVALID_INPUT
    assert (await store.renew(lease, 1)).token == lease.token


@pytest.mark.parametrize("bad", ["", "x" * 201, "a\nb", None], ids=repr)
async def test_invalid_ids_and_leases_are_refused(store: CheckpointStore, bad: Any) -> None:
    assert (await refusal(store.acquire(bad, "h", LONG))).code == ErrorCode.INVALID_INPUT
    not_leases: list[Any] = [
        Lease(bad, "h", 1, 1.0),
        Lease("run", "h", "1", 1.0),  # type: ignore[arg-type]
        ("run", "h", 1, 1.0),
        None,
    ]
    for not_a_lease in not_leases:
        assert (await refusal(store.renew(not_a_lease, LONG))).code == ErrorCode.INVALID_INPUT
        assert (await refusal(store.release(not_a_lease))).code == ErrorCode.INVALID_INPUT
    await store.acquire("run", "h", LONG)


# ----------------------------------------------------------------------- lifecycle


async def test_after_aclose_every_lease_call_is_unavailable(store: CheckpointStore) -> None:
    lease = await store.acquire("run", "h", LONG)
    await store.save("run", "graph:g", b"", fence=lease)
    await store.aclose()
    for call in (
        store.acquire("other", "h", LONG),
        store.renew(lease, LONG),
        store.release(lease),
        store.save("run", "graph:g", b"", fence=lease),
        store.append("run", [("t", b"")], fence=lease),
        store.delete("run", fence=lease),
    ):
        error = await refusal(call)
        assert error.code == ErrorCode.CHECKPOINT_STORE_UNAVAILABLE
        assert error.retryable is False
