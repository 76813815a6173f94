"""``RetryPolicy``: explicit, visible retries on ``invoke``, on graph tasks and as a worker's
default — backoff and jitter, which failures are retried, the deadline, cancellation, the key
every attempt shares, and what the result and a checkpoint say about the attempts."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import anyio
import msgspec
import pytest

from ditto import (
    AttemptInfo,
    DittoError,
    ErrorCode,
    InvalidInputError,
    NodeContext,
    NodeResult,
    NodeSpec,
    RetryPolicy,
    WorkerDefinitionError,
    create_ditto,
    define_worker,
    graph,
)
from ditto.adapters.sqlite import SqliteCheckpointStore

pytestmark = pytest.mark.anyio

FAST = RetryPolicy(max_attempts=4, initial=0.001, multiplier=2.0, max=0.004, jitter=False)
"""Pauses of milliseconds: the tests count attempts, never time them."""


class Flaky:
    """``FLAKY.RUN`` fails its first ``failures`` calls with ``code`` (``retryable`` as given),
    then echoes its input; every call's attempt, key and execution id are recorded."""

    def __init__(self, failures: int, code: str = "STORE_UNAVAILABLE", retryable: bool = True):
        self.failures = failures
        self.code = code
        self.retryable = retryable
        self.calls: list[tuple[int, str, str]] = []
        self.failed = anyio.Event()

    async def run(self, value: Any, ctx: NodeContext) -> Any:
        self.calls.append((ctx.attempt, ctx.idempotency_key, ctx.execution_id))
        if len(self.calls) <= self.failures:
            self.failed.set()
            raise DittoError("not yet", code=self.code, retryable=self.retryable)
        return value

    def worker(self, retry: RetryPolicy | None = None, type: str = "flaky") -> Any:
        return define_worker(type, {"FLAKY.RUN": NodeSpec(self.run)}, retry=retry)

    @property
    def attempts(self) -> list[int]:
        return [attempt for attempt, _, _ in self.calls]


# ----------------------------------------------------------------------------- the policy


def test_the_pause_grows_by_the_multiplier_up_to_max_without_jitter() -> None:
    policy = RetryPolicy(max_attempts=9, initial=0.5, multiplier=2.0, max=3.0, jitter=False)
    assert [policy.delay(n) for n in range(1, 7)] == [0.5, 1.0, 2.0, 3.0, 3.0, 3.0]
    assert RetryPolicy(initial=1, multiplier=10, max=5, jitter=False).delay(10_000) == 5.0


@pytest.mark.parametrize("draw", [0.0, 0.25, 0.5, 0.999999])
def test_jitter_keeps_the_pause_within_its_bounds(draw: float) -> None:
    full = RetryPolicy(initial=2.0, multiplier=2.0, max=30.0, jitter=True)
    assert 0.0 < full.delay(2, lambda: draw) <= 4.0
    assert full.delay(2, lambda: draw) == pytest.approx(4.0 * (1 - draw))
    proportional = RetryPolicy(initial=2.0, multiplier=2.0, max=30.0, jitter=0.25)
    assert 3.0 <= proportional.delay(2, lambda: draw) <= 4.0
    assert proportional.delay(2, lambda: draw) == pytest.approx(4.0 * (1 - 0.25 * draw))


def test_jitter_with_real_draws_stays_within_bounds() -> None:
    policy = RetryPolicy(initial=1.0, multiplier=3.0, max=5.0, jitter=0.5)
    pauses = [policy.delay(3) for _ in range(500)]
    assert all(2.5 <= pause <= 5.0 for pause in pauses)
    assert len(set(pauses)) > 1  # jittered, not constant


