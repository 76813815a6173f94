"""The ``Transport`` contract, run against every engine in ``TRANSPORTS`` (see ``conftest.py``).

Each test mirrors a sentence of the port's docstring (``ditto/runtime/transports/port.py``) or
a guarantee the runtime relies on (``ditto/runtime/remote.py``). Tests never assert timings:
only that a call ends (well within its timeout plus a margin) instead of hanging.
"""

from __future__ import annotations

import time
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable

import anyio
import msgspec
import pytest

from ditto import DittoError, ErrorCode, NodeContext, NoWorkerAvailableError, define_worker
from ditto.runtime.transports.envelope import CallEnvelope, ReplyEnvelope, Signer
from ditto.runtime.transports.port import Transport
from ditto.runtime.worker import WorkerDefinition
from tests.runtime.transports.conftest import Harness

pytestmark = pytest.mark.anyio

ASK = "PROBE.ASK"
UNSERVED = "PROBE.UNSERVED"
MARGIN = 5.0
"""How long past its timeout a call may take to end before the test calls it hung."""
OTHER_SECRET = b"not-the-shared-secret-0123456789"


class Ask(msgspec.Struct, frozen=True):
    """The probe's input: a number to echo, a code to fail with, or block until released."""

    n: int = 0
    fail: str = ""
    block: bool = False


class Answer(msgspec.Struct, frozen=True):
    n: int


class Probe:
    """A worker definition that counts its runs per execution id and signals when a blocked
    handler starts and when it sees its cancellation."""

    def __init__(self) -> None:
        self.runs: Counter[str] = Counter()
        self.started = anyio.Event()
        self.cancelled = anyio.Event()
        self.release = anyio.Event()

    async def ask(self, request: Ask, ctx: NodeContext) -> Answer:
        self.runs[ctx.execution_id] += 1
        if request.block:
            self.started.set()
            try:
                await self.release.wait()
            except anyio.get_cancelled_exc_class():
                self.cancelled.set()
                raise
        if request.fail:
            raise DittoError("the probe was asked to fail", code=request.fail)
        return Answer(request.n)

    def worker(self) -> WorkerDefinition:
        return define_worker("probe", {ASK: self.ask})


@pytest.fixture
async def probe(anyio_backend: str) -> AsyncIterator[Probe]:
    made = Probe()
    try:
        yield made
    finally:
        made.release.set()  # before the harness stops its workers (they drain)


def envelope(
    transport: Transport,
    request: Ask | None = None,
    *,
    node_type: str = ASK,
    deadline_in: float = 30.0,
) -> CallEnvelope:
    return CallEnvelope(
        uuid.uuid4().hex,
        node_type,
        msgspec.Raw(msgspec.msgpack.encode(Ask() if request is None else request)),
        time.time() + deadline_in,
        None,
        None,
        1,
        transport.reply_to,
    )


async def call(transport: Transport, sent: CallEnvelope, timeout: float = 20.0) -> ReplyEnvelope:
    """``transport.call``, failing the test if it outlives its timeout by more than ``MARGIN``."""
    with anyio.fail_after(timeout + MARGIN):
        return await transport.call(sent, timeout)


def answer(reply: ReplyEnvelope) -> Answer | None:
    return msgspec.msgpack.decode(reply.output, type=Answer | None)


async def until(condition: Callable[[], Awaitable[bool]], message: str) -> None:
    deadline = time.monotonic() + 10.0
    while not await condition():
        assert time.monotonic() < deadline, f"not within 10 s: {message}"
        await anyio.sleep(0.02)


# ----------------------------------------------------------------------- calls and replies


async def test_a_call_reaches_a_serving_worker_and_its_reply_comes_back(
    harness: Harness, probe: Probe
) -> None:
    served = await harness.serve(probe.worker(), "w1")
    sent = envelope(harness.transport, Ask(n=7))
    reply = await call(harness.transport, sent)
    assert reply.execution_id == sent.execution_id
    assert reply.status == "success", reply.error
    assert reply.error is None
    assert answer(reply) == Answer(7)
    assert reply.worker_id == served.worker_id == "w1"
    assert reply.attempt == 1
    assert probe.runs == Counter({sent.execution_id: 1})


async def test_a_failed_handler_is_a_failed_reply_with_its_code(
    harness: Harness, probe: Probe
) -> None:
    await harness.serve(probe.worker(), "w1")
    sent = envelope(harness.transport, Ask(fail="PROBE_FAILED"))
    reply = await call(harness.transport, sent)  # a reply, not an exception
    assert reply.execution_id == sent.execution_id
    assert reply.status == "failed"
    assert reply.error is not None
    assert reply.error.code == "PROBE_FAILED"
    assert answer(reply) is None
    assert reply.worker_id == "w1"
    assert probe.runs == Counter({sent.execution_id: 1})


