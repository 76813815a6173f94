"""The compiled, index-based form of a graph that the scheduler walks."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ditto.graph.task import Task

__all__ = ("Plan",)


@dataclass(frozen=True, slots=True)
class Plan:
    """A graph as integer adjacency lists, so scheduling costs O(V + E) with no string lookups.

    Built by :meth:`ditto.graph.Graph.compile`; tasks are in declaration order, which is a
    topological order because every dependency names an earlier task.
    """

    graph_id: str
    tasks: tuple[Task, ...]
    dependencies: tuple[tuple[int, ...], ...]
    """``dependencies[i]``: positions of task ``i``'s dependencies."""
    dependents: tuple[tuple[int, ...], ...]
    """``dependents[i]``: positions of the tasks that depend on task ``i``."""
    roots: tuple[int, ...]
    """Tasks without dependencies, in declaration order."""
    node_types: frozenset[str]

    @classmethod
    def from_tasks(cls, graph_id: str, tasks: Sequence[Task]) -> Plan:
        position = {task.id: i for i, task in enumerate(tasks)}
        dependencies = tuple(tuple(position[dep] for dep in task.deps) for task in tasks)
        dependents: list[list[int]] = [[] for _ in tasks]
        for i, deps in enumerate(dependencies):
            for dep in deps:
                dependents[dep].append(i)
        return cls(
            graph_id=graph_id,
            tasks=tuple(tasks),
            dependencies=dependencies,
            dependents=tuple(tuple(d) for d in dependents),
            roots=tuple(i for i, deps in enumerate(dependencies) if not deps),
            node_types=frozenset(task.node_type for task in tasks),
        )
