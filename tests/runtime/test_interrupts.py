"""Interrupts and checkpointed runs: ``ctx.interrupt``, ``runtime.resume`` and ``run(checkpoint=)``
with the runtime's in-process checkpoint store."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import anyio
import pytest

from ditto import (
    Ditto,
    DittoError,
    ErrorCode,
    Graph,
    InterruptInfo,
    InvalidInputError,
    NodeContext,
    NodeResult,
    RunResult,
    WorkerDefinition,
    create_ditto,
    define_worker,
    graph,
    loop,
)
from ditto.runtime.checkpoints import InProcessCheckpointStore

pytestmark = pytest.mark.anyio

Deps = Mapping[str, NodeResult[Any]]


@dataclass
class Desk:
    """A worker whose ``DESK.ASK`` asks a person (``ctx.interrupt``) and whose ``DESK.STEP`` does
    plain work; both count their calls per task id."""

    calls: Counter[str] = field(default_factory=Counter)
    asked: list[tuple[str, bool, Any]] = field(default_factory=list)
    """``(task id, ctx.resumed, ctx.resume_value)`` of every ``DESK.ASK`` call."""

    async def ask(self, request: dict[str, Any], ctx: NodeContext) -> dict[str, Any]:
        task = _task(ctx)
        self.calls[task] += 1
        self.asked.append((task, ctx.resumed, ctx.resume_value))
        answer = ctx.interrupt(request.get("question"))
        return {"answer": answer}

    async def step(self, request: dict[str, Any], ctx: NodeContext) -> dict[str, Any]:
        self.calls[_task(ctx)] += 1
        await anyio.sleep(request.get("delay", 0))
        return {"name": request["name"]}

    async def odd(self, request: dict[str, Any], ctx: NodeContext) -> dict[str, Any]:
        payload: Any = {1, 2} if request["kind"] == "set" else object()
        return {"answer": ctx.interrupt(payload)}

    def worker(self) -> WorkerDefinition:
        return define_worker(
            "desk", {"DESK.ASK": self.ask, "DESK.STEP": self.step, "DESK.ODD": self.odd}
        )


def _task(ctx: NodeContext) -> str:
    return "-" if ctx.execution is None else ctx.execution.task_id


def step(name: str, delay: float = 0.0) -> dict[str, Any]:
    return {"name": name, "delay": delay}


def chain() -> Graph:
    """a -> b (asks) -> c; c's input says what b was answered."""
    return (
        graph("chain")
        .node("a", "DESK.STEP", [], lambda i, d: step("a"))
        .node("b", "DESK.ASK", ["a"], lambda i, d: {"question": {"ok?": d["a"].unwrap()["name"]}})
        .node("c", "DESK.STEP", ["b"], lambda i, d: step(f"c-after-{d['b'].unwrap()['answer']}"))
    )


def fan_out() -> Graph:
    """Run with concurrency 2: ``ask`` and ``slow`` start at once, ``queued`` waits for a slot
    and ``after-slow`` for ``slow``."""
    return (
        graph("fan")
        .node("ask", "DESK.ASK", [], lambda i, d: {"question": "go?"})
        .node("slow", "DESK.STEP", [], lambda i, d: step("slow", delay=0.02))
        .node("queued", "DESK.STEP", [], lambda i, d: step("queued"))
        .node("after-slow", "DESK.STEP", ["slow"], lambda i, d: step("after-slow"))
    )


def approval() -> Graph:
    def act(run_input: Any, deps: Deps) -> dict[str, Any]:
        approved = deps["review"].unwrap()["answer"] == "approve"
        return step("send" if approved else "discard")

    return (
        graph("approval")
        .node("draft", "DESK.STEP", [], lambda i, d: step(f"draft for {i}"))
        .node("review", "DESK.ASK", ["draft"], lambda i, d: {"question": d["draft"].unwrap()})
        .node("act", "DESK.STEP", ["review"], act)
    )


def outputs(result: RunResult) -> dict[str, Any]:
    return {task: node.output for task, node in result.items()}


async def interrupted(runtime: Ditto, plan: Graph, *args: Any, **options: Any) -> RunResult:
    result = await runtime.run(plan, *args, **options)
    assert result.status == "interrupted"
    assert result.checkpoint_id is not None
    return result


# ----------------------------------------------------------------- interrupting a run


