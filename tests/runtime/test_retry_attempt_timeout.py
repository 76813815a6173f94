"""``RetryPolicy(attempt_timeout=...)``: each attempt gets a deadline of its own inside the
call's, so an attempt that hangs ends ``TIMEOUT`` and is retried while the call has time."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from ditto import InvalidInputError, NodeContext, RetryPolicy, create_ditto, define_worker

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
