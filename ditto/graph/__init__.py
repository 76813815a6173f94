"""Immutable graphs (plans) of node invocations. Pure: no I/O, no runtime."""

from ditto.graph.builder import Graph, graph
from ditto.graph.plan import Plan
from ditto.graph.task import Binder, Task

__all__ = ("Binder", "Graph", "Plan", "Task", "graph")
