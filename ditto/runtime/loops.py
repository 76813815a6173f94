"""Loops: graphs run again and again until a condition holds (plan -> act -> observe).

This module defines them; :mod:`ditto.runtime.loop_runner` runs them.

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

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, Protocol

from ditto.errors import InvalidInputError
from ditto.graph.builder import Graph

if TYPE_CHECKING:
    from ditto.runtime.results import RunResult

__all__ = (
    "LoopDefinition",
    "LoopEvent",
    "LoopObserver",
    "LoopStep",
    "PlanLoop",
    "StateLoop",
    "checked_limit",
    "loop",
)


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


class LoopStep(Protocol):
    """What a plan loop awaits: ``await step(graph, input)`` runs one graph of the loop.

    Raises:
        DittoError: ``LOOP_LIMIT_REACHED`` when the loop already ran ``max_iterations``
            graphs; ``LOOP_TIMEOUT`` past the loop's timeout (a plan that caught the
            cancellation cannot run another graph).
        GraphRunError: A binder raised (catch it to branch).
    """

    iteration: int
    """Graph executions so far."""

    async def __call__(
        self,
        graph: Graph,
        graph_input: Any = None,
        *,
        concurrency: int | None = None,
        timeout: float | None = None,
    ) -> RunResult: ...


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
    checked_limit(max_iterations)
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


def checked_limit(value: object) -> int | None:
    """``value`` if it is ``None`` or a positive integer.

    Raises:
        InvalidInputError: It is neither.
    """
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
        raise InvalidInputError("max_iterations must be a positive integer")
    return value
