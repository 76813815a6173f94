"""The immutable ``graph()`` builder.

A graph is a DAG of tasks. Each task names a node type, the earlier tasks it depends on and a
binder that builds its input from the run input and its dependencies' results. Because every
dependency must name an *earlier* task, a cycle cannot be built; the graph is valid by
construction and compiles once into a :class:`~ditto.graph.plan.Plan` for the scheduler.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ditto.contracts.node_types import is_node_type
from ditto.contracts.retry import RetryPolicy
from ditto.errors import GraphError
from ditto.graph.task import Binder, Task

if TYPE_CHECKING:
    import networkx

    from ditto.contracts.result import NodeResult
    from ditto.graph.pictures import Direction, PlanShape
    from ditto.graph.plan import Plan

__all__ = ("Graph", "graph")


class _TaskLog:
    """Append-only task storage shared by a chain of graph versions.

    ``Graph.node`` on the newest version appends in place (amortised O(1)); on an older version
    it copies the prefix that version can see. A version only ever reads its first ``size``
    entries, so sharing never lets one version observe another's tasks.
    """

    __slots__ = ("index", "tasks")

    def __init__(self, tasks: list[Task]) -> None:
        self.tasks = tasks
        self.index = {task.id: position for position, task in enumerate(tasks)}


class Graph:
    """An immutable DAG of tasks; build it with :func:`graph` and :meth:`node`."""

    __slots__ = ("_log", "_name", "_plan", "_size")

    def __init__(self, name: str, _log: _TaskLog | None = None, _size: int = 0) -> None:
        if not isinstance(name, str) or not name.strip():
            raise GraphError("a graph name must be a non-empty string")
        self._name = name
        self._log = _log if _log is not None else _TaskLog([])
        self._size = _size
        self._plan: Plan | None = None

    @property
    def name(self) -> str:
        """The graph id, reported in every handler's ``ctx.execution.graph_id``."""
        return self._name

    @property
    def tasks(self) -> tuple[Task, ...]:
        """The tasks in declaration order (a topological order)."""
        return tuple(self._log.tasks[: self._size])

    def __len__(self) -> int:
        return self._size

    def __iter__(self) -> Iterator[Task]:
        return iter(self.tasks)

    def __contains__(self, task_id: object) -> bool:
        position = self._log.index.get(task_id) if isinstance(task_id, str) else None
        return position is not None and position < self._size

    def __repr__(self) -> str:
        return f"<Graph {self._name!r} with {self._size} tasks>"

    def node(
        self,
        task_id: str,
        node_type: str,
        deps: Sequence[str],
        bind: Binder,
        *,
        timeout: float | None = None,
        worker: str | None = None,
        retry: RetryPolicy | None = None,
    ) -> Graph:
        """Return a new graph with one more task; this graph is left unchanged.

        Args:
            task_id: Unique, non-empty id of the task within the graph.
            node_type: The node type to invoke, ``DOMAIN.VERB`` (e.g. ``"MEMORY.SEARCH"``).
            deps: Ids of earlier tasks whose results the binder needs (duplicates are ignored).
            bind: ``bind(run_input, deps) -> input`` for the node.
            timeout: Seconds the node may take (``> 0``); ``None`` inherits the run's deadline.
            worker: Pin the task to a worker replica id (validated when the graph runs).
            retry: Call the node again after a retryable failure (see
                :class:`~ditto.contracts.retry.RetryPolicy`); ``None`` uses the worker's default
                policy, else runs the task once. A checkpointed run records the final result
                with its ``attempts``.

        Raises:
            GraphError: ``INVALID_GRAPH``, naming the offending task.
        """
        if not isinstance(task_id, str) or not task_id.strip():
            raise GraphError(f"graph {self._name!r}: task ids must be non-empty strings")
        if task_id in self:
            raise GraphError(f"task {task_id!r}: duplicate task id in graph {self._name!r}")
        if not is_node_type(node_type):
            raise GraphError(
                f"task {task_id!r}: invalid node type {node_type!r} "
                "(expected DOMAIN.VERB in UPPER_SNAKE segments, e.g. MEMORY.WRITE)"
            )
        if isinstance(deps, str) or not isinstance(deps, Sequence):
            raise GraphError(f"task {task_id!r}: deps must be a list of task ids, not {deps!r}")
        unique_deps = tuple(dict.fromkeys(deps))
        for dep in unique_deps:
            if dep not in self:
                raise GraphError(
                    f"task {task_id!r}: dependency {dep!r} is not an earlier task of graph "
                    f"{self._name!r}"
                )
        if not callable(bind):
            raise GraphError(f"task {task_id!r}: bind must be callable")
        if timeout is not None and (
            isinstance(timeout, bool)
            or not isinstance(timeout, int | float)
            or not math.isfinite(timeout)
            or timeout <= 0
        ):
            raise GraphError(f"task {task_id!r}: timeout must be a positive number of seconds")
        if worker is not None and (not isinstance(worker, str) or not worker):
            raise GraphError(f"task {task_id!r}: worker must be a non-empty worker id")
        if retry is not None and not isinstance(retry, RetryPolicy):
            raise GraphError(f"task {task_id!r}: retry must be a RetryPolicy or None")

        task = Task(task_id, node_type, unique_deps, bind, timeout, worker, retry)
        log = self._log
        if len(log.tasks) != self._size:  # branching from an older version: copy what it sees
            log = _TaskLog(log.tasks[: self._size])
        log.tasks.append(task)
        log.index[task_id] = self._size
        return Graph(self._name, log, self._size + 1)

    def compile(self) -> Plan:
        """The scheduler's index form of this graph (computed once, then cached)."""
        if self._plan is None:
            from ditto.graph.plan import Plan

            self._plan = Plan.from_tasks(self._name, self.tasks)
        return self._plan

    def to_networkx(self) -> networkx.DiGraph[str]:
        """This graph as a ``networkx.DiGraph`` (edges point from a dependency to its dependent),
        with ``node_type`` as a node attribute, e.g. for drawing or DOT export."""
        import networkx

        digraph: networkx.DiGraph[str] = networkx.DiGraph(name=self._name)
        for task in self.tasks:
            digraph.add_node(task.id, node_type=task.node_type)
            digraph.add_edges_from((dep, task.id) for dep in task.deps)
        return digraph

    def to_mermaid(
        self,
        direction: Direction = "TD",
        *,
        results: Mapping[str, NodeResult[Any]] | None = None,
    ) -> str:
        """This graph as a Mermaid ``flowchart``; with ``results`` (e.g. a ``RunResult``), one run
        of it, with each task's status and duration. See :func:`ditto.graph.pictures.mermaid`.

        Raises:
            ValueError: ``direction`` is not ``TD``, ``TB``, ``BT``, ``LR`` or ``RL``.
        """
        from ditto.graph import pictures

        return pictures.mermaid(self._name, self.tasks, results, direction=direction)

    def to_dot(self, *, results: Mapping[str, NodeResult[Any]] | None = None) -> str:
        """This graph (or, with ``results``, one run of it) as Graphviz DOT text. See
        :func:`ditto.graph.pictures.dot`."""
        from ditto.graph import pictures

        return pictures.dot(self._name, self.tasks, results)

    def describe(self, durations: Mapping[str, float] | None = None) -> PlanShape:
        """Levels, widest level, depth and critical path of this graph (computed with networkx);
        with ``durations`` (task id -> ms, e.g. ``pictures.durations(run_result)``) the critical
        path is the slowest chain. See :func:`ditto.graph.pictures.describe`.

        Raises:
            ValueError: A duration is negative or not finite.
        """
        from ditto.graph import pictures

        return pictures.describe(self._name, self.tasks, durations)


def graph(name: str = "agent") -> Graph:
    """Start an empty, immutable graph.

    Example::

        plan = (
            graph("recall")
            .node("write", "MEMORY.WRITE", [], lambda text, deps: {"memories": [{"content": text}]})
            .node("find", "MEMORY.SEARCH", ["write"], lambda text, deps: {"query": text})
        )

    Raises:
        GraphError: ``name`` is empty.
    """
    return Graph(name)
