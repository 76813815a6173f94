"""A Redis outage under scoped CONTEXT calls: fail fast, recover without a restart, lose nothing.

Each test runs its own ``redis-server`` (``stoppable_redis``) and stops it under a live runtime:

* while the server is down, every scoped call (LOAD, SELECT, UPDATE, COMPRESS) is a ``failed``
  result with ``STATE_STORE_UNAVAILABLE``, retryable, at once (never a hang: each call runs
  under ``anyio.fail_after``), and explicit mode still works;
* once a server answers on the same port again, the same runtime and store work again;
* a server that stops with its data (``SHUTDOWN SAVE``) and restarts from it gives every
  working set back unchanged, version included, so a writer holding that version carries on.
"""

from __future__ import annotations

import signal
import subprocess
from collections.abc import AsyncIterator, Iterator
from typing import Any

import anyio
import msgspec
import pytest
import redis.asyncio as aioredis
from redis.exceptions import ConnectionError as RedisConnectionError

from ditto import Ditto, NodeResult, create_ditto
from tests.workers.context.test_redis_store import stoppable_redis
from workers.context import RedisContextStore, create_context_worker

__all__ = ("stoppable_redis",)

pytestmark = [pytest.mark.anyio, pytest.mark.redis]

PROMPT_S = 5.0
"""Far more than a refused connection takes; a call still waiting then is hanging."""
SCOPE = {"session_id": "outage"}
SOURCES = [
    {"role": "system", "content": "be brief"},
    {"id": "goal", "content": "find the espresso", "metadata": {"current_goal": True}},
]
SCOPED_CALLS: list[tuple[str, dict[str, Any]]] = [
    ("CONTEXT.LOAD", {"scope": SCOPE}),
    ("CONTEXT.LOAD", {"scope": SCOPE, "sources": SOURCES}),
    ("CONTEXT.SELECT", {"scope": SCOPE, "purpose": "infer", "max_tokens": 100}),
    ("CONTEXT.UPDATE", {"scope": SCOPE, "add": [{"id": "note", "content": "more"}]}),
    ("CONTEXT.COMPRESS", {"scope": SCOPE, "max_items": 3}),
]


@pytest.fixture
def server(stoppable_redis: tuple[str, subprocess.Popen[bytes]]) -> Iterator[Any]:
    """The private server's URL and process, and the servers a test starts again in its place
    (stopped afterwards)."""
    url, process = stoppable_redis
    restarted: list[subprocess.Popen[bytes]] = []
    yield url, process, restarted
    for again in restarted:
        again.kill()
        again.wait(timeout=10)


@pytest.fixture
async def runtime(server: Any) -> AsyncIterator[Ditto]:
    store = RedisContextStore.from_url(server[0])
    try:
        async with create_ditto(workers=[create_context_worker(store=store)]) as runtime:
            yield runtime
    finally:
        await store.aclose()


