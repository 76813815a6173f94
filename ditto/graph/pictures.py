"""Pictures of a graph and of its runs: Mermaid and Graphviz DOT text, and the plan's shape.

Pure functions over a graph's tasks and, for a run, its results (a
:class:`~ditto.runtime.results.RunResult` is such a mapping)::

    mermaid(g.name, g.tasks)                  # the plan
    mermaid(result.graph_id, g.tasks, result)  # one run: status and duration on every task
    describe(g.name, g.tasks, durations(result)).critical_path  # the chain that made it slow

Task ids may hold any character, so the pictures name nodes ``n0``, ``n1``, ... (in declaration
order) and put the escaped task id in the label. Nothing here loads networkx until
:func:`describe` is called.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

import msgspec

from ditto.contracts.result import NodeResult
from ditto.graph.task import Task

if TYPE_CHECKING:
    import networkx

__all__ = (
    "Direction",
    "PlanShape",
    "RunStatus",
    "describe",
    "dot",
    "durations",
    "mermaid",
    "run_status",
)

Direction = Literal["TD", "TB", "BT", "LR", "RL"]
"""Mermaid flowchart directions (``TD`` and ``TB`` are the same: top to bottom)."""

RunStatus = Literal["success", "failed", "timeout", "cancelled", "interrupted", "not_run"]
"""A task's status in a run picture: a :class:`NodeResult` status, ``interrupted`` for a failed
result with error code ``INTERRUPTED``, or ``not_run`` for a task the results do not hold."""

_DIRECTIONS = frozenset(("TD", "TB", "BT", "LR", "RL"))
# ErrorCode.INTERRUPTED: a handler raised Interrupt, so the run stopped there to be resumed.
_INTERRUPTED = "INTERRUPTED"
_PLAIN_ID = re.compile(r"[\w.:/@+-]+")

# Symbol and (fill, stroke, text) colours per status; the order is the order of the classDefs.
_STYLES: dict[RunStatus, tuple[str, str, str, str]] = {
    "success": ("✓", "#d4edda", "#28a745", "#155724"),
    "failed": ("✗", "#f8d7da", "#dc3545", "#721c24"),
    "timeout": ("⏱", "#fff3cd", "#e0a800", "#856404"),
    "cancelled": ("⊘", "#e2e3e5", "#6c757d", "#383d41"),
    "interrupted": ("↯", "#ffe5d0", "#fd7e14", "#7a3e00"),
    "not_run": ("○", "#ffffff", "#adb5bd", "#6c757d"),
}

# Mermaid reads ``#name;`` as an entity inside a quoted label, ``<``/``>``/``&`` as HTML, and a
# label opening with a backtick as Markdown; entities keep all of them literal.
_MERMAID_ENTITIES = str.maketrans(
    {"#": "#35;", '"': "#quot;", "<": "#lt;", ">": "#gt;", "&": "#amp;", "`": "#96;"}
)


class PlanShape(msgspec.Struct, frozen=True, kw_only=True):
    """The shape of a graph: how wide and how deep it runs, and its longest chain.

    ``str(shape)`` (or :meth:`render`) is a short text for people.
    """

    graph_id: str
    """The graph's name."""
    tasks: int
    """How many tasks the graph has."""
    edges: int
    """How many dependency edges it has."""
    roots: tuple[str, ...]
    """Tasks without dependencies, in declaration order."""
    leaves: tuple[str, ...]
    """Tasks no other task depends on, in declaration order."""
    levels: tuple[tuple[str, ...], ...]
    """``levels[i]``: the tasks whose longest chain of dependencies holds ``i`` tasks, in
    declaration order. Level 0 is the roots; a level's tasks can all run at once."""
    width: int
    """Size of the widest level: the most tasks that can run at once."""
    depth: int
    """Number of levels: the fewest rounds the graph can run in."""
    critical_path: tuple[str, ...]
    """The longest chain of dependent tasks, root first: by number of tasks or, when the shape
    was computed with durations, by the sum of their durations."""
    critical_path_ms: float | None = None
    """Sum of the durations along :attr:`critical_path`; ``None`` without durations."""

    def render(self) -> str:
        """A few lines for people: counts, roots and leaves, the levels and the critical path."""
        lines = [
            f"graph {self.graph_id!r}: {_count(self.tasks, 'task')}, {_count(self.edges, 'edge')}"
        ]
        if not self.tasks:
            return lines[0]
        lines.append(f"roots: {_names(self.roots)}")
        lines.append(f"leaves: {_names(self.leaves)}")
        lines.append(f"levels: {self.depth} (widest: {_count(self.width, 'task')})")
        lines.extend(f"  {i}: {_names(level)}" for i, level in enumerate(self.levels))
        chain = _names(self.critical_path, " -> ")
        if self.critical_path_ms is None:
            weight = _count(len(self.critical_path), "task")
        else:
            weight = _duration(self.critical_path_ms)
        lines.append(f"critical path ({weight}): {chain}")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.render()