async def test_an_interrupt_pauses_the_run_and_says_what_it_asks() -> None:
    desk = Desk()
    async with create_ditto(workers=[desk.worker()]) as runtime:
        result = await runtime.run(chain())
        assert result.checkpoint_id is not None
        assert await runtime.checkpoints.load(result.checkpoint_id) is not None
    assert result.status == "interrupted"
    assert result.interrupts == (InterruptInfo("b", {"ok?": "a"}),)
    assert not result.ok
    assert result["a"].ok
    error = result["b"].error
    assert error is not None
    assert error.code == ErrorCode.INTERRUPTED
    assert "c" not in result
    assert desk.calls == Counter({"a": 1, "b": 1})


async def test_started_tasks_finish_and_no_task_is_admitted_after_an_interrupt() -> None:
    desk = Desk()
    async with create_ditto(workers=[desk.worker()]) as runtime:
        result = await runtime.run(fan_out(), concurrency=2)
    assert result.status == "interrupted"
    assert result.interrupts == (InterruptInfo("ask", "go?"),)
    # `slow` had started: it finished. `queued` was waiting for a slot and `after-slow` became
    # ready after the interrupt: neither ran.
    assert list(result) == ["ask", "slow"]
    assert result["slow"].unwrap() == {"name": "slow"}
    assert desk.calls == Counter({"ask": 1, "slow": 1})


async def test_a_run_without_interrupts_is_completed_and_has_no_checkpoint() -> None:
    desk = Desk()
    plan = graph("plain").node("a", "DESK.STEP", [], lambda i, d: step("a"))
    async with create_ditto(workers=[desk.worker()]) as runtime:
        result = await runtime.run(plan)
        assert await runtime.checkpoints.list() == []
    assert result.status == "completed"
    assert result.interrupts == ()
    assert result.checkpoint_id is None


# ----------------------------------------------------------------- resume


async def test_resume_runs_only_what_did_not_finish_and_gives_the_answer() -> None:
    desk = Desk()
    async with create_ditto(workers=[desk.worker()]) as runtime:
        first = await interrupted(runtime, fan_out(), concurrency=2)
        resumed = await runtime.resume(first.checkpoint_id or "", "yes", concurrency=2)
    assert resumed.status == "completed"
    assert resumed.ok
    assert resumed.checkpoint_id == first.checkpoint_id
    assert resumed["ask"].unwrap() == {"answer": "yes"}
    # `slow` is the stored result, not a new run of it.
    assert resumed["slow"].execution_id == first["slow"].execution_id
    assert desk.calls == Counter({"ask": 2, "slow": 1, "queued": 1, "after-slow": 1})
    assert desk.asked == [("ask", False, None), ("ask", True, "yes")]


async def test_resume_of_a_chain_continues_after_the_interrupted_task() -> None:
    desk = Desk()
    async with create_ditto(workers=[desk.worker()]) as runtime:
        first = await interrupted(runtime, chain())
        resumed = await runtime.resume(first.checkpoint_id or "", "fine")
    assert outputs(resumed) == {
        "a": {"name": "a"},
        "b": {"answer": "fine"},
        "c": {"name": "c-after-fine"},
    }
    assert desk.calls == Counter({"a": 1, "b": 2, "c": 1})


async def test_approve_and_reject_lead_to_different_outcomes() -> None:
    desk = Desk()
    async with create_ditto(workers=[desk.worker()]) as runtime:
        to_approve = await interrupted(runtime, approval(), "alice")
        to_reject = await interrupted(runtime, approval(), "bob")
        assert to_approve.checkpoint_id != to_reject.checkpoint_id
        assert to_approve.interrupts == (InterruptInfo("review", {"name": "draft for alice"}),)
        approved = await runtime.resume(to_approve.checkpoint_id or "", "approve")
        rejected = await runtime.resume(to_reject.checkpoint_id or "", "reject")
    assert approved["act"].unwrap() == {"name": "send"}
    assert rejected["act"].unwrap() == {"name": "discard"}
    # Each resume kept its own run input.
    assert approved["draft"].unwrap() == {"name": "draft for alice"}
    assert rejected["draft"].unwrap() == {"name": "draft for bob"}


