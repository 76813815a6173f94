"""Calls bound to their stream entry: the caller chooses the entry id and seals it in, so a worker
reading that entry fresh runs it without checking it in Redis; a copy of it (a replay) never
gets that id and is still dropped; a call whose id Redis refused, one put back from the
dead letters and one taken over all still run exactly once more."""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

import anyio
import msgspec
import pytest
import redis.asyncio as aioredis
from redis import exceptions as redis_errors

from ditto import NodeResult
from ditto.adapters.redis.admission import Admission
from ditto.adapters.redis.dead_letters import (
    DeadLetterReason,
    DeadLetters,
    ReplayOutcome,
    replay_dead_letter,
)
from ditto.adapters.redis.keys import calls_key, dead_key, replies_key, seen_key, worker_key
from ditto.runtime.transports.envelope import CallEnvelope, ReplyEnvelope, Signer
from tests.adapters.redis.remote.processes import SECRET, WORK, Cluster, eventually

pytestmark = [pytest.mark.anyio, pytest.mark.redis]


async def admissions(cluster: Cluster, worker_id: str, **expected: int) -> dict[str, Any]:
    """The worker's description once its counters read ``expected`` (they come with its
    heartbeat)."""

    async def described() -> dict[str, Any] | None:
        raw = await cluster.client.get(worker_key(cluster.prefix, worker_id))
        if raw is None:
            return None
        description: dict[str, Any] = json.loads(raw)
        return description if all(description[k] == v for k, v in expected.items()) else None

    found: dict[str, Any] = await eventually(described, message=f"{worker_id} counts {expected}")
    return found


async def test_fresh_calls_are_admitted_without_the_admission_script(cluster: Cluster) -> None:
    # The default claim_idle_ms: a read (blocking at most 500 ms) is always fresh against it.
    cluster.use_default_claim_idle()
    await cluster.start("w1")
    async with cluster.caller() as runtime:
        for n in range(5):
            result = await runtime.invoke(WORK, {"n": n}, timeout=20)
            assert result.status == "success", result.error
    await admissions(cluster, "w1", handled=5, admitted_locally=5, admission_checks=0)
    assert [run.attempt for run in cluster.runs()] == [1] * 5


async def captured(cluster: Cluster) -> tuple[bytes, bytes]:
    """The id and sealed bytes of the one call in the ``PROBE.WORK`` stream."""

    async def entries() -> Any:
        return await cluster.client.xrange(calls_key(cluster.prefix, WORK))

    ((entry_id, fields),) = await eventually(entries, message="the call is in its stream")
    return bytes(entry_id), bytes(fields[b"e"])


async def test_a_replay_of_a_bound_call_is_dropped(cluster: Cluster) -> None:
    cluster.use_default_claim_idle()
    await cluster.start("w1")
    stream = calls_key(cluster.prefix, WORK)
    results: list[NodeResult[Any]] = []
    async with cluster.caller() as runtime:

        async def call() -> None:
            results.append(await runtime.invoke(WORK, {"n": 7, "sleep": 0.5}, timeout=20))

        async with anyio.create_task_group() as group:
            group.start_soon(call)
            entry_id, sealed = await captured(cluster)
            envelope: CallEnvelope = Signer(SECRET).open(sealed, CallEnvelope)
            assert envelope.entry_id == entry_id.decode()  # sent under the id it carries
            with pytest.raises(redis_errors.ResponseError):  # and a stream gives an id once
                await cluster.client.xadd(stream, {"e": sealed}, id=entry_id)
        (result,) = results
        assert result.status == "success", result.error
        await cluster.client.xadd(stream, {"e": sealed})

        async def drained() -> bool:
            return await cluster.pending(WORK) == 0

        await eventually(drained, message="the replay was acknowledged and deleted")
    await admissions(cluster, "w1", replays_dropped=1, admitted_locally=1, admission_checks=1)
    assert [(run.execution_id, run.attempt) for run in cluster.runs()] == [(result.execution_id, 1)]
    assert await cluster.client.get(seen_key(cluster.prefix, result.execution_id)) == entry_id


