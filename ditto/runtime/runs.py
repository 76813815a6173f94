"""One graph run, from a validated plan to its :class:`RunResult`: the scheduler plus what hooks
into it — the checkpoint that records each finished task, the interrupts that pause the run,
the observer that streams each result.

The engine checks a run's arguments and hands a :class:`RunRequest` here, together with the
few things a run needs from it (:class:`RunServices`): never the facade.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from time import perf_counter
from typing import TYPE_CHECKING, Any, Protocol

import anyio.to_thread

from ditto.contracts.result import NodeResult
from ditto.errors import ErrorCode, InvalidInputError
from ditto.graph.builder import Graph
from ditto.graph.plan import Plan
from ditto.runtime.checkpoints.envelope import plain_json
from ditto.runtime.checkpoints.graphs import GraphCheckpoint, graph_scope
from ditto.runtime.context import NO_ANSWER, ExecutionScope, Invoker
from ditto.runtime.invocation import invoke_route, new_execution_id
from ditto.runtime.results import GraphRunError, InterruptInfo, RunResult
from ditto.runtime.scheduler import AfterTask, TaskCall, execute_plan
from ditto.runtime.tracing import end_span

if TYPE_CHECKING:
    from opentelemetry.trace import Tracer

    from ditto.graph.task import Task
    from ditto.runtime.checkpoints.graphs import KnownPlans
    from ditto.runtime.checkpoints.port import CheckpointStore
    from ditto.runtime.registry import WorkerRegistry

__all__ = (
    "ResultObserver",
    "RunRequest",
    "RunServices",
    "checked_request",
    "checked_wait",
    "execute_run",
    "seconds",
    "stored_result",
)

ResultObserver = Callable[[str, NodeResult[Any]], Awaitable[None]]
"""Awaited with ``(task_id, result)`` as each task finishes, before its dependents start."""

_INTERRUPTED = ErrorCode.INTERRUPTED.value


class RunServices(Protocol):
    """What a run needs from the runtime: the routes, the default deadline, the checkpoint
    store, the plans it ran, and the way nested calls come back in."""

    @property
    def registry(self) -> WorkerRegistry: ...

    @property
    def default_timeout(self) -> float: ...

    @property
    def checkpoints(self) -> CheckpointStore: ...

    @property
    def plans(self) -> KnownPlans: ...

    @property
    def invoke_nested(self) -> Invoker: ...

    @property
    def tracer(self) -> Tracer | None: ...


@dataclass(slots=True)
class RunRequest:
    """A run whose arguments were checked: nothing here can be invalid any more."""

    plan: Plan
    run_input: Any
    limit: int | None
    deadline: float | None
    """Absolute, on the event loop's clock; ``None`` for no run deadline."""
    principal: str | None
    checkpoint: GraphCheckpoint | None = None
    """Record finished tasks here (a new or a resumed checkpoint)."""
    answers: Mapping[str, Any] = field(default_factory=dict)
    """Task id -> the answer its interrupted handler gets on this attempt."""
    observe: ResultObserver | None = None
    key_scope: str | None = None
    """What the tasks' idempotency keys derive from (a checkpointed loop's iteration); default
    the checkpoint id, else the run id."""


def checked_request(
    registry: WorkerRegistry,
    plan: Graph | Plan,
    run_input: Any,
    limit: int | None,
    timeout: float | None,
    principal: str | None,
) -> RunRequest:
    """A run whose plan, routes, pins, concurrency and timeout were checked before anything
    runs.

    Raises:
        InvalidInputError: Not a graph, a bad concurrency or timeout.
        UnknownNodeError: A node type no worker implements.
        UnknownWorkerError: A task pinned to a replica that does not implement its node type.
    """
    if isinstance(plan, Graph):
        compiled = plan.compile()
    elif isinstance(plan, Plan):
        compiled = plan
    else:
        raise InvalidInputError("run() takes a graph built with graph()")
    for node_type in sorted(compiled.node_types):
        registry.route(node_type)
    routes = registry.routes
    for task in compiled.tasks:
        if task.worker is not None:
            routes[task.node_type].check_pin(task.worker)
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
        raise InvalidInputError("concurrency must be a positive integer")
    deadline = (
        None if timeout is None else asyncio.get_running_loop().time() + seconds(timeout, "timeout")
    )
    return RunRequest(compiled, run_input, limit, deadline, principal)


