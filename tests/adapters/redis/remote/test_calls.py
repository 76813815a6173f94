"""One call to a remote worker process, from the caller's runtime: contracts on both sides,
identity, deadlines, cancellation, back-pressure, fail-fast routing, forged messages and a
graceful stop."""

from __future__ import annotations

import signal
import time
import uuid
from collections.abc import Callable
from functools import partial
from typing import Any

import anyio
import msgspec
import pytest

from ditto import ErrorCode, NodeContract, NodeResult, create_ditto, graph
from ditto.adapters.redis.keys import (
    GROUP,
    calls_key,
    cancel_channel,
    nodes_key,
    replies_key,
    worker_key,
)
from ditto.runtime.transports.envelope import (
    DEFAULT_MAX_BYTES,
    CallEnvelope,
    CancelNotice,
    ReplyEnvelope,
    Signer,
)
from tests.adapters.redis.remote.processes import MEASURE, SECRET, WORK, Cluster, eventually

pytestmark = [pytest.mark.anyio, pytest.mark.redis]

OTHER_SECRET = b"not-the-shared-secret-0123456789"


class CallerMeasure(msgspec.Struct, frozen=True):
    """The caller's own copy of ``PROBE.MEASURE``'s contract."""

    text: str
    repeat: int = 1


class CallerMeasured(msgspec.Struct, frozen=True):
    text: str
    length: int


class NeverProduced(msgspec.Struct, frozen=True):
    """An output contract the probe's ``PROBE.WORK`` does not meet."""

    missing: str


def envelope(
    cluster: Cluster,
    node_type: str = WORK,
    *,
    deadline_in: float = 30.0,
    reply_to: str = "forger",
    payload: Any = None,
) -> CallEnvelope:
    return CallEnvelope(
        uuid.uuid4().hex,
        node_type,
        msgspec.Raw(msgspec.msgpack.encode({"n": 1} if payload is None else payload)),
        time.time() + deadline_in,
        None,
        None,
        1,
        replies_key(cluster.prefix, reply_to),
    )


async def drained(cluster: Cluster, node_type: str = WORK) -> None:
    """Wait until the worker has answered (deleted) every entry of the node type's stream."""

    async def empty() -> bool:
        return await cluster.pending(node_type) == 0

    await eventually(empty, message=f"the {node_type} stream is drained")


# ----------------------------------------------------------------- contracts and identity


async def test_the_caller_validates_inputs_and_sends_nothing_invalid(cluster: Cluster) -> None:
    await cluster.start("w1")
    async with cluster.caller([NodeContract(MEASURE, CallerMeasure, CallerMeasured)]) as runtime:
        bad = await runtime.invoke(MEASURE, {"text": 5})
        oversized = await runtime.invoke(MEASURE, {"text": "x" * DEFAULT_MAX_BYTES})
        # The worker created the stream (its consumer group); nothing was ever added to it.
        info: Any = await cluster.client.xinfo_stream(calls_key(cluster.prefix, MEASURE))
        assert info["last-generated-id"] == b"0-0"
        good = await runtime.invoke(MEASURE, {"text": "ab", "repeat": 3})
        as_struct = await runtime.invoke(MEASURE, CallerMeasure("xyz"))
    assert bad.status == "failed"
    assert bad.error is not None
    assert bad.error.code == ErrorCode.INVALID_INPUT
    assert oversized.status == "failed"
    assert oversized.error is not None
    assert oversized.error.code == ErrorCode.MESSAGE_REJECTED
    assert good.status == "success", good.error
    assert good.output == CallerMeasured("ababab", 6)
    assert type(good.output) is CallerMeasured
    assert as_struct.output == CallerMeasured("xyz", 3)
    assert sorted(run.execution_id for run in cluster.runs()) == sorted(
        [good.execution_id, as_struct.execution_id]
    )


async def test_the_worker_validates_inputs_the_caller_did_not_check(cluster: Cluster) -> None:
    await cluster.start("w1")
    async with cluster.caller([MEASURE]) as runtime:
        bad = await runtime.invoke(MEASURE, {"text": ["not", "text"]})
        good = await runtime.invoke(MEASURE, {"text": "ab"})
    assert bad.status == "failed"
    assert bad.error is not None
    assert bad.error.code == ErrorCode.INVALID_INPUT
    assert bad.worker_id == "w1"
    assert good.output == {"text": "ab", "length": 2}
    assert [run.execution_id for run in cluster.runs()] == [good.execution_id]


