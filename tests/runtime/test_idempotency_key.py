"""``ctx.idempotency_key``: the same for every attempt of the same work, so side effects keyed by
it happen once — across resumes (in another runtime on the same checkpoint file), for an
interrupted task answered later, for nested calls, for the iterations of a checkpointed loop —
and different for different work."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest

from ditto import NodeContext, create_ditto, define_worker, graph, loop
from ditto.adapters.sqlite import SqliteCheckpointStore

pytestmark = pytest.mark.anyio


class Keys:
    """A worker that records ``(task id, key)`` of every call; ``W.HANG`` hangs the first time
    (the run is then abandoned, as by a crash), ``W.ASK`` asks a person."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, str]] = []
        self.hang = True

    def _note(self, ctx: NodeContext) -> None:
        task = "-" if ctx.execution is None else ctx.execution.task_id
        self.seen.append((task, ctx.idempotency_key))

    def worker(self) -> Any:
        async def note(value: Any, ctx: NodeContext) -> Any:
            self._note(ctx)
            return value

        async def hang(value: Any, ctx: NodeContext) -> Any:
            self._note(ctx)
            if self.hang:
                await anyio.sleep_forever()
            return value

        async def ask(value: Any, ctx: NodeContext) -> Any:
            self._note(ctx)
            return ctx.interrupt("go?")

        async def parent(value: Any, ctx: NodeContext) -> Any:
            self._note(ctx)
            first = await ctx.invoke("W.NOTE", "child-1")
            second = await ctx.invoke("W.NOTE", "child-2")
            return [first.unwrap(), second.unwrap()]

        return define_worker(
            "w", {"W.NOTE": note, "W.HANG": hang, "W.ASK": ask, "W.PARENT": parent}
        )

    def of(self, task: str) -> list[str]:
        return [key for seen, key in self.seen if seen == task]


PLAN = (
    graph("g")
    .node("a", "W.NOTE", [], lambda i, d: "a")
    .node("b", "W.HANG", ["a"], lambda i, d: "b")
    .node("c", "W.NOTE", ["b"], lambda i, d: "c")
)


async def test_a_task_rerun_by_a_resume_in_a_new_runtime_keeps_its_key(tmp_path: Path) -> None:
    keys = Keys()
    path = tmp_path / "runs.sqlite"
    async with create_ditto(workers=[keys.worker()], checkpoints=SqliteCheckpointStore(path)) as rt:
        with anyio.move_on_after(0.5):  # b hangs: the run is abandoned mid-task, like a crash
            await rt.run(PLAN, None, checkpoint="job-1")
    keys.hang = False
    async with create_ditto(workers=[keys.worker()], checkpoints=SqliteCheckpointStore(path)) as rt:
        done = await rt.resume("job-1", plan=PLAN)
    assert done.ok
    assert len(keys.of("a")) == 1  # recorded: not run again
    first, again = keys.of("b")
    assert first == again
    assert len(set(keys.of("a") + keys.of("b") + keys.of("c"))) == 3  # one key per task


async def test_an_interrupted_task_answered_later_keeps_its_key() -> None:
    keys = Keys()
    ask = graph("ask").node("q", "W.ASK", [], lambda i, d: {})
    async with create_ditto(workers=[keys.worker()]) as rt:
        paused = await rt.run(ask)
        resumed = await rt.resume(paused.checkpoint_id or "", "yes")
    assert resumed.ok
    assert paused.run_id != resumed.run_id
    asked, answered = keys.of("q")
    assert asked == answered


async def test_nested_calls_derive_stable_distinct_keys(tmp_path: Path) -> None:
    keys = Keys()
    nested = graph("n").node("p", "W.PARENT", [], lambda i, d: "p")
    for round_ in range(2):  # the same checkpoint id: the same work, the same keys
        path = tmp_path / f"r{round_}.sqlite"
        async with create_ditto(
            workers=[keys.worker()], checkpoints=SqliteCheckpointStore(path)
        ) as rt:
            await rt.run(nested, None, checkpoint="same-id")
    # Nested calls inherit the parent's task: each round notes the parent, then its children.
    first, again = keys.of("p")[:3], keys.of("p")[3:]
    assert first == again  # the same work: the same parent and child keys
    assert len(set(first)) == 3  # parent, first child, second child: all distinct


async def test_other_work_has_other_keys() -> None:
    keys = Keys()
    one = graph("one").node("t", "W.NOTE", [], lambda i, d: 1)
    async with create_ditto(workers=[keys.worker()]) as rt:
        await rt.run(one, None, checkpoint="x")
        await rt.run(one, None, checkpoint="y")
        await rt.run(one)
        await rt.run(one)
        single = await rt.invoke("W.NOTE", 1)
    assert len(set(keys.of("t"))) == 4  # two checkpoints, two unrecorded runs
    assert keys.of("-") == [single.execution_id]  # a top-level call: its execution id


async def test_a_checkpointed_loop_keys_each_iteration(tmp_path: Path) -> None:
    keys = Keys()
    step = graph("step").node("t", "W.NOTE", [], lambda i, d: i)
    definition = loop(graph=step, update=lambda s, r: s + 1, done=lambda s, r: s >= 3)
    for round_ in range(2):
        store = SqliteCheckpointStore(tmp_path / f"loop{round_}.sqlite")
        async with create_ditto(workers=[keys.worker()], checkpoints=store) as rt:
            assert await rt.loop(definition, 0, checkpoint="loop-1") == 3
    per_iteration = keys.of("t")
    assert len(set(per_iteration[:3])) == 3  # each iteration is other work
    assert per_iteration[:3] == per_iteration[3:]  # ...and the same work again has the same keys