@pytest.mark.parametrize(
    ("arguments", "named"),
    [
        ({"max_attempts": 0}, "max_attempts"),
        ({"max_attempts": 2.5}, "max_attempts"),
        ({"max_attempts": True}, "max_attempts"),
        ({"initial": -1}, "initial"),
        ({"initial": float("nan")}, "initial"),
        ({"max": float("inf")}, "max"),
        ({"initial": 5, "max": 1}, "max must be >= initial"),
        ({"multiplier": 0.5}, "multiplier"),
        ({"jitter": 1.5}, "jitter"),
        ({"jitter": "yes"}, "jitter"),
        ({"retry_on": "TIMEOUT"}, "retry_on"),
        ({"retry_on": []}, "retry_on"),
        ({"retry_on": [3]}, "retry_on"),
        ({"retry_on": ["timeout"]}, "UPPER_SNAKE"),
        ({"retry_on": [ErrorCode.INVALID_INPUT]}, "INVALID_INPUT is never retried"),
        ({"retry_on": ["INTERRUPTED"]}, "INTERRUPTED is never retried"),
        ({"retry_on": ["CANCELLED"]}, "CANCELLED is never retried"),
    ],
)
def test_a_bad_policy_is_refused_at_construction_naming_the_argument(
    arguments: dict[str, Any], named: str
) -> None:
    with pytest.raises(InvalidInputError, match=named) as raised:
        RetryPolicy(**arguments)
    assert raised.value.code == ErrorCode.INVALID_INPUT


def test_a_policy_is_an_immutable_value() -> None:
    policy = RetryPolicy(retry_on=[ErrorCode.TIMEOUT, "STORE_UNAVAILABLE"])
    assert policy.retry_on == frozenset({"TIMEOUT", "STORE_UNAVAILABLE"})
    assert policy == RetryPolicy(retry_on=("STORE_UNAVAILABLE", "TIMEOUT"))
    assert hash(policy) == hash(RetryPolicy(retry_on=("STORE_UNAVAILABLE", "TIMEOUT")))
    with pytest.raises(AttributeError):
        policy.max_attempts = 9  # type: ignore[misc]  # frozen


# ----------------------------------------------------------------------------- invoke


async def test_a_retryable_failure_is_retried_with_one_key_and_new_execution_ids() -> None:
    flaky = Flaky(failures=2)
    async with create_ditto(workers=[flaky.worker()]) as runtime:
        result = await runtime.invoke("FLAKY.RUN", "x", retry=FAST)
    assert result.ok
    assert result.output == "x"
    assert result.attempts == 3
    assert flaky.attempts == [1, 2, 3]
    keys = {key for _, key, _ in flaky.calls}
    assert len(keys) == 1  # one piece of work, one key
    ids = [execution_id for _, _, execution_id in flaky.calls]
    assert len(set(ids)) == 3
    assert result.execution_id == ids[-1]
    assert keys == {ids[0]}  # a top-level call's key: its first attempt's execution id
    assert [(a.execution_id, a.status, a.error.code) for a in result.retries] == [
        (ids[0], "failed", "STORE_UNAVAILABLE"),
        (ids[1], "failed", "STORE_UNAVAILABLE"),
    ]
    assert [a.delay_ms for a in result.retries] == pytest.approx([1.0, 2.0])
    assert all(a.worker_id == "flaky-1" for a in result.retries)


async def test_the_attempts_run_out_and_the_last_failure_is_the_result() -> None:
    flaky = Flaky(failures=99)
    async with create_ditto(workers=[flaky.worker()]) as runtime:
        result = await runtime.invoke("FLAKY.RUN", "x", retry=FAST)
    assert result.status == "failed"
    assert result.error is not None
    assert result.error.code == "STORE_UNAVAILABLE"
    assert result.attempts == FAST.max_attempts == len(flaky.calls)
    assert len(result.retries) == FAST.max_attempts - 1


async def test_without_a_policy_a_retryable_failure_runs_once() -> None:
    flaky = Flaky(failures=1)
    async with create_ditto(workers=[flaky.worker()]) as runtime:
        result = await runtime.invoke("FLAKY.RUN", "x")
    assert result.status == "failed"
    assert result.error is not None
    assert result.error.retryable
    assert result.attempts == 1
    assert result.retries == ()
    assert len(flaky.calls) == 1


