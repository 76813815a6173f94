"""Running a loop defined with :func:`ditto.runtime.loops.loop` (the rules are in that module's
docstring): the checks made before any callback runs, the state machine with its checkpoint,
the plan form's ``step``, the loop's deadline and iteration limit.

A loop needs three things from the runtime (:class:`LoopServices`): its default iteration
limit, its checkpoint store, and a way to run one graph. It never sees the facade.
"""

from __future__ import annotations

import asyncio
import inspect
import math
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from ditto.errors import DittoError, ErrorCode, InvalidInputError
from ditto.graph.builder import Graph
from ditto.runtime.checkpoints.loops import LoopCheckpoint
from ditto.runtime.loops import (
    LoopDefinition,
    LoopEvent,
    LoopObserver,
    PlanLoop,
    StateLoop,
    checked_limit,
)
from ditto.runtime.runs import checked_wait

if TYPE_CHECKING:
    from ditto.runtime.checkpoints.holding import HeldLease
    from ditto.runtime.checkpoints.port import CheckpointStore
    from ditto.runtime.limits import RuntimeLimits
    from ditto.runtime.results import RunResult

__all__ = (
    "DEFAULT_MAX_ITERATIONS",
    "LoopOptions",
    "LoopServices",
    "Step",
    "check_loop",
    "run_loop",
)

DEFAULT_MAX_ITERATIONS = 32


class LoopServices(Protocol):
    """What a loop needs from the runtime."""

    @property
    def limits(self) -> RuntimeLimits: ...

    @property
    def checkpoints(self) -> CheckpointStore: ...

    async def lease(self, checkpoint_id: str, wait: float | None) -> HeldLease: ...

    async def run(
        self,
        plan: Graph,
        run_input: Any = None,
        *,
        concurrency: int | None = None,
        timeout: float | None = None,
        principal: str | None = None,
        checkpoint: str | None = None,
        key_scope: str | None = None,
    ) -> RunResult: ...


class Step:
    """The :class:`~ditto.runtime.loops.LoopStep` a plan loop gets: one graph run per call."""

    __slots__ = (
        "_emit",
        "_expired",
        "_loop",
        "_options",
        "_runtime",
        "exhausted",
        "iteration",
        "limit",
    )

    def __init__(
        self,
        runtime: LoopServices,
        loop_id: str,
        limit: int,
        options: dict[str, Any],
        emit: Callable[[LoopEvent], Awaitable[None]],
        expired: Callable[[], bool],
    ) -> None:
        self._runtime = runtime
        self._expired = expired
        self._loop = loop_id
        self._options = options
        self._emit = emit
        self.limit = limit
        self.iteration = 0
        """Graph executions so far."""
        self.exhausted = False

    async def __call__(
        self,
        graph: Graph,
        graph_input: Any = None,
        *,
        concurrency: int | None = None,
        timeout: float | None = None,
    ) -> RunResult:
        """Run ``graph`` as the loop's next iteration.

        Raises:
            DittoError: ``LOOP_LIMIT_REACHED`` when the loop already ran ``max_iterations``
                graphs; ``LOOP_TIMEOUT`` past the loop's timeout (a plan that caught the
                cancellation cannot run another graph).
            GraphRunError: A binder raised (catch it to branch).
        """
        if self._expired():
            raise _timed_out(self._loop)
        if self.iteration >= self.limit:
            self.exhausted = True
            raise _limit_reached(self._loop, self.limit)
        options = dict(self._options)
        if concurrency is not None:
            options["concurrency"] = concurrency
        if timeout is not None:
            options["timeout"] = timeout
        iteration = self.iteration
        self.iteration += 1
        return await _run_graph(
            self._runtime, self._loop, iteration, graph, graph_input, options, self._emit
        )


@dataclass(frozen=True, slots=True)
class LoopOptions:
    """A loop's checked options (see :meth:`Ditto.loop`)."""

    limit: int
    concurrency: int | None
    timeout: float | None
    principal: str | None
    checkpoint: str | None
    wait: float | None = None
    """Seconds to wait for the checkpoint's lease another run holds."""


def check_loop(
    runtime: LoopServices,
    definition: object,
    *,
    concurrency: int | None,
    timeout: float | None,
    principal: str | None,
    checkpoint: str | None,
    wait: float | None = None,
) -> LoopOptions:
    """Check everything about a loop before any callback runs.

    Raises:
        InvalidInputError: Not a loop definition, an invalid limit, concurrency or timeout, or a
            checkpoint for a plan loop.
    """
    if not isinstance(definition, StateLoop | PlanLoop):
        raise InvalidInputError("loop() takes a definition built with ditto.loop()")
    limit = (
        checked_limit(definition.max_iterations)
        or checked_limit(runtime.limits.loop_max_iterations)
        or DEFAULT_MAX_ITERATIONS
    )
    if checkpoint is not None and isinstance(definition, PlanLoop):
        raise InvalidInputError(
            "a plan loop cannot be checkpointed (its progress is code, not data): use a "
            "state-machine loop, or checkpoint each graph with run(..., checkpoint=)"
        )
    if checkpoint is not None and (not isinstance(checkpoint, str) or not checkpoint.strip()):
        raise InvalidInputError("a checkpoint id must be a non-empty string")
    if concurrency is not None and (
        isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1
    ):
        raise InvalidInputError("concurrency must be a positive integer")
    if timeout is not None and (
        isinstance(timeout, bool)
        or not isinstance(timeout, int | float)
        or not math.isfinite(timeout)
        or timeout <= 0
    ):
        raise InvalidInputError("timeout must be a positive number of seconds")
    return LoopOptions(limit, concurrency, timeout, principal, checkpoint, checked_wait(wait))


