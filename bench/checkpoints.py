"""What checkpointing a run costs: Ditto on SQLite against LangGraph with its SQLite
checkpointer, against the same run without checkpoints, and what a resume costs.

* **Per node, checkpointed.** The same chain and fan-out/fan-in shapes, every node returning a
  small output: Ditto records each finished task in a ``SqliteCheckpointStore``
  (``run(..., checkpoint=...)``); LangGraph (``langgraph-checkpoint-sqlite``'s
  ``AsyncSqliteSaver``) keeps each node's output in its state (a dict merged by ``|``, the
  LangGraph way to keep per-node results) and checkpoints every superstep. Target: Ditto
  ≥ 5× cheaper per node.
* **Overhead.** Ditto with and without a checkpoint, same run.
* **Resume.** A 1,000-task chain checkpointed with 999 tasks done: ``resume`` reads and checks
  the 999 records and runs the last task. Target: < 10 % of the full checkpointed run.

Systems take turns round by round (``timing.alternate``); figures are medians over rounds with
the lowest and highest round. Run it with ``python3 tasks.py bench checkpoints``.
"""

from __future__ import annotations

import argparse
import asyncio
import operator
import tempfile
from collections.abc import Awaitable, Callable
from itertools import count
from pathlib import Path
from typing import Annotated, Any, TypedDict

from timing import Figure, alternate, timed_async

from ditto import Ditto, Graph, NodeContext, create_ditto, define_worker, graph
from ditto.adapters.sqlite import SqliteCheckpointStore

Shape = list[tuple[str, list[str]]]

LANGGRAPH_TARGET = 5.0
RESUME_TARGET = 0.10


def chain(size: int) -> Shape:
    return [(f"t{i}", [f"t{i - 1}"] if i else []) for i in range(size)]


def fan(width: int) -> Shape:
    middle = [(f"m{i}", ["root"]) for i in range(width)]
    return [("root", []), *middle, ("sink", [name for name, _ in middle])]


def ditto_plan(shape: Shape, name: str) -> Graph:
    plan = graph(name)
    for task_id, deps in shape:
        plan = plan.node(task_id, "BENCH.STEP", deps, _bind(task_id))
    return plan


def _bind(task_id: str) -> Callable[[Any, Any], dict[str, str]]:
    return lambda run_input, deps: {"task": task_id}


async def step(input: dict[str, str], ctx: NodeContext) -> dict[str, str]:
    return {"done": input["task"]}


class _State(TypedDict):
    results: Annotated[dict[str, str], operator.or_]


def langgraph_app(shape: Shape, saver: Any) -> Any:
    from langgraph.graph import END, START, StateGraph

    builder = StateGraph(_State)
    for task_id, deps in shape:
        builder.add_node(task_id, _langgraph_node(task_id))
        if not deps:
            builder.add_edge(START, task_id)
        else:
            builder.add_edge(deps if len(deps) > 1 else deps[0], task_id)
    for task_id, _ in shape:
        if not any(task_id in deps for _, deps in shape):
            builder.add_edge(task_id, END)
    return builder.compile(checkpointer=saver)


def _langgraph_node(task_id: str) -> Callable[[_State], Awaitable[dict[str, Any]]]:
    async def node(state: _State) -> dict[str, Any]:
        return {"results": {task_id: task_id}}

    return node