async def test_a_failure_that_is_not_retryable_is_not_retried() -> None:
    flaky = Flaky(failures=1, code="CONFLICT", retryable=False)
    async with create_ditto(workers=[flaky.worker()]) as runtime:
        result = await runtime.invoke("FLAKY.RUN", "x", retry=FAST)
    assert result.status == "failed"
    assert result.attempts == 1
    assert len(flaky.calls) == 1


async def test_retry_on_retries_only_the_codes_it_names() -> None:
    named = RetryPolicy(max_attempts=3, initial=0.001, jitter=False, retry_on=["CONFLICT"])
    not_retryable_but_named = Flaky(failures=1, code="CONFLICT", retryable=False)
    retryable_but_not_named = Flaky(failures=1, code="STORE_UNAVAILABLE", retryable=True)
    async with create_ditto(workers=[not_retryable_but_named.worker()]) as runtime:
        assert (await runtime.invoke("FLAKY.RUN", "x", retry=named)).attempts == 2
    async with create_ditto(workers=[retryable_but_not_named.worker()]) as runtime:
        result = await runtime.invoke("FLAKY.RUN", "x", retry=named)
    assert result.status == "failed"
    assert result.attempts == 1
    assert len(retryable_but_not_named.calls) == 1


async def test_invalid_input_and_an_interrupt_are_never_retried() -> None:
    asked: list[int] = []

    async def typed(value: int, ctx: NodeContext) -> int:
        return value

    async def ask(value: Any, ctx: NodeContext) -> Any:
        asked.append(ctx.attempt)
        return ctx.interrupt("go?")

    everything = RetryPolicy(max_attempts=5, initial=0.001, retry_on=["INTERNAL_ERROR"])
    worker = define_worker("w", {"W.TYPED": typed, "W.ASK": ask}, retry=everything)
    async with create_ditto(workers=[worker]) as runtime:
        invalid = await runtime.invoke("W.TYPED", "not a number", retry=FAST)
        interrupted = await runtime.invoke("W.ASK", None)
    assert invalid.error is not None
    assert invalid.error.code == "INVALID_INPUT"
    assert invalid.attempts == 1
    assert interrupted.error is not None
    assert interrupted.error.code == "INTERRUPTED"
    assert interrupted.attempts == 1
    assert asked == [1]


async def test_no_pause_is_taken_that_would_end_past_the_deadline() -> None:
    flaky = Flaky(failures=99)
    slow = RetryPolicy(max_attempts=5, initial=30.0, max=30.0, jitter=False)
    async with create_ditto(workers=[flaky.worker()]) as runtime:
        result = await runtime.invoke("FLAKY.RUN", "x", timeout=5.0, retry=slow)
    assert result.status == "failed"
    assert result.attempts == 1
    assert len(flaky.calls) == 1


async def test_the_timeout_bounds_all_attempts_together() -> None:
    flaky = Flaky(failures=10_000)
    steady = RetryPolicy(max_attempts=10_000, initial=0.01, multiplier=1.0, jitter=False)
    async with create_ditto(workers=[flaky.worker()]) as runtime:
        result = await runtime.invoke("FLAKY.RUN", "x", timeout=0.3, retry=steady)
    assert result.status in ("failed", "timeout")
    assert 1 <= result.attempts < 10_000
    if result.attempts == len(flaky.calls) + 1:
        # The last pause ended before the deadline but woke after it: that attempt timed out
        # before its handler could start, and it counts.
        assert result.status == "timeout"
    else:
        assert result.attempts == len(flaky.calls)