async def test_an_output_off_the_callers_contract_is_invalid_output(cluster: Cluster) -> None:
    await cluster.start("w1")
    async with cluster.caller([NodeContract(WORK, Any, NeverProduced)]) as runtime:
        result = await runtime.invoke(WORK, {"n": 4})
    assert result.status == "failed"
    assert result.error is not None
    assert result.error.code == ErrorCode.INVALID_OUTPUT
    assert result.output is None


async def test_principal_and_graph_scope_reach_the_remote_handler(cluster: Cluster) -> None:
    await cluster.start("w1")
    plan = (
        graph("remote-scope")
        .node("first", WORK, [], lambda run_input, deps: {"n": run_input})
        .node("second", WORK, ["first"], lambda _, deps: {"n": deps["first"].unwrap()["n"] + 1})
    )
    async with cluster.caller() as runtime:
        single = await runtime.invoke(WORK, {"n": 1}, principal="alice")
        anonymous = await runtime.invoke(WORK, {"n": 2})
        run = await runtime.run(plan, 10, principal="bob")
    assert single.status == "success", single.error
    assert single.worker_id == "w1"
    assert single.output == {"n": 1, "worker": "w1", "attempt": 1}
    (alice,) = cluster.runs(single.execution_id)
    assert (alice.principal, alice.execution, alice.attempt, alice.worker) == (
        "alice",
        None,
        1,
        "w1",
    )
    assert cluster.runs(anonymous.execution_id)[0].principal is None
    assert run.ok
    assert run["second"].unwrap()["n"] == 11
    for task_id in ("first", "second"):
        (effect,) = cluster.runs(run[task_id].execution_id)
        assert effect.principal == "bob"
        assert effect.execution == ("remote-scope", run.run_id, task_id)


async def test_a_failed_result_is_answered_once_and_never_redelivered(cluster: Cluster) -> None:
    await cluster.start("w1")
    async with cluster.caller([WORK]) as runtime:
        refused = await runtime.invoke(WORK, {"fail": "ditto"})
        crashed = await runtime.invoke(WORK, {"fail": "crash"})
    assert (refused.status, refused.error and refused.error.code) == ("failed", "PROBE_FAILED")
    assert (crashed.status, crashed.error and crashed.error.code) == ("failed", "INTERNAL_ERROR")
    assert refused.worker_id == crashed.worker_id == "w1"
    # Answered and acknowledged: nothing is left for a worker to take over and run again.
    assert await cluster.pending(WORK) == 0
    pending: Any = await cluster.client.xpending(calls_key(cluster.prefix, WORK), GROUP)
    assert pending["pending"] == 0
    assert [run.execution_id for run in cluster.runs()] == [
        refused.execution_id,
        crashed.execution_id,
    ]


async def test_an_output_over_the_size_cap_fails_at_once_and_runs_once(cluster: Cluster) -> None:
    """A reply that cannot be sealed must still answer the call (a failed result), not leave it
    pending to be taken over and run again until its deadline."""
    await cluster.start("w1")
    async with cluster.caller([WORK]) as runtime:
        started = time.monotonic()
        result = await runtime.invoke(WORK, {"n": 1, "pad": DEFAULT_MAX_BYTES}, timeout=3)
        elapsed = time.monotonic() - started
        pending = await cluster.pending(WORK)
    assert result.status == "failed", (result.status, result.error, f"{elapsed:.1f} s")
    assert result.error is not None
    assert result.error.code in {ErrorCode.MESSAGE_REJECTED, ErrorCode.INVALID_OUTPUT}
    assert pending == 0
    assert [(run.worker, run.attempt) for run in cluster.runs()] == [("w1", 1)]


# ----------------------------------------------------------------- forged messages


async def test_forged_and_garbage_calls_are_dropped_without_running(cluster: Cluster) -> None:
    await cluster.start("w1")
    stream = calls_key(cluster.prefix, WORK)
    forged = envelope(cluster)
    # Signed with the right secret but sent on another node type's stream.
    misrouted = envelope(cluster, MEASURE, payload={"text": "x"})
    for fields in (
        {"e": Signer(OTHER_SECRET).seal(forged)},
        {"e": b"garbage"},
        {"e": Signer(SECRET).seal(forged)[:-1]},
        {"e": Signer(SECRET).seal(misrouted)},
        {"other": b"no envelope at all"},
    ):
        await cluster.client.xadd(stream, fields)  # type: ignore[arg-type]
    await drained(cluster)
    pending: Any = await cluster.client.xpending(stream, GROUP)
    assert pending["pending"] == 0
    assert cluster.effects() == []
    assert await cluster.client.exists(replies_key(cluster.prefix, "forger")) == 0
    async with cluster.caller() as runtime:
        real = await runtime.invoke(WORK, {"n": 5})
    assert real.status == "success", real.error
    assert [run.execution_id for run in cluster.runs()] == [real.execution_id]