def seconds(value: float, name: str) -> float:
    """``value`` as a positive, finite number of seconds.

    Raises:
        InvalidInputError: It is not one.
    """
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise InvalidInputError(f"{name} must be a positive number of seconds")
    if value <= 0:
        raise InvalidInputError(f"{name} must be a positive number of seconds")
    return float(value)


def checked_wait(wait: object) -> float | None:
    """``wait`` (seconds to wait for a checkpoint's lease another run holds) if it is ``None``
    or a non-negative, finite number.

    Raises:
        InvalidInputError: It is not.
    """
    if wait is None:
        return None
    if (
        isinstance(wait, bool)
        or not isinstance(wait, int | float)
        or not math.isfinite(wait)
        or wait < 0
    ):
        raise InvalidInputError("wait must be a non-negative number of seconds")
    return float(wait)


def stored_result(plan: Plan, checkpoint: GraphCheckpoint) -> RunResult:
    """The result of a checkpointed run that already completed (nothing runs again)."""
    return RunResult(
        plan.graph_id,
        checkpoint.id,
        {
            task.id: checkpoint.finished[task.id]
            for task in plan.tasks
            if task.id in checkpoint.finished
        },
        0.0,
        len(plan.tasks),
        tasks=plan.tasks,
        checkpoint_id=checkpoint.id,
    )


async def execute_run(services: RunServices, request: RunRequest) -> RunResult:
    """Run ``request`` to its end, an interrupt, or a binder's failure.

    Raises:
        GraphRunError: A binder raised (the checkpoint, if any, says ``failed``).
        InvalidInputError: An interrupt's payload is not plain JSON (nothing is checkpointed).
        DittoError: The checkpoint store failed (``CHECKPOINT_STORE_UNAVAILABLE``): admission
            stopped, started tasks finished, then the error propagates.
    """
    run_id = new_execution_id()
    tracer = services.tracer
    if tracer is None:
        return await _execute(services, request, run_id, None)
    attributes: dict[str, str | int] = {
        "ditto.graph_id": request.plan.graph_id,
        "ditto.run_id": run_id,
        "ditto.tasks": len(request.plan.tasks),
    }
    if request.checkpoint is not None:
        attributes["ditto.checkpoint_id"] = request.checkpoint.id
    if request.principal is not None:
        attributes["ditto.principal"] = request.principal
    with tracer.start_as_current_span(
        f"ditto.run {request.plan.graph_id}", attributes=attributes
    ) as span:
        outcome = await _execute(services, request, run_id, tracer)
        span.set_attribute("ditto.status", outcome.status)
        return outcome