async def test_an_answer_of_none_is_an_answer_and_no_answer_asks_again() -> None:
    desk = Desk()
    async with create_ditto(workers=[desk.worker()]) as runtime:
        first = await interrupted(runtime, chain())
        checkpoint_id = first.checkpoint_id or ""
        # Resumed without an answer (as after a crash): the question is asked again.
        again = await runtime.resume(checkpoint_id)
        assert again.status == "interrupted"
        assert again.interrupts == first.interrupts
        assert again.checkpoint_id == checkpoint_id
        # None is an answer.
        answered = await runtime.resume(checkpoint_id, None)
    assert answered.status == "completed"
    assert answered["b"].unwrap() == {"answer": None}
    assert answered["c"].unwrap() == {"name": "c-after-None"}
    assert desk.asked == [("b", False, None), ("b", False, None), ("b", True, None)]
    assert desk.calls["a"] == 1


async def test_resuming_a_completed_run_returns_its_results_without_running_anything() -> None:
    desk = Desk()
    async with create_ditto(workers=[desk.worker()]) as runtime:
        first = await interrupted(runtime, chain())
        checkpoint_id = first.checkpoint_id or ""
        done = await runtime.resume(checkpoint_id, "ok")
        calls = Counter(desk.calls)
        again = await runtime.resume(checkpoint_id)
        with pytest.raises(InvalidInputError):  # an answer nothing waits for is not dropped
            await runtime.resume(checkpoint_id, "another answer")
    assert desk.calls == calls
    assert again.status == "completed"
    assert again.checkpoint_id == checkpoint_id
    assert outputs(again) == outputs(done)
    assert [node.execution_id for node in again.values()] == [
        node.execution_id for node in done.values()
    ]


async def test_tasks_the_runs_deadline_cut_short_run_when_it_is_resumed() -> None:
    ran: list[str] = []

    async def step(value: Any, ctx: NodeContext) -> Any:
        ran.append(value["task"])
        if ran.count(value["task"]) == 1:  # slow the first time only
            await anyio.sleep(value["seconds"])
        return value["task"]

    worker = define_worker("slow", {"SLOW.STEP": step})
    plan = (
        graph("cut")
        .node("a", "SLOW.STEP", [], lambda i, d: {"task": "a", "seconds": 0})
        .node("b", "SLOW.STEP", ["a"], lambda i, d: {"task": "b", "seconds": 5})
        .node("c", "SLOW.STEP", ["b"], lambda i, d: {"task": "c", "seconds": 0})
    )
    async with create_ditto(workers=[worker]) as runtime:
        first = await runtime.run(plan, checkpoint="cut", timeout=1)
        assert {task: result.status for task, result in first.items()} == {
            "a": "success",
            "b": "timeout",
            "c": "timeout",
        }
        assert ran == ["a", "b"]  # c never started
        resumed = await runtime.resume("cut")
        assert resumed.ok
        assert ran == ["a", "b", "b", "c"]  # a was recorded; b and c were cut, not finished
        again = await runtime.resume("cut")
    assert again.ok
    assert ran == ["a", "b", "b", "c"]


async def test_a_tasks_own_timeout_is_its_outcome_and_is_recorded() -> None:
    ran: list[str] = []

    async def step(value: Any, ctx: NodeContext) -> Any:
        ran.append(value)
        await anyio.sleep(1)

    worker = define_worker("slow", {"SLOW.STEP": step})
    plan = graph("own").node("a", "SLOW.STEP", [], lambda i, d: "a", timeout=0.05)
    async with create_ditto(workers=[worker]) as runtime:
        first = await runtime.run(plan, checkpoint="own", timeout=10)
        again = await runtime.resume("own")
    assert first["a"].status == again["a"].status == "timeout"
    assert ran == ["a"]


async def test_resume_of_an_unknown_checkpoint_is_not_found() -> None:
    desk = Desk()
    async with create_ditto(workers=[desk.worker()]) as runtime:
        with pytest.raises(DittoError) as raised:
            await runtime.resume("no-such-checkpoint", "yes")
    assert raised.value.code == ErrorCode.CHECKPOINT_NOT_FOUND
    assert desk.calls == Counter()


