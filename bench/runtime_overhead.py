"""Per-node runtime overhead of Ditto for no-op handlers, against baselines from the same run.

Every system runs the same graph shapes with a handler that does nothing, so the time measured
is pure scheduling and invocation overhead:

* **Ditto**: ``runtime.run(plan)`` over a worker whose ``NOOP.RUN`` handler returns ``None``;
* **raw TaskGroup**: the minimal scheduler a user would write by hand: one task per node in an
  ``asyncio.TaskGroup``, each awaiting its dependencies' ``asyncio.Event`` s;
* **LangGraph** (when installed): a compiled ``StateGraph`` of the same topology, fan-in through
  ``add_edge([deps], node)`` so that a node waits for all of its dependencies.

Shapes: a chain of 1,000 nodes, a fan-out/fan-in of 1,000 (root + 1,000 + sink = 1,002 nodes), a
seeded random DAG of 5,000 nodes / 10,000 edges, and single ``invoke`` calls. Graphs are built
and compiled once, outside the timed region. Each measurement is warmed up once, then repeated;
the table reports the median time divided by the node count (µs/node) and two ratios, then checks
the targets: on every graph shape Ditto is within 5x of the raw TaskGroup and at least 10x faster
than LangGraph. A missed target prints ``TARGET MISSED``; the exit code is 0 regardless (this is
a report, not a test).

Run it with ``python3 tasks.py bench runtime_overhead`` (installs the ``bench`` extra, which brings
LangGraph) or ``.venv/bin/python bench/runtime_overhead.py``.
"""

from __future__ import annotations

import asyncio
import gc
import platform
import random
import statistics
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from functools import partial
from time import perf_counter
from typing import Any, TypedDict

import msgspec

from ditto import Ditto, NodeContext, create_ditto, define_worker, graph

NODE_TYPE = "NOOP.RUN"
RAW_INVOKE_CALLS = 20_000
DITTO_INVOKE_CALLS = 20_000
LANGGRAPH_INVOKE_CALLS = 1_000
REPEATS = 5
LANGGRAPH_REPEATS = 3  # a 5,000-node run takes seconds on LangGraph
MAX_DITTO_OVER_RAW = 5.0
MIN_LANGGRAPH_OVER_DITTO = 10.0

Node = tuple[str, tuple[str, ...]]
"""``(task_id, deps)``: one node of a shape; deps name earlier nodes."""

Run = Callable[[], Awaitable[object]]
"""One timed unit of work: a whole graph run, or a batch of invocations."""


# --------------------------------------------------------------------------------- shapes


@dataclass(frozen=True, slots=True)
class Shape:
    """A graph topology shared by all three systems, nodes in a topological order."""

    name: str
    nodes: tuple[Node, ...]


def chain_shape(length: int) -> Shape:
    """``n0 -> n1 -> ... -> n{length-1}``."""
    nodes = tuple((f"n{i}", (f"n{i - 1}",) if i else ()) for i in range(length))
    return Shape(f"chain {length:,}", nodes)


def fan_shape(width: int) -> Shape:
    """One root, ``width`` nodes depending on it, one sink depending on all of them."""
    middle = tuple(f"m{i}" for i in range(width))
    nodes = (("root", ()), *((task_id, ("root",)) for task_id in middle), ("sink", middle))
    return Shape(f"fan-out/in {width:,}", nodes)


def random_dag_shape(node_count: int, edge_count: int, seed: int = 42) -> Shape:
    """``edge_count`` distinct random edges ``(i, j)`` with ``i < j``, nodes in index order."""
    rng = random.Random(seed)
    edges: set[tuple[int, int]] = set()
    while len(edges) < edge_count:
        low, high = sorted(rng.sample(range(node_count), 2))
        edges.add((low, high))
    deps: list[list[int]] = [[] for _ in range(node_count)]
    for low, high in edges:
        deps[high].append(low)
    nodes = tuple((f"n{j}", tuple(f"n{i}" for i in sorted(deps[j]))) for j in range(node_count))
    return Shape(f"random DAG {node_count:,}/{edge_count:,}", nodes)


SINGLE_NODE = Shape("single node", (("only", ()),))


# --------------------------------------------------------------------------------- systems