async def test_concurrent_calls_each_get_their_own_reply_exactly_once(
    harness: Harness, probe: Probe
) -> None:
    await harness.serve(probe.worker(), "w1")
    sent = {n: envelope(harness.transport, Ask(n=n)) for n in range(50)}
    replies: dict[int, list[ReplyEnvelope]] = {n: [] for n in sent}

    async def one(n: int) -> None:
        replies[n].append(await call(harness.transport, sent[n]))

    async with anyio.create_task_group() as group:
        for n in sent:
            group.start_soon(one, n)
    for n, (reply,) in replies.items():
        assert reply.execution_id == sent[n].execution_id
        assert reply.status == "success", reply.error
        assert answer(reply) == Answer(n)
    assert probe.runs == Counter({item.execution_id: 1 for item in sent.values()})


async def test_reply_to_is_one_non_empty_address_per_transport(
    harness: Harness, probe: Probe
) -> None:
    await harness.serve(probe.worker(), "w1")
    transport = harness.transport
    before = transport.reply_to
    assert isinstance(before, str)
    assert before
    for n in range(3):
        sent = envelope(transport, Ask(n=n))
        assert sent.reply_to == before
        assert answer(await call(transport, sent)) == Answer(n)
        assert transport.reply_to == before
    other = harness.new_transport()
    assert other.reply_to != before  # replies of two callers never meet
    assert answer(await call(other, envelope(other, Ask(n=9)))) == Answer(9)


# ----------------------------------------------------------------------- failing fast


async def test_no_live_worker_for_the_node_type_fails_at_once(
    harness: Harness, probe: Probe
) -> None:
    await harness.serve(probe.worker(), "w1")  # live, but for another node type
    with pytest.raises(NoWorkerAvailableError) as raised:
        # Far below the call's timeout: waiting for the timeout would fail the test.
        with anyio.fail_after(MARGIN):
            await harness.transport.call(envelope(harness.transport, node_type=UNSERVED), 60.0)
    assert raised.value.code == ErrorCode.NO_WORKER_AVAILABLE
    assert raised.value.retryable
    assert probe.runs == Counter()


async def test_a_caller_with_another_secret_is_refused_at_once(
    harness: Harness, probe: Probe
) -> None:
    """The workers alive could not verify the call (they would drop it unread, and the caller
    would wait out its timeout): it is refused before it is sent, and nothing runs."""
    await harness.serve(probe.worker(), "w1")
    stranger = harness.new_transport(b"another-secret-that-no-worker-has-0123")
    with pytest.raises(DittoError) as raised, anyio.fail_after(MARGIN):
        await stranger.call(envelope(stranger), 60.0)
    assert raised.value.code == ErrorCode.REMOTE_KEY_MISMATCH
    assert not raised.value.retryable
    assert probe.runs == Counter()
    assert (await call(harness.transport, envelope(harness.transport))).status == "success"


async def test_a_stopped_worker_is_no_longer_live(harness: Harness, probe: Probe) -> None:
    served = await harness.serve(probe.worker(), "w1")
    assert (await call(harness.transport, envelope(harness.transport))).status == "success"
    await served.stop()
    with pytest.raises(NoWorkerAvailableError), anyio.fail_after(MARGIN):
        await harness.transport.call(envelope(harness.transport), 60.0)
    assert len(probe.runs) == 1


async def test_a_call_not_answered_in_time_raises_timeout_error(
    harness: Harness, probe: Probe
) -> None:
    await harness.serve(probe.worker(), "w1")
    # The worker may run until the envelope's deadline; the caller waits only 0.5 s.
    sent = envelope(harness.transport, Ask(block=True), deadline_in=60.0)
    with anyio.move_on_after(0.5 + MARGIN) as bound, pytest.raises(TimeoutError):
        await harness.transport.call(sent, 0.5)
    assert not bound.cancelled_caught, "the call outlived its timeout"
    assert probe.runs == Counter({sent.execution_id: 1})


# ----------------------------------------------------------------------- cancellation


async def test_cancel_of_an_unknown_or_finished_call_never_raises(
    harness: Harness, probe: Probe
) -> None:
    await harness.transport.cancel(uuid.uuid4().hex)  # before anything was ever sent
    await harness.serve(probe.worker(), "w1")
    sent = envelope(harness.transport, Ask(n=1))
    assert (await call(harness.transport, sent)).status == "success"
    await harness.transport.cancel(sent.execution_id)
    await harness.transport.cancel(sent.execution_id)
    await harness.transport.cancel("")
    # The transport still works, and nothing ran twice.
    assert answer(await call(harness.transport, envelope(harness.transport, Ask(n=2)))) == Answer(2)
    assert sorted(probe.runs.values()) == [1, 1]