async def test_resume_with_another_plan_is_a_mismatch() -> None:
    desk = Desk()
    longer = chain().node("d", "DESK.STEP", ["c"], lambda i, d: step("d"))
    async with create_ditto(workers=[desk.worker()]) as runtime:
        first = await interrupted(runtime, chain())
        calls = Counter(desk.calls)
        with pytest.raises(DittoError) as raised:
            await runtime.resume(first.checkpoint_id or "", "yes", plan=longer)
        assert raised.value.code == ErrorCode.CHECKPOINT_MISMATCH
        assert desk.calls == calls
        # The same plan, built again, is accepted.
        resumed = await runtime.resume(first.checkpoint_id or "", "yes", plan=chain())
    assert resumed.ok


# ----------------------------------------------------------------- run(checkpoint=)


async def test_a_checkpointed_run_called_again_returns_the_stored_result() -> None:
    desk = Desk()
    plan = (
        graph("job")
        .node("a", "DESK.STEP", [], lambda i, d: step(f"a{i['n']}"))
        .node("b", "DESK.STEP", ["a"], lambda i, d: step("b"))
    )
    async with create_ditto(workers=[desk.worker()]) as runtime:
        first = await runtime.run(plan, {"n": 1}, checkpoint="job-1")
        calls = Counter(desk.calls)
        second = await runtime.run(plan, {"n": 1}, checkpoint="job-1")
    assert desk.calls == calls == Counter({"a": 1, "b": 1})
    assert first.checkpoint_id == second.checkpoint_id == "job-1"
    assert second.status == "completed"
    assert second.ok
    assert outputs(second) == outputs(first) == {"a": {"name": "a1"}, "b": {"name": "b"}}


async def test_a_checkpoint_with_another_input_is_a_mismatch() -> None:
    desk = Desk()
    plan = graph("job").node("a", "DESK.STEP", [], lambda i, d: step(f"a{i['n']}"))
    async with create_ditto(workers=[desk.worker()]) as runtime:
        await runtime.run(plan, {"n": 1}, checkpoint="job-1")
        with pytest.raises(DittoError) as raised:
            await runtime.run(plan, {"n": 2}, checkpoint="job-1")
    assert raised.value.code == ErrorCode.CHECKPOINT_MISMATCH
    assert desk.calls == Counter({"a": 1})


async def test_an_interrupted_checkpointed_run_resumes_through_run_and_resume() -> None:
    desk = Desk()
    async with create_ditto(workers=[desk.worker()]) as runtime:
        first = await runtime.run(chain(), checkpoint="chat-7")
        assert first.status == "interrupted"
        assert first.checkpoint_id == "chat-7"
        resumed = await runtime.resume("chat-7", "sure")
    assert resumed["c"].unwrap() == {"name": "c-after-sure"}
    assert desk.calls == Counter({"a": 1, "b": 2, "c": 1})


# ----------------------------------------------------------------- tampering


@pytest.mark.parametrize(
    ("original", "edited"),
    [
        (b'"status":"interrupted"', b'"status":"completed"'),  # a plausible edit
        (b'"ok?":"a"', b'"ok?":"b"'),  # one byte of the payload
    ],
)
async def test_a_tampered_envelope_is_corrupt(original: bytes, edited: bytes) -> None:
    desk = Desk()
    async with create_ditto(workers=[desk.worker()]) as runtime:
        first = await interrupted(runtime, chain())
        checkpoint_id = first.checkpoint_id or ""
        store = runtime.checkpoints
        stored = await store.load(checkpoint_id)
        assert stored is not None
        assert stored.envelope.count(original) == 1
        await store.save(checkpoint_id, stored.scope, stored.envelope.replace(original, edited))
        calls = Counter(desk.calls)
        with pytest.raises(DittoError) as raised:
            await runtime.resume(checkpoint_id, "yes")
    assert raised.value.code == ErrorCode.CHECKPOINT_CORRUPT
    assert desk.calls == calls


@pytest.mark.parametrize("edit", ["flip", "truncate"])
async def test_a_tampered_task_record_is_corrupt(edit: str) -> None:
    desk = Desk()
    async with create_ditto(workers=[desk.worker()]) as runtime:
        first = await interrupted(runtime, chain())
        checkpoint_id = first.checkpoint_id or ""
        store = runtime.checkpoints
        assert isinstance(store, InProcessCheckpointStore)
        records = store._entries[checkpoint_id].records
        assert [key for key, _ in records] == ["a"]
        key, value = records[0]
        if edit == "flip":
            assert value.count(b'"name":"a"') == 1
            records[0] = (key, value.replace(b'"name":"a"', b'"name":"A"'))
        else:
            records[0] = (key, value[:-3])
        calls = Counter(desk.calls)
        with pytest.raises(DittoError) as raised:
            await runtime.resume(checkpoint_id, "yes")
    assert raised.value.code == ErrorCode.CHECKPOINT_CORRUPT
    assert desk.calls == calls


