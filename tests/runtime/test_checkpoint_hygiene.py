"""Checkpoint hygiene: a lost task record is seen, values that would not come back equal (or
cannot be encoded at all) are refused with INVALID_INPUT before anything is written, and so is
an answer that is not plain JSON."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest

from ditto import (
    DittoError,
    ErrorCode,
    InvalidInputError,
    NodeContext,
    create_ditto,
    define_worker,
    graph,
)
from ditto.adapters.sqlite import SqliteCheckpointStore
from ditto.runtime.checkpoints import InProcessCheckpointStore

pytestmark = pytest.mark.anyio


async def _echo(value: Any, ctx: NodeContext) -> Any:
    return value


async def _ask(value: Any, ctx: NodeContext) -> Any:
    return {"answer": ctx.interrupt({"question": "go?"})}


WORKER = define_worker("w", {"W.ECHO": _echo, "W.ASK": _ask})
PLAN = (
    graph("g")
    .node("a", "W.ECHO", [], lambda i, d: "a")
    .node("b", "W.ECHO", ["a"], lambda i, d: "b")
    .node("c", "W.ECHO", ["b"], lambda i, d: "c")
)


async def test_a_lost_record_of_a_completed_checkpoint_is_corrupt_not_a_shorter_run() -> None:
    store = InProcessCheckpointStore()
    async with create_ditto(workers=[WORKER], checkpoints=store) as runtime:
        first = await runtime.run(PLAN, None, checkpoint="c-1")
        assert first.ok
        assert len(first) == 3
        stored = await store.load("c-1")
        assert stored is not None
        # Someone deletes task b's record: keep the envelope and the other records.
        await store.delete("c-1")
        await store.save("c-1", stored.scope, stored.envelope)
        await store.append("c-1", [record for record in stored.records if record[0] != "b"])
        with pytest.raises(DittoError) as raised:
            await runtime.run(PLAN, None, checkpoint="c-1")
    assert raised.value.code == ErrorCode.CHECKPOINT_CORRUPT
    assert "'b'" in raised.value.message


def _deep(levels: int) -> list[Any]:
    root: list[Any] = []
    node = root
    for _ in range(levels):
        child: list[Any] = []
        node.append(child)
        node = child
    return root


@pytest.mark.parametrize(
    "run_input",
    [
        {1, 2},
        (1, 2),
        b"bytes",
        math.nan,
        {"n": math.inf},
        {1: "int key"},
        _deep(2_000),
        _deep(990),
        _deep(257),
    ],
    ids=["set", "tuple", "bytes", "nan", "inf", "int-key", "2000-deep", "990-deep", "257-deep"],
)
async def test_a_run_input_that_is_not_plain_json_is_refused_before_anything(
    run_input: Any,
) -> None:
    store = InProcessCheckpointStore()
    async with create_ditto(workers=[WORKER], checkpoints=store) as runtime:
        with pytest.raises(InvalidInputError):
            await runtime.run(PLAN, run_input, checkpoint="bad-input")
        assert await store.load("bad-input") is None


async def test_an_input_nested_as_deep_as_allowed_comes_back_equal(tmp_path: Path) -> None:
    ask = graph("ask").node("q", "W.ASK", [], lambda i, d: {})
    deep = _deep(250)
    store = SqliteCheckpointStore(tmp_path / "checkpoints.sqlite")
    async with create_ditto(workers=[WORKER], checkpoints=store) as runtime:
        paused = await runtime.run(ask, deep, checkpoint="deep")
        assert paused.status == "interrupted"
        answered = await runtime.resume("deep", deep)
    assert answered["q"].unwrap() == {"answer": deep}


@pytest.mark.parametrize("answer", [object(), {1, 2}, math.nan, _deep(2_000)])
async def test_an_answer_that_is_not_plain_json_is_refused_and_the_run_still_waits(
    answer: Any,
) -> None:
    ask = graph("ask").node("q", "W.ASK", [], lambda i, d: {})
    async with create_ditto(workers=[WORKER]) as runtime:
        paused = await runtime.run(ask)
        assert paused.status == "interrupted"
        with pytest.raises(InvalidInputError):
            await runtime.resume(paused.checkpoint_id or "", answer)
        answered = await runtime.resume(paused.checkpoint_id or "", "yes")
    assert answered["q"].unwrap() == {"answer": "yes"}


async def test_an_interrupt_payload_nested_too_deep_is_refused() -> None:
    async def deep_ask(value: Any, ctx: NodeContext) -> Any:
        return ctx.interrupt(_deep(2_000))

    asker = define_worker("deep", {"D.ASK": deep_ask})
    async with create_ditto(workers=[asker]) as runtime:
        with pytest.raises(InvalidInputError):
            await runtime.run(graph("g").node("q", "D.ASK", [], lambda i, d: {}))