async def test_a_forged_reply_is_ignored_and_the_real_one_kept(cluster: Cluster) -> None:
    await cluster.start("w1")
    transport = cluster.transport()
    async with create_ditto() as runtime:
        runtime.register_remote([WORK], transport=transport)
        results: list[NodeResult[Any]] = []

        async def call() -> None:
            results.append(await runtime.invoke(WORK, {"n": 5, "sleep": 0.8}, timeout=10))

        async with anyio.create_task_group() as group:
            group.start_soon(call)
            (started,) = await eventually(cluster.runs, message="the call started")
            forged = ReplyEnvelope(
                started.execution_id,
                "success",
                msgspec.Raw(msgspec.msgpack.encode({"forged": True})),
                None,
                "mallory",
                1,
                0.0,
                0.0,
            )
            for sealed in (Signer(OTHER_SECRET).seal(forged), b"garbage"):
                await cluster.client.xadd(transport.reply_to, {"e": sealed})
    (result,) = results
    assert result.status == "success", result.error
    assert result.output == {"n": 5, "worker": "w1", "attempt": 1}
    assert result.worker_id == "w1"


# ----------------------------------------------------------------- deadlines


async def test_a_call_past_its_deadline_is_answered_timeout_without_running(
    cluster: Cluster,
) -> None:
    await cluster.start("w1")
    late = envelope(cluster, deadline_in=-1.0, reply_to="test")
    # Workers answer only callers whose reply stream exists (a caller's send script opens it).
    await cluster.client.xadd(late.reply_to, {"open": "1"}, maxlen=0)
    await cluster.client.xadd(calls_key(cluster.prefix, WORK), {"e": Signer(SECRET).seal(late)})
    answer: Any = await cluster.client.xread({late.reply_to: "0-0"}, count=1, block=10_000)
    assert answer, "no reply within 10 s"
    reply = Signer(SECRET).open(answer[0][1][0][1][b"e"], ReplyEnvelope)
    assert reply.execution_id == late.execution_id
    assert reply.status == "timeout"
    assert reply.error is not None
    assert reply.error.code == ErrorCode.TIMEOUT
    assert reply.worker_id == "w1"
    await drained(cluster)
    assert cluster.effects() == []


async def test_a_call_queued_past_its_deadline_never_runs(cluster: Cluster) -> None:
    await cluster.start("w1", concurrency=1)
    results: dict[str, NodeResult[Any]] = {}
    async with cluster.caller() as runtime:

        async def call(name: str, request: dict[str, Any], timeout: float) -> None:
            results[name] = await runtime.invoke(WORK, request, timeout=timeout)

        async with anyio.create_task_group() as group:
            group.start_soon(call, "long", {"n": 1, "sleep": 1.5}, 10.0)
            await eventually(cluster.runs, message="the long call started")
            await call("short", {"n": 2}, 0.3)
            assert results["short"].status == "timeout"
        assert results["long"].status == "success", results["long"].error
        await drained(cluster)  # the worker has taken the short call off the stream
    assert [run.execution_id for run in cluster.runs()] == [results["long"].execution_id]


# ----------------------------------------------------------------- cancellation


def saw_cancellation(cluster: Cluster, execution_id: str) -> Callable[[], bool]:
    def cancelled() -> bool:
        return any(
            effect.event == "cancelled" and effect.execution_id == execution_id
            for effect in cluster.effects()
        )

    return cancelled


async def test_a_caller_timeout_publishes_a_cancel_notice(cluster: Cluster) -> None:
    await cluster.start("w1")
    notices = cluster.client.pubsub(ignore_subscribe_messages=True)
    await notices.subscribe(cancel_channel(cluster.prefix))
    heard: list[bytes] = []

    async def noticed(execution_id: str) -> bool:
        message = await notices.get_message(timeout=0.1)
        if message is not None:
            # Notices are sealed: nobody without the key can cancel a call.
            heard.append(Signer(SECRET).open(message["data"], CancelNotice).execution_id.encode())
        return execution_id.encode() in heard

    try:
        async with cluster.caller() as runtime:
            result = await runtime.invoke(WORK, {"sleep": 30}, timeout=1.0)
            assert result.status == "timeout"
            assert result.error is not None
            assert result.error.code == ErrorCode.TIMEOUT
            await eventually(
                partial(noticed, result.execution_id),
                within=5,
                message="a cancel notice for the timed-out call",
            )
            # Best effort on the worker: its handler is cancelled (here its own deadline is
            # the same instant, so this alone would not prove the notice arrived).
            await eventually(
                saw_cancellation(cluster, result.execution_id),
                within=5,
                message="the handler saw its CancelledError",
            )
    finally:
        await notices.aclose()  # type: ignore[no-untyped-call]
    assert [effect.event for effect in cluster.effects()] == ["run", "cancelled"]