async def test_a_tampered_checkpoint_is_corrupt_for_run_too() -> None:
    desk = Desk()
    plan = graph("job").node("a", "DESK.STEP", [], lambda i, d: step("a"))
    async with create_ditto(workers=[desk.worker()]) as runtime:
        await runtime.run(plan, {"n": 1}, checkpoint="job-1")
        store = runtime.checkpoints
        stored = await store.load("job-1")
        assert stored is not None
        tampered = stored.envelope.replace(b'"n":1', b'"n":2')
        assert tampered != stored.envelope
        await store.save("job-1", stored.scope, tampered)
        with pytest.raises(DittoError) as raised:
            await runtime.run(plan, {"n": 2}, checkpoint="job-1")
    assert raised.value.code == ErrorCode.CHECKPOINT_CORRUPT
    assert desk.calls == Counter({"a": 1})


# ----------------------------------------------------------------- outside a graph, payloads


async def test_invoke_of_a_node_that_interrupts_is_a_failed_result() -> None:
    desk = Desk()
    async with create_ditto(workers=[desk.worker()]) as runtime:
        result = await runtime.invoke("DESK.ASK", {"question": {"send?": True}})
        assert await runtime.checkpoints.list() == []
    assert result.status == "failed"
    assert result.error is not None
    assert result.error.code == ErrorCode.INTERRUPTED
    assert result.error.details == {"payload": {"send?": True}}
    assert desk.asked == [("-", False, None)]


@pytest.mark.parametrize("kind", ["set", "object"])
async def test_an_interrupt_payload_that_is_not_plain_json_is_refused(kind: str) -> None:
    """The payload is stored in the checkpoint: a value JSON cannot carry, or would carry back
    changed (a set comes back a list), is refused like a non-JSON loop state."""
    desk = Desk()
    plan = graph("odd").node("x", "DESK.ODD", [], lambda i, d: {"kind": kind})
    async with create_ditto(workers=[desk.worker()]) as runtime:
        with pytest.raises(InvalidInputError) as raised:
            await runtime.run(plan)
    assert raised.value.code == ErrorCode.INVALID_INPUT


async def test_inside_a_loop_an_interrupted_graph_is_a_result_update_sees() -> None:
    desk = Desk()
    statuses: list[str] = []

    def update(state: int, result: RunResult) -> int:
        statuses.append(result.status)
        return state + 1

    definition = loop(graph=chain(), update=update, done=lambda state, result: state >= 2)
    async with create_ditto(workers=[desk.worker()]) as runtime:
        assert await runtime.loop(definition, 0) == 2
    assert statuses == ["interrupted", "interrupted"]
    assert desk.calls == Counter({"a": 2, "b": 2})


# ----------------------------------------------------------------- answers nothing waits for


async def test_an_answer_to_a_completed_run_is_refused_not_dropped() -> None:
    desk = Desk()
    async with create_ditto(workers=[desk.worker()]) as runtime:
        first = await interrupted(runtime, approval(), "bob")
        done = await runtime.resume(first.checkpoint_id or "", "approve")
        assert done.ok
        with pytest.raises(InvalidInputError, match="no interrupt waits for an answer"):
            await runtime.resume(first.checkpoint_id or "", "reject")
        again = await runtime.resume(first.checkpoint_id or "")  # without one: its result
    assert outputs(again) == outputs(done)
    assert desk.calls["act"] == 1


async def test_an_answer_to_a_checkpoint_that_was_never_interrupted_is_refused() -> None:
    desk = Desk()
    plain = graph("plain").node("a", "DESK.STEP", [], lambda i, d: step("a"))
    async with create_ditto(workers=[desk.worker()]) as runtime:
        await runtime.run(plain, checkpoint="plain-1")
        with pytest.raises(InvalidInputError, match="is completed"):
            await runtime.resume("plain-1", "yes", plan=plain)
    assert desk.calls["a"] == 1