async def main(size: int, rounds: int, runs: int) -> None:
    try:
        from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
    except ImportError:
        AsyncSqliteSaver = None
        print("LangGraph column skipped: install the bench extra (langgraph-checkpoint-sqlite)")
    worker = define_worker("bench", {"BENCH.STEP": step})
    ids = count()
    with tempfile.TemporaryDirectory() as folder:
        store = SqliteCheckpointStore(Path(folder) / "ditto-checkpoints.sqlite")
        async with create_ditto(workers=[worker], checkpoints=store) as runtime:
            print(f"per node, µs; {runs} runs x {rounds} rounds; median [lowest-highest round]")
            print(
                f"  {'shape':18} {'Ditto, checkpointed':>22} {'Ditto, none':>20} "
                f"{'overhead':>9} {'LangGraph + SQLite':>22} {'LangGraph/Ditto':>16}"
            )
            for label, shape in (
                (f"chain {size}", chain(size)),
                (f"fan-out {size}", fan(size - 2)),
            ):
                plan = ditto_plan(shape, label.replace(" ", "-"))
                systems: dict[str, Callable[[], Awaitable[list[float]]]] = {
                    "checkpointed": lambda plan=plan: timed_async(
                        [
                            lambda: _checked(runtime.run(plan, checkpoint=f"b{next(ids)}"))
                            for _ in range(runs)
                        ]
                    ),
                    "plain": lambda plan=plan: timed_async(
                        [lambda: _checked(runtime.run(plan)) for _ in range(runs)]
                    ),
                }
                saver_context = None
                if AsyncSqliteSaver is not None:
                    saver_context = AsyncSqliteSaver.from_conn_string(
                        str(Path(folder) / f"langgraph-{label.replace(' ', '-')}.sqlite")
                    )
                    saver = await saver_context.__aenter__()
                    app = langgraph_app(shape, saver)
                    systems["langgraph"] = lambda app=app, shape=shape: timed_async(
                        [
                            lambda: _langgraph_run(app, len(shape), f"lg{next(ids)}")
                            for _ in range(runs)
                        ]
                    )
                try:
                    for system in systems.values():  # warm up
                        await system()
                    figures = await alternate(systems, rounds)
                finally:
                    if saver_context is not None:
                        await saver_context.__aexit__(None, None, None)
                _row(label, len(shape), figures)
            await _resume_row(runtime, max(size, 1_000), rounds)


async def _checked(run: Awaitable[Any]) -> None:
    result = await run
    assert result.ok, result


async def _langgraph_run(app: Any, nodes: int, thread: str) -> None:
    state = await app.ainvoke({"results": {}}, {"configurable": {"thread_id": thread}})
    assert len(state["results"]) == nodes


def _per_node(figure: Figure, nodes: int) -> Any:
    return figure.latency(0.5, scale=1e6 / nodes)


def _row(label: str, nodes: int, figures: dict[str, Figure]) -> None:
    mine = _per_node(figures["checkpointed"], nodes)
    plain = _per_node(figures["plain"], nodes)
    line = f"  {label:18} {mine.show(1):>22} {plain.show(1):>20} {mine.median / plain.median:8.2f}x"
    if "langgraph" in figures:
        theirs = _per_node(figures["langgraph"], nodes)
        ratio = theirs.median / mine.median
        verdict = "ok" if ratio >= LANGGRAPH_TARGET else "TARGET MISSED"
        line += f" {theirs.show(1):>22} {ratio:15.1f}x  {verdict} (≥ {LANGGRAPH_TARGET:.0f}x)"
    print(line)


async def _resume_row(runtime: Ditto, size: int, rounds: int) -> None:
    """Full checkpointed run of a ``size`` chain (its last task interrupts) against resuming
    such a run: ``size - 1`` records read and checked, one task run."""
    worker = define_worker("tail", {"BENCH.TAIL": _tail})
    runtime.register(worker)
    plan = ditto_plan(chain(size - 1), "resume")
    plan = plan.node("last", "BENCH.TAIL", [f"t{size - 2}"], lambda run_input, deps: {})
    names = count()
    waiting: list[str] = []  # interrupted runs with size - 1 tasks done, ready to resume

    async def interrupted_run() -> None:
        name = f"full-{next(names)}"
        result = await runtime.run(plan, checkpoint=name)
        assert result.status == "interrupted", result
        waiting.append(name)

    async def resume_round() -> list[float]:
        while len(waiting) < 3:
            await interrupted_run()  # untimed: each resume needs its own interrupted run
        prepared = [waiting.pop() for _ in range(3)]
        return await timed_async(
            [lambda name=name: _checked(runtime.resume(name, "go")) for name in prepared]
        )

    async def full_round() -> list[float]:
        return await timed_async([interrupted_run for _ in range(3)])

    await resume_round()
    figures = await alternate({"resume": resume_round, "full": full_round}, rounds)
    resume = figures["resume"].latency()
    full = figures["full"].latency()
    share = resume.median / full.median
    verdict = "ok" if share < RESUME_TARGET else "TARGET MISSED"
    print(
        f"resume a {size:,}-task run with {size - 1:,} done: {resume.show(2)} ms against the full "
        f"checkpointed run {full.show(2)} ms = {share:.1%}  {verdict} (< {RESUME_TARGET:.0%})"
    )


async def _tail(input: dict[str, Any], ctx: NodeContext) -> dict[str, Any]:
    return {"answer": ctx.interrupt("continue?")}


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=200, help="nodes per shape (default 200)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--runs", type=int, default=3, help="runs per round and system")
    arguments = parser.parse_args()
    asyncio.run(main(arguments.size, arguments.rounds, arguments.runs))
