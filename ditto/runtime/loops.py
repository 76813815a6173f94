"""Loops: graphs run again and again until a condition holds (plan -> act -> observe).

Two forms, both run by :meth:`Ditto.loop` and built with :func:`loop`:

* **State machine** — ``loop(graph=..., bind=..., update=..., done=...)``. Each iteration picks
  the graph (a :class:`Graph`, or a function of the state returning one), binds its input from
  the state, runs it, computes the new state with ``update(state, result)`` and stops when
  ``done(new_state, result)`` is true. The result is the final state. It can checkpoint
  ``{iteration, state}`` after each iteration and resume from there in a new process.
* **Plan** — ``loop(plan=async def plan(step, input): ...)``. The function awaits
  ``await step(graph, input)`` as often as it likes and returns the loop's result: the Python
  shape of the reference's generator plans. A step whose binder raises raises
  :class:`GraphRunError` at the ``await``, so a plan can catch it and branch. A plan is code, not
  data, so it cannot be checkpointed.

Rules (the reference's):

* A loop runs at least one graph. ``max_iterations`` counts graph executions (failed ones too);
  it comes from the definition, then ``runtime.loop_max_iterations``, then 32, and must be a
  positive integer — checked before any callback runs. Reaching it without ``done`` raises
  ``LOOP_LIMIT_REACHED``; a plan cannot swallow it.
* A failing graph or callback ends the loop with its exception: no retry, no advance.
* Every graph run has a fresh run id; ``concurrency``, ``timeout`` and ``principal`` cover every
  graph of the loop. Past ``timeout`` the loop raises ``LOOP_TIMEOUT`` even if a plan swallowed
  the cancellation.
* ``on_event`` sees a :class:`LoopEvent` as each graph starts and ends; an observer that raises
  ends the loop with that exception.
* An interrupted graph (``Interrupt``) is a result like any other inside a loop: ``update`` and
  ``done`` see ``result.status == "interrupted"`` and decide.
"""

from __future__ import annotations

import asyncio
import inspect
import math
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from ditto.errors import DittoError, ErrorCode, InvalidInputError
from ditto.graph.builder import Graph
from ditto.runtime.checkpoints.loops import LoopCheckpoint
from ditto.runtime.results import RunResult

if TYPE_CHECKING:
    from ditto.runtime.runtime import Ditto

__all__ = (
    "LoopDefinition",
    "LoopEvent",
    "LoopObserver",
    "LoopOptions",
    "LoopStep",
    "PlanLoop",
    "StateLoop",
    "check_loop",
    "loop",
    "run_loop",
)

DEFAULT_MAX_ITERATIONS = 32


@dataclass(frozen=True, slots=True)
class LoopEvent:
    """One graph of a loop starting or ending."""

    loop_id: str
    iteration: int
    """0-based: the how-manyth graph execution of the loop."""
    graph_id: str
    nodes: tuple[str, ...]
    """The graph's task ids."""
    status: Literal["started", "completed", "failed"]
    """``failed``: the run raised (a binder); a run with failed nodes is ``completed``."""


LoopObserver = Callable[[LoopEvent], Awaitable[None] | None]


@dataclass(frozen=True, slots=True)
class StateLoop:
    """A state-machine loop; build it with :func:`loop`."""

    id: str
    graph: Graph | Callable[[Any], Graph]
    bind: Callable[[Any], Any]
    update: Callable[[Any, RunResult], Any]
    done: Callable[[Any, RunResult], bool]
    max_iterations: int | None


@dataclass(frozen=True, slots=True)
class PlanLoop:
    """A plan loop; build it with :func:`loop`."""

    id: str
    plan: Callable[[LoopStep, Any], Awaitable[Any]]
    max_iterations: int | None


LoopDefinition = StateLoop | PlanLoop


def loop(
    *,
    graph: Graph | Callable[[Any], Graph] | None = None,
    bind: Callable[[Any], Any] | None = None,
    update: Callable[[Any, RunResult], Any] | None = None,
    done: Callable[[Any, RunResult], bool] | None = None,
    plan: Callable[[LoopStep, Any], Awaitable[Any]] | None = None,
    max_iterations: int | None = None,
    id: str = "loop",
) -> LoopDefinition:
    """Define a loop: either ``graph`` + ``update`` + ``done`` (+ ``bind``, default: the state
    is the graph's input), or ``plan``.

    Example::

        count_to_three = loop(
            graph=plan,
            bind=lambda state: {"n": state},
            update=lambda state, result: state + 1,
            done=lambda state, result: state >= 3,
        )
        final = await runtime.loop(count_to_three, 0)

    Raises:
        InvalidInputError: Both forms or neither, a missing or non-callable part, or an invalid
            ``max_iterations``.
    """
    if not isinstance(id, str) or not id.strip():
        raise InvalidInputError("a loop id must be a non-empty string")
    _checked_limit(max_iterations)
    if plan is not None:
        if any(part is not None for part in (graph, bind, update, done)):
            raise InvalidInputError("a loop takes either plan= or graph=/update=/done=, not both")
        if not callable(plan):
            raise InvalidInputError("plan must be an async function (step, input) -> result")
        return PlanLoop(id, plan, max_iterations)
    if graph is None or update is None or done is None:
        raise InvalidInputError("a state-machine loop needs graph=, update= and done=")
    for name, part in (("graph", graph), ("update", update), ("done", done), ("bind", bind)):
        if part is not None and not (callable(part) or isinstance(part, Graph)):
            raise InvalidInputError(f"{name} must be callable")
    return StateLoop(id, graph, bind or _same, update, done, max_iterations)


def _same(state: Any) -> Any:
    return state


def _checked_limit(value: object) -> int | None:
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
        raise InvalidInputError("max_iterations must be a positive integer")
    return value


class LoopStep:
    """What a plan loop awaits: ``await step(graph, input)`` runs one graph of the loop."""

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
        runtime: Ditto,
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


def check_loop(
    runtime: Ditto,
    definition: object,
    *,
    concurrency: int | None,
    timeout: float | None,
    principal: str | None,
    checkpoint: str | None,
) -> LoopOptions:
    """Check everything about a loop before any callback runs.

    Raises:
        InvalidInputError: Not a loop definition, an invalid limit, concurrency or timeout, or a
            checkpoint for a plan loop.
    """
    if not isinstance(definition, StateLoop | PlanLoop):
        raise InvalidInputError("loop() takes a definition built with ditto.loop()")
    limit = (
        _checked_limit(definition.max_iterations)
        or _checked_limit(runtime.limits.loop_max_iterations)
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
    return LoopOptions(limit, concurrency, timeout, principal, checkpoint)


async def run_loop(
    runtime: Ditto,
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
                step = LoopStep(
                    runtime, definition.id, options.limit, run_options, emit, scope.expired
                )
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
                    options.checkpoint,
                    options.principal,
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
    runtime: Ditto,
    definition: StateLoop,
    state: Any,
    limit: int,
    options: dict[str, Any],
    emit: Callable[[LoopEvent], Awaitable[None]],
    checkpoint: str | None,
    principal: str | None,
) -> Any:
    saved = (
        None
        if checkpoint is None
        else LoopCheckpoint(runtime.checkpoints, definition.id, checkpoint)
    )
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
        result = await _run_graph(
            runtime, definition.id, iteration, plan, definition.bind(state), options, emit
        )
        state = definition.update(state, result)
        finished = bool(definition.done(state, result))
        if saved is not None:
            await saved.save(iteration, state, finished)
        if finished:
            return state
    raise _limit_reached(definition.id, limit)


async def _run_graph(
    runtime: Ditto,
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