async def run_loop(
    runtime: LoopServices,
    definition: LoopDefinition,
    loop_input: Any,
    options: LoopOptions,
    on_event: LoopObserver | None,
) -> Any:
    """Run ``definition`` with options from :func:`check_loop` (see the module docstring)."""
    deadline = None
    if options.timeout is not None:
        deadline = asyncio.get_running_loop().time() + options.timeout

    async def emit(event: LoopEvent) -> None:
        if on_event is not None:
            outcome = on_event(event)
            if inspect.isawaitable(outcome):
                await outcome

    run_options: dict[str, Any] = {
        "concurrency": options.concurrency,
        "principal": options.principal,
    }
    scope = asyncio.timeout_at(deadline)
    try:
        async with scope:
            if isinstance(definition, PlanLoop):
                step = Step(runtime, definition.id, options.limit, run_options, emit, scope.expired)
                value = await definition.plan(step, loop_input)
                if step.exhausted:
                    raise _limit_reached(definition.id, options.limit)
            else:
                value = await _state_machine(
                    runtime,
                    definition,
                    loop_input,
                    options.limit,
                    run_options,
                    emit,
                    options,
                )
    except TimeoutError:
        if not scope.expired():
            raise
        raise _timed_out(definition.id) from None
    if scope.expired():  # the deadline's cancellation was caught and swallowed inside
        raise _timed_out(definition.id)
    return value


def _timed_out(loop_id: str) -> DittoError:
    return DittoError(f"loop {loop_id!r} did not finish in time", code=ErrorCode.LOOP_TIMEOUT)


async def _state_machine(
    runtime: LoopServices,
    definition: StateLoop,
    state: Any,
    limit: int,
    options: dict[str, Any],
    emit: Callable[[LoopEvent], Awaitable[None]],
    loop_options: LoopOptions,
) -> Any:
    checkpoint = loop_options.checkpoint
    if checkpoint is None:
        return await _iterate(runtime, definition, state, limit, options, emit, None, None)
    # Held for the whole loop: a second process continuing the same checkpoint would run
    # every iteration from the last saved one twice.
    lease = await runtime.lease(checkpoint, loop_options.wait)
    try:
        saved = LoopCheckpoint(runtime.checkpoints, definition.id, checkpoint, lease)
        return await _iterate(
            runtime, definition, state, limit, options, emit, saved, loop_options.principal
        )
    finally:
        await lease.release()


async def _iterate(
    runtime: LoopServices,
    definition: StateLoop,
    state: Any,
    limit: int,
    options: dict[str, Any],
    emit: Callable[[LoopEvent], Awaitable[None]],
    saved: LoopCheckpoint | None,
    principal: str | None,
) -> Any:
    checkpoint = None if saved is None else saved.id
    first = 0
    if saved is not None:
        resumed = await saved.load(state, principal)
        if resumed is not None:
            iteration, state, finished = resumed
            if finished:
                return state
            first = iteration + 1
    for iteration in range(first, limit):
        selected = definition.graph
        plan = selected if isinstance(selected, Graph) else selected(state)
        if not isinstance(plan, Graph):
            raise InvalidInputError(f"loop {definition.id!r}: the graph selector returned no graph")
        # A checkpointed loop resumes at this iteration in any process: its tasks keep the
        # same idempotency keys there.
        scoped = (
            options
            if checkpoint is None
            else {**options, "key_scope": f"loop:{checkpoint}:{iteration}"}
        )
        result = await _run_graph(
            runtime, definition.id, iteration, plan, definition.bind(state), scoped, emit
        )
        state = definition.update(state, result)
        finished = bool(definition.done(state, result))
        if saved is not None:
            await saved.save(iteration, state, finished)
        if finished:
            return state
    raise _limit_reached(definition.id, limit)


async def _run_graph(
    runtime: LoopServices,
    loop_id: str,
    iteration: int,
    plan: Graph,
    graph_input: Any,
    options: dict[str, Any],
    emit: Callable[[LoopEvent], Awaitable[None]],
) -> RunResult:
    nodes = tuple(task.id for task in plan.tasks)
    await emit(LoopEvent(loop_id, iteration, plan.name, nodes, "started"))
    try:
        result = await runtime.run(plan, graph_input, **options)
    except Exception:
        await emit(LoopEvent(loop_id, iteration, plan.name, nodes, "failed"))
        raise
    await emit(LoopEvent(loop_id, iteration, plan.name, nodes, "completed"))
    return result


def _limit_reached(loop_id: str, limit: int) -> DittoError:
    return DittoError(
        f"loop {loop_id!r} reached its iteration limit ({limit}) without finishing",
        code=ErrorCode.LOOP_LIMIT_REACHED,
        details={"loop_id": loop_id, "max_iterations": limit},
    )