def run_status(result: NodeResult[Any] | None) -> RunStatus:
    """The picture status of one task's result (``None``: the task did not run)."""
    if result is None:
        return "not_run"
    if result.status == "failed" and result.error is not None and result.error.code == _INTERRUPTED:
        return "interrupted"
    return result.status


def durations(results: Mapping[str, NodeResult[Any]]) -> dict[str, float]:
    """Task id -> ``duration_ms`` of each result, e.g. of a ``RunResult``, for :func:`describe`."""
    return {task_id: result.duration_ms for task_id, result in results.items()}


def mermaid(
    graph_id: str,
    tasks: Sequence[Task],
    results: Mapping[str, NodeResult[Any]] | None = None,
    *,
    direction: Direction = "TD",
) -> str:
    """A Mermaid ``flowchart`` of a graph, or of one run of it.

    Each task is a node labelled with its id and node type; each dependency an arrow from the
    dependency to its dependent. With ``results``, each label adds the task's status and duration
    (``✓ 3.2 ms``; ``✗ failed INVALID_INPUT · 1.0 ms``) and each node gets a ``classDef`` style
    per status; a task the results do not hold is ``not_run``.

    Args:
        graph_id: The graph's name, shown as the title.
        tasks: The tasks in declaration order (``graph.tasks``).
        results: Task id -> result of one run, e.g. a ``RunResult`` (also a partial one).
        direction: ``TD``/``TB`` (top down), ``BT``, ``LR`` or ``RL``.

    Returns:
        The Mermaid text, ending with a newline.

    Raises:
        ValueError: ``direction`` is not a flowchart direction.
    """
    if direction not in _DIRECTIONS:
        raise ValueError(f"unknown direction {direction!r}: use TD, TB, BT, LR or RL")
    ids = _node_ids(tasks)
    lines = ["---", f"title: {json.dumps(graph_id, ensure_ascii=False)}", "---"]
    lines.append(f"flowchart {direction}")
    members: dict[RunStatus, list[str]] = {}
    for task in tasks:
        label = [task.id, task.node_type]
        if results is not None:
            result = results.get(task.id)
            status = run_status(result)
            label.append(_outcome(status, result))
            members.setdefault(status, []).append(ids[task.id])
        escaped = "<br/>".join(_mermaid_text(part) for part in label)
        lines.append(f'    {ids[task.id]}["{escaped}"]')
    lines.extend(f"    {ids[dep]} --> {ids[task.id]}" for task in tasks for dep in task.deps)
    for status, (_, fill, stroke, colour) in _STYLES.items():
        if status in members:
            dash = ",stroke-dasharray:4 3" if status == "not_run" else ""
            lines.append(f"    classDef {status} fill:{fill},stroke:{stroke},color:{colour}{dash}")
            lines.append(f"    class {','.join(members[status])} {status}")
    return "\n".join(lines) + "\n"


def dot(
    graph_id: str,
    tasks: Sequence[Task],
    results: Mapping[str, NodeResult[Any]] | None = None,
) -> str:
    """A Graphviz DOT ``digraph`` of a graph, or of one run of it (same labels and colours as
    :func:`mermaid`); render it with ``dot -Tsvg``.

    Args:
        graph_id: The graph's name: the digraph's id and label.
        tasks: The tasks in declaration order (``graph.tasks``).
        results: Task id -> result of one run, e.g. a ``RunResult`` (also a partial one).

    Returns:
        The DOT text, ending with a newline.
    """
    title = _dot_string(graph_id)
    lines = [
        f"digraph {title} {{",
        f"    graph [label={title}, labelloc=t];",
        '    node [shape=box, style="rounded,filled", fillcolor="#ffffff"];',
    ]
    ids = _node_ids(tasks)
    for task in tasks:
        label = [task.id, task.node_type]
        attributes = ""
        if results is not None:
            result = results.get(task.id)
            status = run_status(result)
            label.append(_outcome(status, result))
            _, fill, stroke, colour = _STYLES[status]
            attributes = f', fillcolor="{fill}", color="{stroke}", fontcolor="{colour}"'
            if status == "not_run":
                attributes += ', style="rounded,filled,dashed"'
        text = _dot_string("\n".join(label))
        lines.append(f"    {ids[task.id]} [label={text}{attributes}];")
    lines.extend(f"    {ids[dep]} -> {ids[task.id]};" for task in tasks for dep in task.deps)
    lines.append("}")
    return "\n".join(lines) + "\n"