async def test_the_callers_cancellation_during_a_pause_propagates() -> None:
    flaky = Flaky(failures=99)
    patient = RetryPolicy(max_attempts=3, initial=20.0, max=20.0, jitter=False)
    results: list[NodeResult[Any]] = []
    async with create_ditto(workers=[flaky.worker()]) as runtime:
        with anyio.CancelScope() as scope:
            async with anyio.create_task_group() as group:

                async def cancel_after_the_first_failure() -> None:
                    await flaky.failed.wait()
                    scope.cancel()

                group.start_soon(cancel_after_the_first_failure)
                results.append(await runtime.invoke("FLAKY.RUN", "x", timeout=25, retry=patient))
    assert scope.cancelled_caught
    assert results == []  # never turned into a result
    assert len(flaky.calls) == 1


async def test_each_retry_is_logged_at_info(caplog: pytest.LogCaptureFixture) -> None:
    flaky = Flaky(failures=2)
    async with create_ditto(workers=[flaky.worker()]) as runtime:
        with caplog.at_level(logging.INFO, logger="ditto.runtime"):
            await runtime.invoke("FLAKY.RUN", "x", retry=FAST)
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith("retrying")]
    assert lines == [
        "retrying FLAKY.RUN: attempt 1 ended failed (STORE_UNAVAILABLE); attempt 2 in 0.001 s",
        "retrying FLAKY.RUN: attempt 2 ended failed (STORE_UNAVAILABLE); attempt 3 in 0.002 s",
    ]


async def test_invoke_refuses_a_retry_that_is_not_a_policy() -> None:
    async with create_ditto(workers=[Flaky(0).worker()]) as runtime:
        with pytest.raises(InvalidInputError, match="RetryPolicy"):
            await runtime.invoke("FLAKY.RUN", "x", retry={"max_attempts": 3})  # type: ignore[arg-type]


# ----------------------------------------------------------------------------- worker default


async def test_a_workers_default_applies_and_a_calls_policy_wins() -> None:
    flaky = Flaky(failures=99)
    async with create_ditto(workers=[flaky.worker(retry=FAST)]) as runtime:
        by_default = await runtime.invoke("FLAKY.RUN", "x")
        assert len(flaky.calls) == FAST.max_attempts
        flaky.calls.clear()
        switched_off = await runtime.invoke("FLAKY.RUN", "x", retry=RetryPolicy(max_attempts=1))
        assert len(flaky.calls) == 1
        flaky.calls.clear()
        own = await runtime.invoke("FLAKY.RUN", "x", retry=RetryPolicy(2, initial=0.001))
        assert len(flaky.calls) == 2
    assert (by_default.attempts, switched_off.attempts, own.attempts) == (4, 1, 2)


def test_define_worker_refuses_a_retry_that_is_not_a_policy() -> None:
    with pytest.raises(WorkerDefinitionError, match="retry must be a RetryPolicy"):
        define_worker("w", {"W.RUN": NodeSpec(Flaky(0).run)}, retry=3)  # type: ignore[arg-type]


async def test_two_workers_of_a_node_type_cannot_declare_different_defaults() -> None:
    other = RetryPolicy(max_attempts=2)
    async with create_ditto(workers=[Flaky(0).worker(retry=FAST)]) as runtime:
        with pytest.raises(WorkerDefinitionError, match="another default retry policy"):
            runtime.register(Flaky(0).worker(retry=other, type="other"))
        runtime.register(Flaky(0).worker(retry=FAST, type="same"))  # the same one is fine
        runtime.register(Flaky(0).worker(type="none"))  # so is none
        assert runtime.engine.registry.route("FLAKY.RUN").retry == FAST


# ----------------------------------------------------------------------------- graphs


async def test_a_graph_task_is_retried_under_its_own_policy_with_its_task_key() -> None:
    flaky = Flaky(failures=2)
    plan = graph("g").node("t", "FLAKY.RUN", [], lambda i, d: i, retry=FAST)
    async with create_ditto(workers=[flaky.worker()]) as runtime:
        run = await runtime.run(plan, "x")
    assert run.ok
    assert run["t"].attempts == 3
    assert flaky.attempts == [1, 2, 3]
    assert len({key for _, key, _ in flaky.calls}) == 1
    assert [a.error.code for a in run["t"].retries] == ["STORE_UNAVAILABLE"] * 2


