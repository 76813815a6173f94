"""Immutable graphs (plans) of node invocations. Pure: no I/O, no runtime."""

from ditto.graph.builder import Binder, Graph, Task, graph
from ditto.graph.plan import Plan

__all__ = ("Binder", "Graph", "Plan", "Task", "graph")
