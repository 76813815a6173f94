"""Runs: the checkpoint store's runs (``ditto ui --checkpoints``), each drawn as its plan with
every task's status, the interrupts it waits on, and a form that answers them.

A run's plan is known when ``ditto ui --graph MODULE:ATTR`` loaded a graph whose digest the
checkpoint names; answering resumes the run with ``runtime.resume`` in this process, on the
page's runtime (with the ``--worker`` workers it needs).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

import msgspec
from starlette.routing import Route

from ditto.app.ui.plan_svg import layout
from ditto.app.ui.render import backend, page, redirect, refuse_when_viewing
from ditto.contracts.result import NodeResult
from ditto.errors import DittoError, ErrorCode, InvalidInputError

if TYPE_CHECKING:
    from starlette.requests import Request
    from starlette.responses import Response

    from ditto.app.ui.backend import Backend
    from ditto.graph import Graph
    from ditto.graph.plan import Plan
    from ditto.runtime.checkpoints.port import CheckpointStore

__all__ = ("routes",)

_LISTED = 50
_decode = msgspec.json.Decoder(NodeResult[Any])


def _when(seconds: float) -> datetime:
    return datetime.fromtimestamp(seconds, UTC)


def _store(found: Backend) -> CheckpointStore | None:
    return found.checkpoints


def _graph_of(found: Backend, digest: Any) -> tuple[Graph, Plan] | None:
    """The loaded graph whose plan the checkpoint names (by digest), and that plan."""
    from ditto.runtime.checkpoints.graphs import plan_digest

    for graph in found.options.graphs:
        plan = graph.compile()
        if plan_digest(plan) == digest:
            return graph, plan
    return None


async def runs(request: Request) -> Response:
    store = _store(backend(request))
    infos = [] if store is None else await store.list(limit=_LISTED)
    rows = [{"info": info, "at": _when(info.updated_at)} for info in infos]
    return page(request, "runs.html", configured=store is not None, rows=rows)


async def _read(found: Backend, checkpoint_id: str) -> tuple[Any, dict[str, Any], dict[str, Any]]:
    """The stored checkpoint, its envelope's state and its finished tasks' results."""
    from ditto.runtime.checkpoints.envelope import open_envelope, open_record

    store = _store(found)
    stored = None if store is None else await store.load(checkpoint_id)
    if stored is None:
        raise DittoError(
            f"no checkpoint has id {checkpoint_id!r}", code=ErrorCode.CHECKPOINT_NOT_FOUND
        )
    state = open_envelope(stored.envelope, checkpoint_id).state
    results = {
        key: _decode.decode(open_record(checkpoint_id, key, value)) for key, value in stored.records
    }
    return stored, state, results


async def run(request: Request) -> Response:
    from ditto.graph import pictures

    found = backend(request)
    checkpoint_id = request.path_params["id"]
    stored, state, results = await _read(found, checkpoint_id)
    interrupts = list(state.get("interrupts", ()))
    waiting = {interrupt.get("task") for interrupt in interrupts}
    known = _graph_of(found, state.get("plan"))
    plan = None if known is None else known[1]
    statuses = {task_id: pictures.run_status(result) for task_id, result in results.items()}
    statuses.update({str(task): "interrupted" for task in waiting if task not in results})
    drawing = mermaid = None
    tasks: list[dict[str, Any]] = []
    if plan is not None:
        drawing = layout(plan.tasks, statuses)
        mermaid = pictures.mermaid(plan.graph_id, plan.tasks, results)
        order = [task.id for task in plan.tasks]
    else:
        order = sorted(set(results) | {str(task) for task in waiting})
    for task_id in order:
        result = results.get(task_id)
        tasks.append(
            {
                "id": task_id,
                "status": statuses.get(task_id, "not_run"),
                "ms": None if result is None else result.duration_ms,
                "error": None if result is None or result.error is None else result.error,
            }
        )
    shown = [
        {"task": interrupt.get("task"), "payload": json.dumps(interrupt.get("payload"), indent=2)}
        for interrupt in interrupts
    ]
    return page(
        request,
        "run.html",
        checkpoint_id=checkpoint_id,
        scope=stored.scope,
        at=_when(stored.updated_at),
        run_status=state.get("status", "saved"),
        principal_of_run=state.get("principal"),
        plan=plan,
        drawing=drawing,
        mermaid=mermaid,
        tasks=tasks,
        interrupts=shown,
    )


async def answer(request: Request) -> Response:
    refuse_when_viewing(request)
    found = backend(request)
    checkpoint_id = request.path_params["id"]
    _, state, _ = await _read(found, checkpoint_id)
    known = _graph_of(found, state.get("plan"))
    if known is None:
        raise InvalidInputError(
            "this run's plan is not loaded: start ditto ui with --graph MODULE:ATTR to answer it"
        )
    form = await request.form()
    text = str(form.get("answer", ""))
    value: Any = text
    if form.get("format") == "json":
        try:
            value = json.loads(text)
        except json.JSONDecodeError as exc:
            raise InvalidInputError(f"the answer is not valid JSON: {exc}") from None
    # The run acts for the principal its checkpoint names, not the page's.
    result = await found.runtime.resume(checkpoint_id, value, plan=known[0])
    done = f"answered: the run is {result.status}"
    return redirect(f"/runs/{quote(checkpoint_id)}?done={quote(done)}")


routes = [
    Route("/runs", runs, methods=["GET"]),
    Route("/runs/{id}", run, methods=["GET"]),
    Route("/runs/{id}/answer", answer, methods=["POST"]),
]
