"""A call's ``RetryPolicy`` around a remote worker (over real Redis Streams): the caller retries
a failed remote call as it would a local one — each attempt a new remote invocation (a new
execution id, so a worker that remembers executed ids runs it), all with the call's idempotency
key."""

from __future__ import annotations

from typing import Any

import pytest

from ditto import DittoError, NodeContext, RetryPolicy, create_ditto, define_worker
from tests.runtime.transports.conftest import Harness

pytestmark = pytest.mark.anyio


async def test_a_remote_call_is_retried_by_the_caller(harness: Harness) -> None:
    seen: list[tuple[str, str]] = []
    attempts: list[int] = []

    async def flaky(value: Any, ctx: NodeContext) -> Any:
        seen.append((ctx.idempotency_key, ctx.execution_id))
        attempts.append(ctx.attempt)
        if len(seen) < 3:
            raise DittoError("not yet", code="STORE_UNAVAILABLE", retryable=True)
        return value

    await harness.serve(define_worker("flaky", {"FLAKY.RUN": flaky}), "flaky-remote-1")
    policy = RetryPolicy(max_attempts=4, initial=0.001, jitter=False)
    async with create_ditto() as runtime:
        runtime.register_remote(["FLAKY.RUN"], transport=harness.new_transport())
        result = await runtime.invoke("FLAKY.RUN", {"n": 1}, timeout=20, retry=policy)
        once = await runtime.invoke("FLAKY.RUN", {"n": 2}, timeout=20)
    assert result.ok
    assert result.output == {"n": 1}
    assert result.attempts == 3
    assert result.worker_id == "flaky-remote-1"
    assert [a.error.code for a in result.retries] == ["STORE_UNAVAILABLE"] * 2
    assert [a.worker_id for a in result.retries] == ["flaky-remote-1"] * 2
    keys = {key for key, _ in seen[:3]}
    ids = [execution_id for _, execution_id in seen[:3]]
    assert len(keys) == 1
    assert len(set(ids)) == 3
    assert [a.execution_id for a in result.retries] == ids[:2]
    assert once.ok
    assert once.attempts == 1
    assert len(seen) == 4
    assert attempts == [1, 2, 3, 1], "the worker's ctx.attempt counts the caller's retries"
    # The worker's queue wait and run time reach the caller's result.
    assert once.queue_ms is not None
    assert once.queue_ms >= 0
    assert once.run_ms is not None
    assert 0 <= once.run_ms <= once.duration_ms
