"""A graph's unit of work: which node type to invoke, after which tasks, with which input.

Kept apart from the builder so the scheduler, the checkpoints and the pictures can depend on a
task without depending on how graphs are built.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ditto.contracts.result import NodeResult
from ditto.contracts.retry import RetryPolicy

__all__ = ("Binder", "Task")

Binder = Callable[[Any, Mapping[str, NodeResult[Any]]], Any]
"""``bind(run_input, deps) -> node input``. ``deps`` is a read-only mapping of the task's declared
dependencies to their results; a binder checks ``.ok`` (or calls ``.unwrap()``) before using an
output. A binder that raises stops the run (see ``Ditto.run``)."""


@dataclass(frozen=True, slots=True)
class Task:
    """One task of a graph."""

    id: str
    node_type: str
    deps: tuple[str, ...]
    bind: Binder
    timeout: float | None = None
    """Seconds this task may run; bounded further by the run's and the runtime's deadline."""
    worker: str | None = None
    """Pin the task to this worker replica id; there is no fallback to another replica."""
    retry: RetryPolicy | None = None
    """How the task is retried; ``None``: the worker's default policy, else one attempt. Not
    part of the plan digest (how to run a task, not which task it is): a checkpointed run may
    be resumed with another policy."""