async def noop(input: Any, ctx: NodeContext | None) -> Any:
    """The handler every system runs (``Any`` input: Ditto converts nothing)."""
    return None


@dataclass(frozen=True, slots=True)
class System:
    """How one system runs a shape and a single invocation."""

    graph_run: Callable[[Shape], Run]
    """Builds (outside the timed region) what runs the shape once."""
    single_call: Run
    """One invocation of a no-op node."""
    invoke_calls: int
    repeats: int = REPEATS


def ditto_system(runtime: Ditto) -> System:
    async def invoke_once() -> None:
        result = await runtime.invoke(NODE_TYPE, None)
        if not result.ok:
            raise RuntimeError(f"Ditto invoke failed: {result!r}")

    def graph_run(shape: Shape) -> Run:
        plan = graph(shape.name)
        for task_id, deps in shape.nodes:
            plan = plan.node(task_id, NODE_TYPE, deps, lambda run_input, deps: None)
        plan.compile()  # cached on the graph: run() reuses it

        async def run() -> None:
            result = await runtime.run(plan, None)
            if not result.ok:
                raise RuntimeError(f"Ditto run of {shape.name} failed: {result.failed!r}")

        return run

    return System(graph_run, invoke_once, DITTO_INVOKE_CALLS)


def raw_system() -> System:
    def graph_run(shape: Shape) -> Run:
        async def run() -> None:
            done = {task_id: asyncio.Event() for task_id, _ in shape.nodes}

            async def node(task_id: str, deps: tuple[str, ...]) -> None:
                for dep in deps:
                    await done[dep].wait()
                await noop(None, None)
                done[task_id].set()

            async with asyncio.TaskGroup() as group:
                for task_id, deps in shape.nodes:
                    group.create_task(node(task_id, deps))

        return run

    return System(graph_run, partial(noop, None, None), RAW_INVOKE_CALLS)


class _LangGraphState(TypedDict):
    unused: int
    """Never written: nodes return ``{}``, so parallel branches cannot conflict."""


LangGraphNode = Callable[[_LangGraphState], Awaitable[dict[str, Any]]]


async def _langgraph_noop(state: _LangGraphState) -> dict[str, Any]:
    return {}


def _langgraph_noop_for(task_id: str) -> LangGraphNode:
    return _langgraph_noop


def build_langgraph(shape: Shape, node_for: Callable[[str], LangGraphNode]) -> Any:
    """Compile ``shape`` as a StateGraph running ``node_for(task_id)`` for each node."""
    from langgraph.graph import END, START, StateGraph

    builder = StateGraph(_LangGraphState)
    has_dependents = {dep for _, deps in shape.nodes for dep in deps}
    for task_id, deps in shape.nodes:
        builder.add_node(task_id, node_for(task_id))
        if not deps:
            builder.add_edge(START, task_id)
        elif len(deps) == 1:
            builder.add_edge(deps[0], task_id)
        else:
            builder.add_edge(list(deps), task_id)  # waits for every dep, not for the first
        if task_id not in has_dependents:
            builder.add_edge(task_id, END)
    return builder.compile()


def _langgraph_runner(shape: Shape, node_for: Callable[[str], LangGraphNode]) -> Run:
    app = build_langgraph(shape, node_for)
    config = {"recursion_limit": 1_000_000}  # counts supersteps: a 1,000-chain needs 1,000
    return partial(app.ainvoke, {"unused": 0}, config=config)


def langgraph_system() -> System | None:
    """The LangGraph system, or ``None`` when LangGraph is not installed."""
    try:
        import langgraph.graph  # noqa: F401
    except ImportError:
        return None

    def graph_run(shape: Shape) -> Run:
        return _langgraph_runner(shape, _langgraph_noop_for)

    single_call = _langgraph_runner(SINGLE_NODE, _langgraph_noop_for)
    return System(graph_run, single_call, LANGGRAPH_INVOKE_CALLS, LANGGRAPH_REPEATS)