async def test_a_task_without_a_policy_uses_the_workers_and_a_tasks_policy_wins() -> None:
    flaky = Flaky(failures=99)
    plan = (
        graph("g")
        .node("default", "FLAKY.RUN", [], lambda i, d: i)
        .node("once", "FLAKY.RUN", ["default"], lambda i, d: i, retry=RetryPolicy(1))
    )
    async with create_ditto(workers=[flaky.worker(retry=FAST)]) as runtime:
        run = await runtime.run(plan, "x")
    assert run["default"].attempts == FAST.max_attempts
    assert run["once"].attempts == 1
    assert len(flaky.calls) == FAST.max_attempts + 1


async def test_a_checkpointed_run_records_the_attempts(tmp_path: Path) -> None:
    path = tmp_path / "runs.sqlite"
    flaky = Flaky(failures=2)
    plan = graph("g").node("t", "FLAKY.RUN", [], lambda i, d: i, retry=FAST)
    async with create_ditto(
        workers=[flaky.worker()], checkpoints=SqliteCheckpointStore(path)
    ) as runtime:
        first = await runtime.run(plan, "x", checkpoint="job-1")
    assert first.ok
    assert first["t"].attempts == 3
    async with create_ditto(
        workers=[flaky.worker()], checkpoints=SqliteCheckpointStore(path)
    ) as runtime:
        again = await runtime.resume("job-1", plan=plan)
    assert len(flaky.calls) == 3  # read back, not run again
    stored = again["t"]
    assert stored.attempts == 3
    assert [a.error.code for a in stored.retries] == ["STORE_UNAVAILABLE"] * 2
    assert [a.execution_id for a in stored.retries] == [e for _, _, e in flaky.calls[:2]]


def test_a_result_encoded_before_retries_existed_decodes_with_one_attempt() -> None:
    old = (
        b'{"execution_id":"e","node":"A.B","status":"failed","output":null,'
        b'"error":{"code":"TIMEOUT","message":"m","retryable":true,"details":null},'
        b'"worker_id":"w-1","duration_ms":1.5}'
    )
    result = msgspec.json.decode(old, type=NodeResult[Any])
    assert result.attempts == 1
    assert result.retries == ()
    assert result.error is not None
    assert result.error.code == "TIMEOUT"
    retried = msgspec.structs.replace(
        result, attempts=2, retries=(AttemptInfo("d", "timeout", result.error, "w-1", 1.0, 5.0),)
    )
    for codec in (msgspec.json, msgspec.msgpack):
        assert codec.decode(codec.encode(retried), type=NodeResult[Any]) == retried


async def test_a_call_refused_for_capacity_succeeds_once_a_slot_is_free() -> None:
    release = anyio.Event()
    holding = anyio.Event()

    async def hold(value: Any, ctx: NodeContext) -> Any:
        if value == "hold":
            holding.set()
            await release.wait()
        return value

    class ReleaseOnRetry(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if record.getMessage().startswith("retrying BUSY.RUN"):
                release.set()

    handler = ReleaseOnRetry(logging.INFO)
    log = logging.getLogger("ditto.runtime")
    previous = log.level
    log.addHandler(handler)
    log.setLevel(logging.INFO)
    steady = RetryPolicy(max_attempts=50, initial=0.005, multiplier=1.0, jitter=False)
    worker = define_worker("busy", {"BUSY.RUN": NodeSpec(hold)}, concurrency=1)
    try:
        async with create_ditto(workers=[worker]) as runtime:
            async with anyio.create_task_group() as group:
                group.start_soon(runtime.invoke, "BUSY.RUN", "hold")
                await holding.wait()
                result = await runtime.invoke("BUSY.RUN", "next", retry=steady)
    finally:
        log.removeHandler(handler)
        log.setLevel(previous)
    assert result.ok
    assert result.attempts >= 2
    assert result.retries[0].error.code == "NO_WORKER_AVAILABLE"