async def _start_again(
    url: str, process: subprocess.Popen[bytes], restarted: list[subprocess.Popen[bytes]]
) -> None:
    """The same server command (same port, same folder) again, once it answers."""
    again = subprocess.Popen(  # noqa: ASYNC220 - a server we stop in the fixture
        process.args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    restarted.append(again)
    client = aioredis.Redis.from_url(url)
    try:
        with anyio.fail_after(10):
            while True:
                try:
                    await client.ping()
                    return
                except RedisConnectionError:
                    assert again.poll() is None, "the restarted redis-server exited"
                    await anyio.sleep(0.02)  # polling for the server to listen, as the fixture
    finally:
        await client.aclose()


def _reap(process: subprocess.Popen[bytes]) -> None:
    """Wait for a server that was killed or told to shut down (moments). Blocking, on purpose:
    a helper thread (``anyio.to_thread``) would outlive the test and keep its event loop alive
    for the rest of the session."""
    process.wait(timeout=10)


async def _call(runtime: Ditto, node: str, payload: dict[str, Any]) -> NodeResult[Any]:
    with anyio.fail_after(PROMPT_S):
        return await runtime.invoke(node, payload)


async def _assert_unavailable(runtime: Ditto) -> None:
    for node, payload in SCOPED_CALLS:
        result = await _call(runtime, node, payload)
        assert result.status == "failed", (node, result)
        assert result.error is not None
        assert result.error.code == "STATE_STORE_UNAVAILABLE", (node, result.error)
        assert result.error.retryable, node
    explicit = await _call(runtime, "CONTEXT.LOAD", {"sources": SOURCES})
    assert explicit.ok, explicit.error  # explicit mode never needed the store


async def _state(runtime: Ditto) -> Any:
    read = await _call(runtime, "CONTEXT.LOAD", {"scope": SCOPE})
    return msgspec.to_builtins(read.output) if read.ok else read.error


async def test_a_stopped_server_fails_fast_and_the_same_runtime_recovers(
    server: Any, runtime: Ditto
) -> None:
    """The fixture's server keeps nothing on disk (``--save ""``, no AOF): what it held dies
    with it, so after a crash only recovery is checked, over three outages in a row."""
    url, process, restarted = server
    for outage in range(3):
        loaded = await _call(runtime, "CONTEXT.LOAD", {"scope": SCOPE, "sources": SOURCES})
        assert loaded.ok, (outage, loaded.error)
        running = restarted[-1] if restarted else process
        running.kill()  # a crash: nothing saved
        _reap(running)

        await _assert_unavailable(runtime)

        await _start_again(url, process, restarted)
        gone = await _call(runtime, "CONTEXT.LOAD", {"scope": SCOPE})
        assert gone.error is not None
        assert gone.error.code == "CONTEXT_NOT_FOUND", gone.error  # no persistence
        for node, payload in [*SCOPED_CALLS[1:], SCOPED_CALLS[0]]:
            result = await _call(runtime, node, payload)
            assert result.ok, (outage, node, result.error)


async def test_state_saved_before_a_restart_is_kept_version_and_all(
    server: Any, runtime: Ditto
) -> None:
    url, process, restarted = server
    loaded = await _call(runtime, "CONTEXT.LOAD", {"scope": SCOPE, "sources": SOURCES})
    assert loaded.ok, loaded.error
    before = await _state(runtime)
    client = aioredis.Redis.from_url(url)
    try:
        await client.shutdown(save=True)  # a clean stop: the data goes to dump.rdb in --dir
    finally:
        await client.aclose()
    _reap(process)

    await _assert_unavailable(runtime)

    await _start_again(url, process, restarted)
    assert await _state(runtime) == before  # the refused writes changed nothing either
    updated = await _call(
        runtime,
        "CONTEXT.UPDATE",
        {"scope": SCOPE, "expected_version": before["version"], "add": [{"id": "n", "content": 1}]},
    )
    assert updated.ok, updated.error


async def test_a_frozen_server_costs_a_call_its_deadline_and_no_more(
    server: Any, runtime: Ditto
) -> None:
    """SIGSTOP: the server accepts connections but never answers. A scoped call then ends at its
    own deadline (``timeout``, retryable), and once the server resumes the same runtime reads
    what it held, unchanged by the calls that timed out before sending their write."""
    _, process, _ = server
    loaded = await _call(runtime, "CONTEXT.LOAD", {"scope": SCOPE, "sources": SOURCES})
    assert loaded.ok, loaded.error
    before = await _state(runtime)
    process.send_signal(signal.SIGSTOP)
    try:
        for node, payload in SCOPED_CALLS:
            with anyio.fail_after(PROMPT_S):
                result = await runtime.invoke(node, payload, timeout=0.3)
            assert result.status == "timeout", (node, result)
            assert result.error is not None
            assert result.error.retryable, node
    finally:
        process.send_signal(signal.SIGCONT)
    assert await _state(runtime) == before
    again = await _call(
        runtime, "CONTEXT.UPDATE", {"scope": SCOPE, "add": [{"id": "n", "content": 1}]}
    )
    assert again.ok, again.error
