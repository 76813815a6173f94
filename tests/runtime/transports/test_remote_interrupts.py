"""An interrupt raised by a handler on a remote worker (over real Redis Streams) is resumed
like a local one: the answer given to ``runtime.resume`` travels with the call, and the
handler's ``ctx.interrupt`` returns it."""

from __future__ import annotations

from typing import Any

import pytest

from ditto import NodeContext, create_ditto, define_worker, graph
from tests.runtime.transports.conftest import Harness

pytestmark = pytest.mark.anyio


async def test_a_remote_interrupt_is_resumed_with_its_answer(harness: Harness) -> None:
    seen: list[tuple[bool, Any]] = []

    async def ask(value: Any, ctx: NodeContext) -> Any:
        seen.append((ctx.resumed, ctx.resume_value))
        answer = ctx.interrupt({"question": "send it?", "draft": value["draft"]})
        return {"sent": answer == "yes", "draft": value["draft"]}

    await harness.serve(define_worker("asker", {"ASK.SEND": ask}), "asker-remote-1")
    plan = graph("send").node("ask", "ASK.SEND", [], lambda _, deps: {"draft": "hello"})
    async with create_ditto() as runtime:
        runtime.register_remote(["ASK.SEND"], transport=harness.new_transport())
        paused = await runtime.run(plan, checkpoint="remote-ask", timeout=20)
        assert paused.status == "interrupted"
        assert [(i.task_id, i.payload) for i in paused.interrupts] == [
            ("ask", {"question": "send it?", "draft": "hello"})
        ]
        done = await runtime.resume("remote-ask", "yes")
    assert done.ok, done["ask"].error
    assert done["ask"].output == {"sent": True, "draft": "hello"}
    assert seen == [(False, None), (True, "yes")]


async def test_an_answer_of_none_is_an_answer(harness: Harness) -> None:
    seen: list[tuple[bool, Any]] = []

    async def ask(value: Any, ctx: NodeContext) -> Any:
        seen.append((ctx.resumed, ctx.resume_value))
        return {"answer": ctx.interrupt("anything?")}

    await harness.serve(define_worker("asker", {"ASK.NONE": ask}), "asker-remote-2")
    plan = graph("none").node("ask", "ASK.NONE", [], lambda _, deps: {})
    async with create_ditto() as runtime:
        runtime.register_remote(["ASK.NONE"], transport=harness.new_transport())
        assert (await runtime.run(plan, checkpoint="remote-none", timeout=20)).status == (
            "interrupted"
        )
        done = await runtime.resume("remote-none", None)
    assert done.ok, done["ask"].error
    assert done["ask"].output == {"answer": None}
    assert seen == [(False, None), (True, None)]
