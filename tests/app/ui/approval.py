"""A graph that stops for a person: ``prepare`` runs, ``ask`` interrupts with a question,
``apply`` runs with the answer. The Runs page tests start ``ditto ui`` with
``--graph tests.app.ui.approval:approval_graph --worker tests.app.ui.approval:approval_worker``."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ditto import (
    Graph,
    NodeContext,
    NodeResult,
    WorkerDefinition,
    create_ditto,
    define_worker,
    graph,
)
from ditto.adapters.sqlite import SqliteCheckpointStore

__all__ = ("QUESTION", "approval_graph", "approval_worker", "interrupted_run")

QUESTION = {"question": "Publish the <b>launch</b> note?", "options": ["yes", "no"]}


async def _step(request: dict[str, Any], ctx: NodeContext) -> dict[str, Any]:
    return {"done": request["name"], "answer": request.get("answer")}


async def _ask(request: dict[str, Any], ctx: NodeContext) -> dict[str, Any]:
    return {"answer": ctx.interrupt(request)}


def approval_worker() -> WorkerDefinition:
    return define_worker("approval", {"APPROVAL.STEP": _step, "APPROVAL.ASK": _ask})


def _answer(deps: Mapping[str, NodeResult[Any]]) -> Any:
    return deps["ask"].unwrap()["answer"]


def approval_graph() -> Graph:
    return (
        graph("approve-note")
        .node("prepare", "APPROVAL.STEP", [], lambda _, deps: {"name": "prepare"})
        .node("ask", "APPROVAL.ASK", ["prepare"], lambda _, deps: QUESTION)
        .node(
            "apply", "APPROVAL.STEP", ["ask"], lambda _, d: {"name": "apply", "answer": _answer(d)}
        )
    )


async def interrupted_run(path: Path, checkpoint: str) -> str:
    """Run the graph until it asks, checkpointed as ``checkpoint`` in the SQLite file ``path``."""
    store = SqliteCheckpointStore(path)
    try:
        async with create_ditto(workers=[approval_worker()], checkpoints=store) as runtime:
            result = await runtime.run(approval_graph(), {"note": "launch"}, checkpoint=checkpoint)
            assert result.status == "interrupted"
            return checkpoint
    finally:
        await store.aclose()