async def test_cancelling_the_caller_sends_a_cancel_notice(cluster: Cluster) -> None:
    await cluster.start("w1")
    async with cluster.caller() as runtime:

        async def call() -> None:
            await runtime.invoke(WORK, {"sleep": 60})

        with anyio.CancelScope() as scope:
            async with anyio.create_task_group() as group:
                group.start_soon(call)
                await eventually(cluster.runs, message="the call started")
                scope.cancel()
        assert scope.cancelled_caught
        # The worker's own deadline is 30 s away: only the notice can cancel the handler now.
        (started,) = cluster.runs()
        await eventually(
            saw_cancellation(cluster, started.execution_id),
            within=5,
            message="the cancel notice reached the handler",
        )


# ----------------------------------------------------------------- back-pressure and routing


async def test_calls_over_max_pending_fail_queue_full_and_retryable(cluster: Cluster) -> None:
    await cluster.start("w1", concurrency=1)
    results: list[NodeResult[Any]] = []
    async with cluster.caller(max_pending=3) as runtime:

        async def call(n: int) -> None:
            results.append(await runtime.invoke(WORK, {"n": n, "sleep": 0.4}, timeout=15))

        async with anyio.create_task_group() as group:
            for n in range(6):
                group.start_soon(call, n)
    full = [result for result in results if result.status == "failed"]
    succeeded = [result for result in results if result.status == "success"]
    assert len(full) == 3, [(result.status, result.error) for result in results]
    assert len(succeeded) == 3
    for result in full:
        assert result.error is not None
        assert result.error.code == ErrorCode.QUEUE_FULL
        assert result.error.retryable is True
    assert sorted(run.execution_id for run in cluster.runs()) == sorted(
        result.execution_id for result in succeeded
    )


async def test_no_live_worker_fails_at_once_not_at_the_deadline(cluster: Cluster) -> None:
    async with cluster.caller() as runtime:
        started = time.monotonic()
        result = await runtime.invoke(WORK, {"n": 1}, timeout=30)
        elapsed = time.monotonic() - started
    assert result.status == "failed"
    assert result.error is not None
    assert result.error.code == ErrorCode.NO_WORKER_AVAILABLE
    assert result.error.retryable is True
    assert elapsed < 10, f"returned after {elapsed:.1f} s of a 30 s deadline"
    assert await cluster.pending(WORK) == 0


async def test_a_stopped_worker_is_gone_from_routing_at_once(cluster: Cluster) -> None:
    await cluster.start("w1")
    async with cluster.caller() as runtime:
        assert (await runtime.invoke(WORK, {"n": 1})).status == "success"
        assert await cluster.stop("w1") == 0
        started = time.monotonic()
        result = await runtime.invoke(WORK, {"n": 2}, timeout=30)
        elapsed = time.monotonic() - started
    assert result.error is not None
    assert result.error.code == ErrorCode.NO_WORKER_AVAILABLE
    assert elapsed < 10, f"returned after {elapsed:.1f} s of a 30 s deadline"


async def test_a_killed_worker_stops_being_routed_to_after_its_heartbeat_expires(
    cluster: Cluster,
) -> None:
    await cluster.start("w1")
    async with cluster.caller() as runtime:
        assert (await runtime.invoke(WORK, {"n": 1})).status == "success"
        await cluster.kill("w1")

        async def no_worker() -> bool:
            result = await runtime.invoke(WORK, {"n": 2}, timeout=0.5)
            return result.error is not None and result.error.code == "NO_WORKER_AVAILABLE"

        await eventually(no_worker, within=5, message="NO_WORKER_AVAILABLE after kill -9")


# ----------------------------------------------------------------- stopping