async def check_langgraph_waits_for_all_deps() -> None:
    """Fail unless LangGraph runs every node of a random DAG once, after all of its deps."""
    shape = random_dag_shape(300, 600, seed=7)
    order: list[str] = []

    def recorder(task_id: str) -> LangGraphNode:
        async def record(state: _LangGraphState) -> dict[str, Any]:
            order.append(task_id)
            return {}

        return record

    await _langgraph_runner(shape, recorder)()
    position = {task_id: i for i, task_id in enumerate(order)}
    if len(order) != len(shape.nodes) or len(position) != len(order):
        raise RuntimeError(f"LangGraph ran {len(order)} nodes of {len(shape.nodes)}")
    for task_id, deps in shape.nodes:
        if any(position[dep] > position[task_id] for dep in deps):
            raise RuntimeError(f"LangGraph ran {task_id} before all of its dependencies")


# --------------------------------------------------------------------------------- measuring


async def median_seconds(run: Run, repeats: int) -> float:
    """Warm up once, then the median wall time of ``repeats`` runs."""
    await run()
    samples = []
    for _ in range(repeats):
        gc.collect()
        started = perf_counter()
        await run()
        samples.append(perf_counter() - started)
    gc.collect()
    return statistics.median(samples)


def call_repeatedly(call: Run, times: int) -> Run:
    async def run() -> None:
        for _ in range(times):
            await call()

    return run


async def per_node_us(shape: Shape, system: System) -> float:
    seconds = await median_seconds(system.graph_run(shape), system.repeats)
    return seconds / len(shape.nodes) * 1e6


async def per_call_us(system: System) -> float:
    run = call_repeatedly(system.single_call, system.invoke_calls)
    return await median_seconds(run, system.repeats) / system.invoke_calls * 1e6


# --------------------------------------------------------------------------------- reporting


@dataclass(frozen=True, slots=True)
class Row:
    label: str
    nodes: int | None
    """Node count of a graph shape; ``None`` for the invoke row."""
    ditto: float
    raw: float
    langgraph: float | None

    @property
    def is_graph(self) -> bool:
        return self.nodes is not None

    @property
    def ditto_over_raw(self) -> float:
        return self.ditto / self.raw

    @property
    def langgraph_over_ditto(self) -> float | None:
        return None if self.langgraph is None else self.langgraph / self.ditto


COLUMNS = (
    ("shape", 24),
    ("nodes", 7),
    ("Ditto µs", 11),
    ("raw TG µs", 11),
    ("LangGraph µs", 14),
    ("Ditto/raw", 11),
    ("LG/Ditto", 10),
)


def _cell(value: float | None, suffix: str = "") -> str:
    return "—" if value is None else f"{value:,.2f}{suffix}"


def _line(cells: Sequence[str]) -> str:
    first, *rest = cells
    widths = [width for _, width in COLUMNS]
    return first.ljust(widths[0]) + "".join(
        cell.rjust(width) for cell, width in zip(rest, widths[1:], strict=True)
    )


def print_table(rows: Sequence[Row]) -> None:
    print(_line([title for title, _ in COLUMNS]))
    for row in rows:
        nodes = "—" if row.nodes is None else f"{row.nodes:,}"
        speed_up = row.langgraph_over_ditto
        print(
            _line(
                [
                    row.label,
                    nodes,
                    _cell(row.ditto),
                    _cell(row.raw),
                    _cell(row.langgraph),
                    _cell(row.ditto_over_raw, "x"),
                    _cell(speed_up, "x"),
                ]
            )
        )
    print("(graph rows: median µs per node; invoke row: median µs per call)")


def target_checks(row: Row) -> list[tuple[bool, str]]:
    """``(met, description)`` of each target that could be measured for a graph row."""
    ratio = row.ditto_over_raw
    checks = [(ratio <= MAX_DITTO_OVER_RAW, f"Ditto/raw {ratio:.2f}x ≤ {MAX_DITTO_OVER_RAW:g}x")]
    speed_up = row.langgraph_over_ditto
    if speed_up is not None:
        checks.append(
            (
                speed_up >= MIN_LANGGRAPH_OVER_DITTO,
                f"LangGraph/Ditto {speed_up:.2f}x ≥ {MIN_LANGGRAPH_OVER_DITTO:g}x",
            )
        )
    return checks


