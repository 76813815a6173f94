"""The result of a graph run, and the error raised when a binder stops one."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

import msgspec

from ditto.contracts.result import NodeResult
from ditto.errors import DittoError, ErrorCode

if TYPE_CHECKING:
    from ditto.graph.pictures import Direction
    from ditto.graph.task import Task

__all__ = ("GraphRunError", "InterruptInfo", "RunResult")


class InterruptInfo(msgspec.Struct, frozen=True):
    """A task that raised :class:`~ditto.errors.Interrupt`: what it asks."""

    task_id: str
    payload: Any


class RunResult(Mapping[str, NodeResult[Any]]):
    """Task id -> :class:`NodeResult`, in declaration order, for one run of a graph.

    A run never turns a ``failed`` node into an exception: check :attr:`ok`, or each result.
    A run whose handler raised :class:`~ditto.errors.Interrupt` has ``status == "interrupted"``:
    :attr:`interrupts` says what it waits for and ``runtime.resume(result.checkpoint_id,
    answer)`` continues it.
    """

    __slots__ = (
        "_results",
        "checkpoint_id",
        "duration_ms",
        "graph_id",
        "interrupts",
        "run_id",
        "task_count",
        "tasks",
    )

    def __init__(
        self,
        graph_id: str,
        run_id: str,
        results: Mapping[str, NodeResult[Any]],
        duration_ms: float,
        task_count: int,
        *,
        tasks: Sequence[Task] = (),
        interrupts: Sequence[InterruptInfo] = (),
        checkpoint_id: str | None = None,
    ) -> None:
        self.graph_id = graph_id
        """The graph's name."""
        self.run_id = run_id
        """Fresh UUID of this run, also in every handler's ``ctx.execution.run_id``."""
        self._results = dict(results)
        self.duration_ms = duration_ms
        """Wall time of the whole run."""
        self.task_count = task_count
        """How many tasks the graph has (a partial result holds fewer)."""
        self.tasks: tuple[Task, ...] = tuple(tasks)
        """The graph's tasks, in declaration order (what :meth:`to_mermaid` draws)."""
        self.interrupts: tuple[InterruptInfo, ...] = tuple(interrupts)
        """What the run waits for when it was interrupted (empty otherwise)."""
        self.checkpoint_id = checkpoint_id
        """The checkpoint this run was recorded in (always set for an interrupted run)."""

    @property
    def status(self) -> Literal["completed", "interrupted"]:
        """``interrupted`` when a handler raised ``Interrupt``; else ``completed`` (which says
        every admitted task has a result, not that they succeeded: see :attr:`ok`)."""
        return "interrupted" if self.interrupts else "completed"

    @property
    def ok(self) -> bool:
        """True when every task of the graph ran and succeeded."""
        return len(self._results) == self.task_count and all(
            result.status == "success" for result in self._results.values()
        )

    @property
    def failed(self) -> dict[str, NodeResult[Any]]:
        """The results that are not a success, by task id."""
        return {task: result for task, result in self._results.items() if not result.ok}

    def to_mermaid(self, direction: Direction = "TD") -> str:
        """A Mermaid flowchart of the graph with each task's status and duration."""
        from ditto.graph.pictures import mermaid

        return mermaid(self.graph_id, self.tasks, self, direction=direction)

    def __getitem__(self, task_id: str) -> NodeResult[Any]:
        return self._results[task_id]

    def __iter__(self) -> Iterator[str]:
        return iter(self._results)

    def __len__(self) -> int:
        return len(self._results)

    def __repr__(self) -> str:
        statuses = ", ".join(f"{task}={result.status}" for task, result in self._results.items())
        return (
            f"<RunResult {self.graph_id!r} run_id={self.run_id} status={self.status} "
            f"ok={self.ok} {{{statuses}}}>"
        )


class GraphRunError(DittoError):
    """A binder raised, so the run admitted no new task, let started tasks finish and stopped.

    The binder's exception is the ``__cause__``; the partial result holds every task that ran.

    Attributes:
        task_id: The task whose binder raised.
        partial: A :class:`RunResult` of the tasks that finished; dependents of ``task_id``
            never ran.
    """

    default_code = ErrorCode.GRAPH_RUN_FAILED

    def __init__(self, task_id: str, cause: BaseException, partial: RunResult) -> None:
        super().__init__(
            f"graph {partial.graph_id!r}: the binder of task {task_id!r} raised "
            f"{type(cause).__name__}; {len(partial)} of {partial.task_count} tasks finished",
            details={"task_id": task_id, "run_id": partial.run_id},
        )
        self.task_id = task_id
        self.partial = partial