def describe(
    graph_id: str,
    tasks: Sequence[Task],
    durations: Mapping[str, float] | None = None,
) -> PlanShape:
    """The shape of a graph: levels, width, depth and critical path, computed with networkx.

    Args:
        graph_id: The graph's name.
        tasks: The tasks in declaration order (``graph.tasks``).
        durations: Task id -> milliseconds, e.g. ``durations(run_result)``: the critical path is
            then the chain with the largest total duration (the one that made the run slow); a
            task without a duration counts 0 ms. Without it, the chain with the most tasks.

    Returns:
        A :class:`PlanShape`; between chains of equal weight, declaration order decides.

    Raises:
        ValueError: A duration is negative or not finite.
    """
    import networkx

    if durations is not None:
        for task_id, ms in durations.items():
            if not math.isfinite(ms) or ms < 0:
                raise ValueError(
                    f"task {task_id!r}: duration {ms!r} is not a finite, non-negative number"
                )

    digraph = _digraph(tasks)
    levels = tuple(
        tuple(tasks[i].id for i in sorted(generation))
        for generation in networkx.topological_generations(digraph)
    )
    path, weight = _critical_path(digraph, tasks, durations)
    return PlanShape(
        graph_id=graph_id,
        tasks=len(tasks),
        edges=digraph.number_of_edges(),
        roots=tuple(tasks[i].id for i in digraph if digraph.in_degree(i) == 0),
        leaves=tuple(tasks[i].id for i in digraph if digraph.out_degree(i) == 0),
        levels=levels,
        width=max((len(level) for level in levels), default=0),
        depth=len(levels),
        critical_path=path,
        critical_path_ms=weight if durations is not None else None,
    )


def _digraph(tasks: Sequence[Task]) -> networkx.DiGraph[int]:
    """Tasks by position (ids may be any string), edges from a dependency to its dependent."""
    import networkx

    position = {task.id: i for i, task in enumerate(tasks)}
    digraph: networkx.DiGraph[int] = networkx.DiGraph()
    digraph.add_nodes_from(range(len(tasks)))
    for i, task in enumerate(tasks):
        digraph.add_edges_from((position[dep], i) for dep in task.deps)
    return digraph


def _critical_path(
    digraph: networkx.DiGraph[int],
    tasks: Sequence[Task],
    durations: Mapping[str, float] | None,
) -> tuple[tuple[str, ...], float]:
    """The heaviest chain and its weight, a task weighing its duration (else 1).

    ``dag_longest_path`` weighs edges, not nodes, so each edge carries its head's weight and a
    virtual source (-1) points at every root with the root's weight: a chain from the source
    then weighs the sum of its tasks.
    """
    import networkx

    if not tasks:
        return (), 0.0

    def weight(i: int) -> float:
        return 1.0 if durations is None else float(durations.get(tasks[i].id, 0.0))

    weighted: networkx.DiGraph[int] = networkx.DiGraph()
    weighted.add_node(-1)
    weighted.add_nodes_from(digraph)
    weighted.add_weighted_edges_from(
        (-1, i, weight(i)) for i in digraph if digraph.in_degree(i) == 0
    )
    weighted.add_weighted_edges_from((u, v, weight(v)) for u, v in digraph.edges)
    # Declaration order is topological; passing it makes ties go to the chain declared first.
    chain = networkx.dag_longest_path(weighted, topo_order=[-1, *range(len(tasks))])
    positions = [i for i in chain if i != -1]
    if not positions:  # every weight is 0: any single task is a heaviest chain
        positions = [0]
    return tuple(tasks[i].id for i in positions), sum(weight(i) for i in positions)


def _node_ids(tasks: Sequence[Task]) -> dict[str, str]:
    return {task.id: f"n{i}" for i, task in enumerate(tasks)}


def _outcome(status: RunStatus, result: NodeResult[Any] | None) -> str:
    symbol = _STYLES[status][0]
    if result is None:
        return f"{symbol} not run"
    took = _duration(result.duration_ms)
    if status == "success":
        return f"{symbol} {took}"
    # The code tells a failure apart (INVALID_INPUT, NOT_FOUND); TIMEOUT would only repeat it.
    code = result.error.code if result.error is not None else ""
    shown = f" {code}" if code and code != status.upper() else ""
    return f"{symbol} {status}{shown} · {took}"


def _duration(ms: float) -> str:
    return f"{ms:.1f} ms" if ms < 1000 else f"{ms / 1000:.2f} s"


def _names(task_ids: Sequence[str], separator: str = ", ") -> str:
    # Plain ids read best; one with spaces, commas or line breaks is quoted so lists stay clear.
    return separator.join(i if _PLAIN_ID.fullmatch(i) else repr(i) for i in task_ids)


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def _mermaid_text(text: str) -> str:
    # A line break (or any control character) would end the node statement.
    flat = "".join(" " if ch.isspace() or not ch.isprintable() else ch for ch in text)
    return flat.translate(_MERMAID_ENTITIES)


def _dot_string(text: str) -> str:
    """A DOT double-quoted string: backslashes and quotes escaped, line breaks as ``\\n``."""
    escaped = text.replace("\\", "\\\\").replace('"', '\\"')
    lines = [
        "".join(ch if ch.isprintable() else " " for ch in line) for line in escaped.split("\n")
    ]
    return '"' + "\\n".join(lines) + '"'
