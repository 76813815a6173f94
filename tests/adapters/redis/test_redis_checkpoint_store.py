"""What only the Redis store promises: its key layout, values it did not write, a server that is
not there, and who owns the client."""

from __future__ import annotations

import socket

import anyio
import pytest
import redis.asyncio as aioredis

from ditto.adapters.redis import RedisCheckpointStore
from ditto.runtime.checkpoints import CheckpointError
from ditto.runtime.checkpoints.port import Lease
from tests.services import RedisSpace

pytestmark = [pytest.mark.anyio, pytest.mark.redis]


def _closed_port() -> int:
    """A local port nothing listens on (it was free a moment ago)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


async def test_keys_live_under_the_prefix_and_delete_removes_them_all(
    redis_space: RedisSpace,
) -> None:
    store = RedisCheckpointStore.from_url(redis_space.url, prefix=redis_space.prefix)
    try:
        await store.save("run", "graph:g", b"\xffenv")
        await store.append("run", [("t1", b"a"), ("t2", b"b")])
        pattern = f"{redis_space.prefix}*"
        keys = {key.decode() async for key in store.client.scan_iter(match=pattern)}
        assert keys == {
            f"{redis_space.prefix}checkpoint:run",
            f"{redis_space.prefix}checkpoint-records:run",
            f"{redis_space.prefix}checkpoints",
        }
        stored = await store.client.hgetall(store.checkpoint_key("run"))
        assert (stored[b"scope"], stored[b"envelope"], stored[b"records"]) == (
            b"graph:g",
            b"\xffenv",
            b"2",
        )
        assert await store.client.llen(store.records_key("run")) == 2
        assert await store.client.zscore(store.index_key, "run") == float(stored[b"updated_at"])
        assert await store.delete("run") is True
        assert [key async for key in store.client.scan_iter(match=pattern)] == []
    finally:
        await store.aclose()


@pytest.mark.parametrize("corrupt", ["wrong-type", "bad-record", "missing-field"])
async def test_values_the_store_did_not_write_are_corrupt(
    redis_space: RedisSpace, corrupt: str
) -> None:
    store = RedisCheckpointStore.from_url(redis_space.url, prefix=redis_space.prefix)
    try:
        await store.save("run", "graph:g", b"")
        await store.append("run", [("t", b"v")])
        if corrupt == "wrong-type":
            await store.client.delete(store.checkpoint_key("run"))
            await store.client.set(store.checkpoint_key("run"), "a plain string")
        elif corrupt == "bad-record":
            await store.client.rpush(store.records_key("run"), b"\xc1 not msgpack")
        else:
            await store.client.hdel(store.checkpoint_key("run"), "envelope")
        with pytest.raises(CheckpointError) as raised:
            await store.load("run")
        assert raised.value.code == "CHECKPOINT_CORRUPT"
    finally:
        await store.aclose()


async def test_an_unreachable_server_is_unavailable_and_the_url_is_never_shown() -> None:
    port = _closed_port()
    url = f"redis://checkpoints:s3cret-pw@127.0.0.1:{port}/0"
    store = RedisCheckpointStore.from_url(url)
    lease = Lease("run", "holder", 1, 1.0)
    try:
        for call in (
            store.save("run", "graph:g", b""),
            store.append("run", [("t", b"")]),
            store.load("run"),
            store.list(),
            store.delete("run"),
            store.acquire("run", "holder", 10),
            store.renew(lease, 10),
            store.release(lease),
            store.save("run", "graph:g", b"", fence=lease),
        ):
            with pytest.raises(CheckpointError) as raised:
                await call
            error = raised.value
            assert error.code == "CHECKPOINT_STORE_UNAVAILABLE"
            assert error.retryable is True
            for secret in (url, "s3cret-pw", str(port), "127.0.0.1"):
                assert secret not in str(error)
                assert secret not in repr(error.to_info())
            assert error.__cause__ is not None  # the driver's error stays, for the log
    finally:
        await store.aclose()


def test_a_malformed_url_is_invalid_input_without_repeating_it() -> None:
    with pytest.raises(CheckpointError) as raised:
        RedisCheckpointStore.from_url("http://user:s3cret-pw@example.invalid/0")
    assert raised.value.code == "INVALID_INPUT"
    assert "s3cret-pw" not in str(raised.value)


async def test_an_injected_client_stays_open_after_the_store_closes(
    redis_space: RedisSpace,
) -> None:
    client = aioredis.Redis.from_url(redis_space.url)
    try:
        store = RedisCheckpointStore(client, prefix=redis_space.prefix)
        await store.save("run", "graph:g", b"")
        await store.aclose()
        assert await client.exists(store.checkpoint_key("run")) == 1
    finally:
        await client.aclose()


async def test_an_append_racing_a_delete_never_leaves_orphan_records(
    redis_space: RedisSpace,
) -> None:
    """The existence check and the push are one script: an append that loses the race is
    ``CHECKPOINT_NOT_FOUND`` and writes nothing, so no records outlive their checkpoint."""
    store = RedisCheckpointStore.from_url(redis_space.url, prefix=redis_space.prefix)
    try:
        for round_ in range(20):
            await store.save("run", "graph:g", b"")
            async with anyio.create_task_group() as group:
                for n in range(10):
                    group.start_soon(_append_quietly, store, f"r{round_}-{n}")
                group.start_soon(store.delete, "run")
            if await store.load("run") is None:
                assert await store.client.exists(store.records_key("run")) == 0
            await store.delete("run")
    finally:
        await store.aclose()


async def _append_quietly(store: RedisCheckpointStore, key: str) -> None:
    try:
        await store.append("run", [(key, b"v")])
    except CheckpointError as exc:
        if exc.code != "CHECKPOINT_NOT_FOUND":
            raise


async def test_lease_keys_live_under_the_prefix_and_expire_on_their_own(
    redis_space: RedisSpace,
) -> None:
    store = RedisCheckpointStore.from_url(redis_space.url, prefix=redis_space.prefix)
    try:
        lease = await store.acquire("run", "host:1:run", 30)
        await store.save("run", "graph:g", b"", fence=lease)
        pattern = f"{redis_space.prefix}checkpoint-lease*"
        keys = {key.decode() async for key in store.client.scan_iter(match=pattern)}
        assert keys == {store.lease_key("run"), f"{redis_space.prefix}checkpoint-lease-token"}
        assert store.lease_key("run") == f"{redis_space.prefix}checkpoint-lease:run"
        held = await store.client.hgetall(store.lease_key("run"))
        assert (held[b"holder"], held[b"token"]) == (b"host:1:run", str(lease.token).encode())
        # Redis drops an abandoned lease by itself, a little after it expired.
        assert 0 < await store.client.pttl(store.lease_key("run")) <= 31_000
        assert await store.delete("run", fence=lease) is True
        assert await store.client.exists(store.lease_key("run")) == 0
        assert (
            await store.client.get(f"{redis_space.prefix}checkpoint-lease-token")
            == str(lease.token).encode()
        )  # the counter stays: tokens are never reused
    finally:
        await store.aclose()


async def test_leases_expire_on_the_server_clock_not_the_callers(
    redis_space: RedisSpace,
) -> None:
    """A caller whose clock is far off still gets a lease in the server's time, so callers
    on hosts that disagree about the time agree about who holds a lease."""
    store = RedisCheckpointStore.from_url(
        redis_space.url, prefix=redis_space.prefix, clock=lambda: 1_000.0
    )
    try:
        before = await store.client.time()
        lease = await store.acquire("run", "holder", 10)
        after = await store.client.time()
        taken_us = round(lease.expires_at * 1_000_000) - 10_000_000
        # (1 µs either way: the float of expires_at may round its last microsecond)
        assert before[0] * 1_000_000 + before[1] - 1 <= taken_us
        assert taken_us <= after[0] * 1_000_000 + after[1] + 1
    finally:
        await store.aclose()


async def test_a_lease_key_the_store_did_not_write_is_corrupt(redis_space: RedisSpace) -> None:
    store = RedisCheckpointStore.from_url(redis_space.url, prefix=redis_space.prefix)
    try:
        await store.client.set(store.lease_key("run"), "a plain string")
        for call in (store.acquire("run", "h", 10), store.delete("run")):
            with pytest.raises(CheckpointError) as raised:
                await call
            assert raised.value.code == "CHECKPOINT_CORRUPT"
    finally:
        await store.aclose()