def print_targets(rows: Sequence[Row]) -> None:
    print(
        f"\nTargets, on every graph shape: Ditto/raw ≤ {MAX_DITTO_OVER_RAW:g}x and "
        f"LangGraph/Ditto ≥ {MIN_LANGGRAPH_OVER_DITTO:g}x"
    )
    for row in rows:
        if not row.is_graph:
            print(f"  info: {row.label}: the targets apply to graph shapes only")
            continue
        checks = target_checks(row)
        described = "; ".join(f"{text} {'ok' if met else 'MISSED'}" for met, text in checks)
        if row.langgraph is None:
            described += "; LangGraph/Ditto not measured"
        verdict = "met" if all(met for met, _ in checks) else "TARGET MISSED"
        print(f"  {verdict}: {row.label}: {described}")


# --------------------------------------------------------------------------------- main


async def measure_row(
    label: str,
    nodes: int | None,
    measure: Callable[[System], Awaitable[float]],
    systems: tuple[System, System, System | None],
) -> Row:
    """One table row: ``measure`` applied to Ditto, the raw TaskGroup and LangGraph (if any)."""
    ditto, raw, langgraph = systems
    return Row(
        label,
        nodes,
        await measure(ditto),
        await measure(raw),
        None if langgraph is None else await measure(langgraph),
    )


async def main() -> None:
    started = perf_counter()
    print(f"Python {platform.python_version()} on {platform.machine()}, asyncio event loop")
    shapes = (chain_shape(1_000), fan_shape(1_000), random_dag_shape(5_000, 10_000))
    worker = define_worker("noop", {NODE_TYPE: noop})
    async with create_ditto(workers=[worker]) as runtime:
        langgraph = langgraph_system()
        if langgraph is None:
            print("langgraph not installed (pip install -e '.[bench]')")
        else:
            await check_langgraph_waits_for_all_deps()
        systems = (ditto_system(runtime), raw_system(), langgraph)
        rows = [
            await measure_row(shape.name, len(shape.nodes), partial(per_node_us, shape), systems)
            for shape in shapes
        ]
        rows.append(await measure_row("invoke (per call)", None, per_call_us, systems))
    print()
    print_table(rows)
    print_targets(rows)
    await print_output_check_cost()
    print(f"\ntotal time {perf_counter() - started:.1f} s")


class Point(msgspec.Struct, frozen=True):
    x: int
    y: int
    label: str


class Page(msgspec.Struct, frozen=True):
    points: list[Point]


async def print_output_check_cost() -> None:
    """What checking a handler's own output Struct costs per call (user workers), against a
    worker that trusts its outputs (the built-in ones), for a small and a 100-item output."""
    small = Point(1, 2, "a")
    page = Page([Point(n, n, f"p{n}") for n in range(100)])

    async def one(request: None, ctx: NodeContext) -> Point:
        return small

    async def hundred(request: None, ctx: NodeContext) -> Page:
        return page

    handlers = {"OUT.ONE": one, "OUT.PAGE": hundred}
    checked_worker = define_worker("checked", handlers)
    trusted_worker = define_worker("trusted", handlers, trusted_outputs=True)
    print("\noutput checks (median µs per invoke, alternating, 5 rounds of 5,000 calls):")
    for node in ("OUT.ONE", "OUT.PAGE"):
        times: dict[str, list[float]] = {"checked": [], "trusted": []}
        async with create_ditto(workers=[checked_worker]) as checked:
            async with create_ditto(workers=[trusted_worker]) as trusted:
                order = [("checked", checked), ("trusted", trusted)]
                for round_ in range(5):
                    for name, runtime in order[round_ % 2 :] + order[: round_ % 2]:
                        began = perf_counter()
                        for _ in range(5_000):
                            await runtime.invoke(node, None)
                        times[name].append((perf_counter() - began) / 5_000 * 1e6)
        checked_us = statistics.median(times["checked"])
        trusted_us = statistics.median(times["trusted"])
        print(
            f"  {node:<9} checked {checked_us:7.2f}  trusted {trusted_us:7.2f}  "
            f"cost of the check {checked_us - trusted_us:6.2f} µs ({checked_us / trusted_us:.2f}x)"
        )


if __name__ == "__main__":
    asyncio.run(main())