async def test_a_call_whose_id_redis_refused_runs_once(cluster: Cluster) -> None:
    """Another caller's entry is newer than the id this caller chose: the call goes under an
    id Redis picks, is checked in Redis, and runs once; the caller then chooses above it."""
    cluster.use_default_claim_idle()
    await cluster.start("w1")
    stream = calls_key(cluster.prefix, WORK)
    ahead_ms = int(time.time() * 1000) + 3_600_000
    ahead = f"{ahead_ms}-0"
    async with cluster.client.pipeline(transaction=True) as pipe:
        # Added and deleted in one step: the stream's last id moves an hour ahead, and no
        # worker ever reads the entry.
        pipe.xadd(stream, {"e": b"newer"}, id=ahead)
        pipe.xdel(stream, ahead)
        await pipe.execute()
    async with cluster.caller() as runtime:
        first = await runtime.invoke(WORK, {"n": 1}, timeout=20)
        assert first.status == "success", first.error
        await admissions(cluster, "w1", handled=1, admitted_locally=0, admission_checks=1)
        second = await runtime.invoke(WORK, {"n": 2}, timeout=20)
        assert second.status == "success", second.error
    await admissions(cluster, "w1", handled=2, admitted_locally=1, admission_checks=1)
    assert [(run.execution_id, run.attempt) for run in cluster.runs()] == [
        (first.execution_id, 1),
        (second.execution_id, 1),
    ]
    # Redis put it right after the newer entry, and the seen key names that entry.
    held = await cluster.client.get(seen_key(cluster.prefix, first.execution_id))
    assert held == f"{ahead_ms}-1".encode()


async def test_a_dead_letter_put_back_runs_once_and_its_copies_never(cluster: Cluster) -> None:
    """The replayed dead letter carries the entry id it was first sent as: it is checked in
    Redis, where the replay bound its execution id to the new entry."""
    cluster.use_default_claim_idle()
    await cluster.start("w1")
    stream = calls_key(cluster.prefix, WORK)
    reply_to = replies_key(cluster.prefix, uuid.uuid4().hex)
    await cluster.client.xadd(reply_to, {"open": "1"}, maxlen=0)
    first_sent = f"{int(time.time() * 1000) - 5_000}-0"
    call = CallEnvelope(
        uuid.uuid4().hex,
        WORK,
        msgspec.Raw(msgspec.msgpack.encode({"n": 9})),
        time.time() + 30,
        None,
        None,
        1,
        reply_to,
        None,
        first_sent,
    )
    sealed = Signer(SECRET).seal(call)
    # As the send script left it: the execution id bound to the entry the call was sent as.
    await cluster.client.set(seen_key(cluster.prefix, call.execution_id), first_sent, px=90_000)
    await DeadLetters(cluster.client, cluster.prefix, "w0").add(
        DeadLetterReason.EXHAUSTED, "why", stream=stream, sealed=sealed, envelope=call, deliveries=6
    )
    ((letter, _),) = await cluster.client.xrange(dead_key(cluster.prefix))
    outcome, _ = await replay_dead_letter(cluster.client, cluster.prefix, letter.decode())
    assert outcome is ReplayOutcome.REPLAYED
    answer: Any = await cluster.client.xread({reply_to: "0-0"}, count=1, block=10_000)
    assert answer, "no reply within 10 s"
    reply: ReplyEnvelope = Signer(SECRET).open(answer[0][1][0][1][b"e"], ReplyEnvelope)
    assert (reply.execution_id, reply.status, reply.attempt) == (call.execution_id, "success", 1)
    await cluster.client.xadd(stream, {"e": sealed})  # a copy of it, added once more

    async def drained() -> bool:
        return await cluster.pending(WORK) == 0

    await eventually(drained, message="the copy was acknowledged and deleted")
    await admissions(cluster, "w1", replays_dropped=1, admitted_locally=0, admission_checks=2)
    assert [run.execution_id for run in cluster.runs()] == [call.execution_id]


async def test_only_a_fresh_read_of_the_bound_entry_skips_the_check() -> None:
    """A stale read, another entry (a copy, or an id Redis chose) or no bound id (an older
    caller) goes through the admission script."""
    admission = Admission(aioredis.Redis(), "p:", "w1")  # never connects: nothing is checked
    bound = CallEnvelope(
        "e1", WORK, msgspec.Raw(b"\x80"), time.time() + 30, None, None, 1, "r", None, "17-3"
    )
    unbound = msgspec.structs.replace(bound, entry_id=None)
    assert admission.admits_locally(b"17-3", bound, fresh=True)
    assert not admission.admits_locally(b"17-3", bound, fresh=False)
    assert not admission.admits_locally(b"17-4", bound, fresh=True)
    assert not admission.admits_locally(b"17-3", unbound, fresh=True)
    assert admission.admitted_locally == 1
