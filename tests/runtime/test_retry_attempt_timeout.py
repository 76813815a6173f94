"""``RetryPolicy(attempt_timeout=...)``: each attempt gets a deadline of its own inside the
call's, so an attempt that hangs ends ``TIMEOUT`` and is retried while the call has time; and
``ctx.invoke(..., retry=...)``: a nested call with a policy of its own."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from ditto import (
    DittoError,
    InvalidInputError,
    NodeContext,
    RetryPolicy,
    create_ditto,
    define_worker,
)

pytestmark = pytest.mark.anyio


class HangsOnce:
    """``HANG.ONCE`` hangs on its first call and answers every later one."""

    def __init__(self) -> None:
        self.calls = 0

    async def run(self, value: Any, ctx: NodeContext) -> Any:
        self.calls += 1
        if self.calls == 1:
            await anyio.sleep_forever()
        return {"attempt": ctx.attempt}

    def worker(self) -> Any:
        return define_worker("hangs", {"HANG.ONCE": self.run})


async def test_an_attempt_that_hangs_is_timed_out_and_retried() -> None:
    hangs = HangsOnce()
    policy = RetryPolicy(max_attempts=3, initial=0.001, jitter=False, attempt_timeout=0.2)
    async with create_ditto(workers=[hangs.worker()]) as runtime:
        result = await runtime.invoke("HANG.ONCE", None, timeout=30, retry=policy)
    assert result.ok, result.error
    assert result.output == {"attempt": 2}
    assert result.attempts == 2
    assert [attempt.error.code for attempt in result.retries if attempt.error] == ["TIMEOUT"]


async def test_without_an_attempt_timeout_a_hanging_attempt_uses_the_whole_deadline() -> None:
    hangs = HangsOnce()
    policy = RetryPolicy(max_attempts=3, initial=0.001, jitter=False)
    async with create_ditto(workers=[hangs.worker()]) as runtime:
        result = await runtime.invoke("HANG.ONCE", None, timeout=0.3, retry=policy)
    assert result.status == "timeout"
    assert result.attempts == 1
    assert hangs.calls == 1


@pytest.mark.parametrize("bad", [0, -1, float("nan"), float("inf"), "1", True])
def test_a_bad_attempt_timeout_is_refused(bad: Any) -> None:
    with pytest.raises(InvalidInputError, match="attempt_timeout"):
        RetryPolicy(attempt_timeout=bad)


def test_the_attempt_deadline_never_passes_the_calls() -> None:
    policy = RetryPolicy(attempt_timeout=5)
    assert policy.attempt_deadline(deadline=100.0, now=90.0) == 95.0
    assert policy.attempt_deadline(deadline=100.0, now=97.0) == 100.0
    assert RetryPolicy().attempt_deadline(deadline=100.0, now=1.0) == 100.0


async def test_a_nested_call_takes_a_policy_of_its_own() -> None:
    failures = [2]
    keys: list[str] = []

    async def flaky(value: Any, ctx: NodeContext) -> Any:
        keys.append(ctx.idempotency_key)
        if failures[0]:
            failures[0] -= 1
            raise DittoError("later", code="STORE_UNAVAILABLE", retryable=True)
        return value

    async def parent(value: Any, ctx: NodeContext) -> Any:
        policy = RetryPolicy(max_attempts=3, initial=0.001, jitter=False)
        result = await ctx.invoke("W.FLAKY", value, retry=policy)
        return {"attempts": result.attempts, "output": result.unwrap()}

    worker = define_worker("w", {"W.FLAKY": flaky, "W.PARENT": parent})
    async with create_ditto(workers=[worker]) as runtime:
        result = await runtime.invoke("W.PARENT", "x")
    assert result.unwrap() == {"attempts": 3, "output": "x"}
    assert len(keys) == 3
    assert len(set(keys)) == 1, "every attempt of the nested call has the same key"


async def test_a_nested_call_refuses_a_retry_that_is_not_a_policy() -> None:
    async def parent(value: Any, ctx: NodeContext) -> Any:
        return await ctx.invoke("W.ECHO", value, retry="twice")  # type: ignore[arg-type]

    async def echo(value: Any, ctx: NodeContext) -> Any:
        return value

    async with create_ditto(workers=[define_worker("w", {"W.P": parent, "W.ECHO": echo})]) as rt:
        result = await rt.invoke("W.P", 1)
    assert result.error is not None
    assert result.error.code == "INVALID_INPUT"