async def _execute(
    services: RunServices, request: RunRequest, run_id: str, tracer: Tracer | None
) -> RunResult:
    plan = request.plan
    checkpoint = request.checkpoint
    graph_id = plan.graph_id
    routes = services.registry.routes
    default_timeout = services.default_timeout
    nested = services.invoke_nested
    principal = request.principal
    run_deadline = request.deadline
    answers = request.answers
    # The same for every attempt of this run's tasks: a checkpoint keeps its id across resumes,
    # and an interrupted run without one is checkpointed under this run id.
    key_scope = request.key_scope or (run_id if checkpoint is None else checkpoint.id)
    loop = asyncio.get_running_loop()
    started = perf_counter()
    # Tasks the run's own deadline stopped (or never let start): not the outcome of the task,
    # so they are not checkpointed, and resuming the run runs them (as after a crash).
    cut: set[str] = set()

    async def call(task: Task, node_input: Any) -> NodeResult[Any]:
        # The graph's hot path: routes and pins were checked before the run, so go straight to
        # the invocation.
        # runtime.timeout_ms bounds every call: a task's timeout only shortens it.
        timeout = default_timeout if task.timeout is None else min(task.timeout, default_timeout)
        deadline = loop.time() + timeout
        by_run = run_deadline is not None and run_deadline < deadline
        if run_deadline is not None and by_run:
            deadline = run_deadline
        result = await invoke_route(
            nested,
            routes[task.node_type],
            node_input,
            deadline=deadline,
            principal=principal,
            worker=task.worker,
            execution=ExecutionScope(graph_id, run_id, task.id),
            key_scope=key_scope,
            answer=answers.get(task.id, NO_ANSWER) if answers else NO_ANSWER,
            retry=task.retry,
        )
        if by_run and result.status == "timeout":
            cut.add(task.id)
        return result

    run_task: TaskCall = call if tracer is None else _traced(call, tracer, run_id, principal)
    finished: dict[int, NodeResult[Any]] | None = None
    if checkpoint is not None and checkpoint.finished:
        position = {task.id: index for index, task in enumerate(plan.tasks)}
        finished = {position[task_id]: result for task_id, result in checkpoint.finished.items()}
    results, failure = await execute_plan(
        plan,
        request.run_input,
        run_task,
        request.limit,
        finished=finished,
        after=_after(plan, checkpoint, request.observe, cut),
    )

    by_id: dict[str, NodeResult[Any]] = {}
    interrupts: list[InterruptInfo] = []
    for task, result in zip(plan.tasks, results, strict=True):
        if result is None:
            continue
        by_id[task.id] = result
        error = result.error
        if error is not None and error.code == _INTERRUPTED:
            payload = error.details.get("payload") if error.details else None
            interrupts.append(InterruptInfo(task.id, payload))

    if interrupts:
        # Before anything is checkpointed, and off the event loop (a payload may be large).
        await anyio.to_thread.run_sync(_check_payloads, interrupts)
        if checkpoint is None:
            # Nothing was recorded during the run: record everything that finished now, so
            # `resume` has what it needs.
            checkpoint = GraphCheckpoint(services.checkpoints, run_id)
            await checkpoint.begin(
                graph_scope(graph_id), services.plans.remember(plan), request.run_input, principal
            )
            interrupted = {info.task_id for info in interrupts} | cut
            await checkpoint.record_all(
                {key: value for key, value in by_id.items() if key not in interrupted}
            )
        await checkpoint.end(
            "interrupted", [{"task": info.task_id, "payload": info.payload} for info in interrupts]
        )
    elif checkpoint is not None:
        # Cut short by its deadline, the run is not complete: resuming it runs what was cut.
        await checkpoint.end("failed" if failure is not None or cut else "completed", [])

    outcome = RunResult(
        graph_id,
        run_id,
        by_id,
        (perf_counter() - started) * 1000.0,
        len(plan.tasks),
        tasks=plan.tasks,
        interrupts=interrupts,
        checkpoint_id=None if checkpoint is None else checkpoint.id,
    )
    if failure is not None:
        task_id, cause = failure
        raise GraphRunError(task_id, cause, outcome) from cause
    return outcome


def _traced(call: TaskCall, tracer: Tracer, run_id: str, principal: str | None) -> TaskCall:
    """``call``, each task in a span of its own (a child of the run's)."""

    async def traced(task: Task, node_input: Any) -> NodeResult[Any]:
        attributes: dict[str, str] = {
            "ditto.run_id": run_id,
            "ditto.task_id": task.id,
            "ditto.node_type": task.node_type,
        }
        if principal is not None:
            attributes["ditto.principal"] = principal
        with tracer.start_as_current_span(
            f"ditto.task {task.node_type}", attributes=attributes
        ) as span:
            result = await call(task, node_input)
            end_span(span, result)
            return result

    return traced


def _check_payloads(interrupts: list[InterruptInfo]) -> None:
    for info in interrupts:
        plain_json(info.payload, f"the interrupt payload of task {info.task_id!r}")


def _after(
    plan: Plan,
    checkpoint: GraphCheckpoint | None,
    observe: ResultObserver | None,
    cut: set[str],
) -> AfterTask | None:
    """The scheduler's per-result hook: record the task (unless it was interrupted or ``cut``
    short by the run's deadline: it has to run again), then show it to the observer."""
    if checkpoint is None and observe is None:
        return None
    tasks = plan.tasks

    async def after(index: int, result: NodeResult[Any]) -> None:
        task_id = tasks[index].id
        if checkpoint is not None:
            error = result.error
            if (error is None or error.code != _INTERRUPTED) and task_id not in cut:
                await checkpoint.record(task_id, result)
        if observe is not None:
            await observe(task_id, result)

    return after