async def test_sigterm_finishes_the_call_in_flight_and_deregisters(cluster: Cluster) -> None:
    worker = await cluster.start("w1")
    results: list[NodeResult[Any]] = []
    async with cluster.caller() as runtime:

        async def call() -> None:
            results.append(await runtime.invoke(WORK, {"n": 3, "sleep": 1.5}, timeout=15))

        async with anyio.create_task_group() as group:
            group.start_soon(call)
            await eventually(cluster.runs, message="the call started")
            exit_code = await cluster.stop("w1")
    (result,) = results
    assert result.status == "success", result.error
    assert result.worker_id == "w1"
    assert exit_code == 0, worker.output()
    assert "Traceback" not in worker.output()
    assert await cluster.client.exists(worker_key(cluster.prefix, "w1")) == 0
    assert await cluster.client.zscore(nodes_key(cluster.prefix, WORK), "w1") is None
    assert [effect.event for effect in cluster.effects()] == ["run", "done"]


async def test_a_draining_worker_keeps_its_call_from_being_taken_over(cluster: Cluster) -> None:
    """While a stopping worker finishes a call longer than ``claim_idle_ms``, a live worker must
    not take the call over and run it a second time."""
    await cluster.start_all(["w1", "w2"], concurrency=1)
    results: list[NodeResult[Any]] = []
    async with cluster.caller() as runtime:

        async def call() -> None:
            results.append(await runtime.invoke(WORK, {"n": 1, "sleep": 2.0}, timeout=15))

        async with anyio.create_task_group() as group:
            group.start_soon(call)
            (started,) = await eventually(cluster.runs, message="the call started")
            # Its remaining 2 s are well over claim_idle_ms (0.8 s) for the other worker.
            assert await cluster.stop(started.worker) == 0
    (result,) = results
    assert result.status == "success", result.error
    assert result.worker_id == started.worker
    runs = cluster.runs(result.execution_id)
    assert [(run.worker, run.attempt) for run in runs] == [(started.worker, 1)]


async def test_a_call_read_as_sigterm_arrives_is_run_and_answered(cluster: Cluster) -> None:
    """SIGTERM does not interrupt the worker's blocking read: a call that read returns is in
    flight, so the worker finishes and answers it before exiting (or never starts it)."""
    worker = await cluster.start("w1")
    async with cluster.caller() as runtime:
        worker.process.send_signal(signal.SIGTERM)
        result = await runtime.invoke(WORK, {"n": 1, "sleep": 0.2}, timeout=3)
        exit_code = await cluster.stop("w1")
    events = [effect.event for effect in cluster.effects()]
    assert exit_code == 0, worker.output()
    if events:  # the call was read before the worker stopped reading
        assert events == ["run", "done"], worker.output()
        assert result.status == "success", (result.status, result.error)
        assert await cluster.pending(WORK) == 0
    else:
        assert result.status in {"timeout", "failed"}


async def test_a_closed_runtime_leaves_no_reply_stream(cluster: Cluster) -> None:
    """A reply that arrives after its runtime closed must not recreate the runtime's reply
    stream: nobody would ever read or delete it."""
    await cluster.start("w1", concurrency=1)
    async with cluster.caller([WORK]) as keeper:
        results: list[NodeResult[Any]] = []

        async def hold() -> None:
            results.append(await keeper.invoke(WORK, {"n": 1, "sleep": 2.0}, timeout=10))

        async with anyio.create_task_group() as group:
            group.start_soon(hold)
            await eventually(cluster.runs, message="the worker is busy")
            async with cluster.caller([WORK]) as leaving:
                late = await leaving.invoke(WORK, {"n": 2}, timeout=0.2)
            assert late.status == "timeout"
        # The worker has now answered the queued call (``timeout``) to the closed runtime.
        await drained(cluster)
    assert results[0].status == "success", results[0].error
    leftovers = [key async for key in cluster.client.scan_iter(match=f"{cluster.prefix}replies:*")]
    assert leftovers == []


async def test_a_reply_stream_expires_unless_its_caller_keeps_listening(cluster: Cluster) -> None:
    """A caller killed without closing leaves its reply stream behind: it expires by itself
    (workers then drop replies to it), and a live caller keeps renewing it."""
    from ditto.adapters.redis.keys import REPLIES_TTL_MS

    await cluster.start("w1", concurrency=1)
    async with cluster.caller([WORK]) as runtime:
        assert (await runtime.invoke(WORK, {"n": 1}, timeout=10)).ok
        (stream,) = [
            key async for key in cluster.client.scan_iter(match=f"{cluster.prefix}replies:*")
        ]
        assert 0 < await cluster.client.pttl(stream) <= REPLIES_TTL_MS
        await cluster.client.pexpire(stream, 10_000)  # as if time passed: the caller renews it

        async def renewed() -> bool:
            return await cluster.client.pttl(stream) > 10_000

        await eventually(renewed, message="the listening caller renewed its reply stream")