async def test_cancel_of_a_running_call_cancels_its_handler(harness: Harness, probe: Probe) -> None:
    await harness.serve(probe.worker(), "w1")
    sent = envelope(harness.transport, Ask(block=True))
    replies: list[ReplyEnvelope] = []

    async def caller() -> None:
        replies.append(await call(harness.transport, sent))

    async with anyio.create_task_group() as group:
        group.start_soon(caller)
        with anyio.fail_after(10):
            await probe.started.wait()
        await harness.transport.cancel(sent.execution_id)
        with anyio.fail_after(10):
            await probe.cancelled.wait()
    (reply,) = replies
    assert reply.execution_id == sent.execution_id
    assert reply.status == "cancelled"
    assert reply.error is not None
    assert reply.error.code == ErrorCode.CANCELLED


async def test_a_call_that_times_out_tells_the_worker_to_cancel(
    harness: Harness, probe: Probe
) -> None:
    """``remote.call_remote`` sends no cancel notice of its own: the transport must."""
    await harness.serve(probe.worker(), "w1")
    sent = envelope(harness.transport, Ask(block=True), deadline_in=60.0)
    with pytest.raises(TimeoutError):
        await call(harness.transport, sent, 0.5)
    with anyio.fail_after(10):
        await probe.cancelled.wait()


@pytest.mark.parametrize(
    "settle",
    [
        # At once: the caller may still be reading its send's answer while a worker already
        # runs the call (it failed on the old Redis Streams caller, which sent no notice then).
        pytest.param(0.0, id="at-once"),
        pytest.param(0.5, id="once-sent"),
    ],
)
async def test_a_cancelled_caller_tells_the_worker_to_cancel(
    harness: Harness, probe: Probe, settle: float
) -> None:
    await harness.serve(probe.worker(), "w1")
    sent = envelope(harness.transport, Ask(block=True))
    async with anyio.create_task_group() as group:
        group.start_soon(call, harness.transport, sent)
        with anyio.fail_after(10):
            await probe.started.wait()
        await anyio.sleep(settle)  # not a timing assertion: when the caller gives up
        group.cancel_scope.cancel()
    with anyio.fail_after(5):
        await probe.cancelled.wait()


# ----------------------------------------------------------------------- closing


async def test_aclose_is_idempotent_and_a_later_call_is_transport_unavailable(
    harness: Harness, probe: Probe
) -> None:
    await harness.serve(probe.worker(), "w1")
    transport = harness.new_transport()
    assert (await call(transport, envelope(transport))).status == "success"
    await transport.aclose()
    await transport.aclose()
    with pytest.raises(DittoError) as raised:
        await call(transport, envelope(transport))
    assert raised.value.code == ErrorCode.TRANSPORT_UNAVAILABLE
    # Not checked here: ``cancel`` once closed does not raise on redis-streams, but it opens a
    # connection in the closed pool that is never closed (a ResourceWarning in a later test).
    assert len(probe.runs) == 1  # the refused call was never sent


async def test_aclose_ends_a_waiting_call(harness: Harness, probe: Probe) -> None:
    await harness.serve(probe.worker(), "w1")
    transport = harness.new_transport()
    outcome: list[BaseException] = []

    async def caller() -> None:
        try:
            await call(transport, envelope(transport, Ask(block=True)))
        except DittoError as exc:
            outcome.append(exc)

    async with anyio.create_task_group() as group:
        group.start_soon(caller)
        with anyio.fail_after(10):
            await probe.started.wait()
        await transport.aclose()
    (error,) = outcome
    assert isinstance(error, DittoError)
    assert error.code == ErrorCode.TRANSPORT_UNAVAILABLE


# ----------------------------------------------------------------------- trust


def flipped(sealed: bytes) -> bytes:
    """``sealed`` with one bit of its body changed."""
    return sealed[:-1] + bytes([sealed[-1] ^ 1])


@pytest.mark.parametrize("forgery", ["other-secret", "tampered", "garbage"])
async def test_a_forged_call_is_never_executed(
    harness: Harness, probe: Probe, forgery: str
) -> None:
    """Sent through :meth:`Harness.send_raw`: a transport seals with its own secret, so a
    forgery cannot go through the port."""
    await harness.serve(probe.worker(), "w1")
    forged = envelope(harness.transport, Ask(n=1))
    message = {
        "other-secret": Signer(OTHER_SECRET).seal(forged),
        "tampered": flipped(Signer(harness.secret).seal(forged)),
        "garbage": b"garbage",
    }[forgery]
    await harness.send_raw(ASK, message)
    await until(lambda: harness.drained(ASK), "the forged message was taken")
    genuine = envelope(harness.transport, Ask(n=2))
    assert answer(await call(harness.transport, genuine)) == Answer(2)
    assert probe.runs == Counter({genuine.execution_id: 1})
