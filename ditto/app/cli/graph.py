"""``ditto graph show``: draw a graph defined in Python, or run it and draw the run.

``MODULE:ATTR`` names a :class:`~ditto.graph.Graph`, or a function taking no arguments that
returns one, in a module importable from the current directory (as ``uvicorn app:app`` does).
The picture goes to standard output: Mermaid, Graphviz DOT, or a text summary of the plan's
shape (levels, widest level, critical path).

Exit codes: 0 ok; 1 ``--run``: the run did not succeed on every task (the picture is printed);
2 usage or configuration error (a bad ``MODULE:ATTR``, ``--input`` that is not JSON, a node type
no configured worker runs); 3 the store failed or cannot be reached.
"""

from __future__ import annotations

import importlib
import json
import os
import sys
import traceback
from collections.abc import Mapping
from enum import StrEnum
from typing import TYPE_CHECKING, Annotated, Any, NoReturn

import typer
from rich.markup import escape

from ditto.app.cli.memory_common import ConfigOption
from ditto.app.cli.output import EXIT_STORE, EXIT_USAGE, errors, fail_usage, settings_or_exit
from ditto.errors import ConfigError, DittoError, ErrorCode
from ditto.graph import Graph, pictures

if TYPE_CHECKING:
    from ditto.app.config import Settings
    from ditto.contracts.result import NodeResult
    from ditto.runtime.results import RunResult
    from ditto.runtime.worker import WorkerDefinition

__all__ = ("EXIT_RUN_FAILED", "PictureFormat", "graph_app", "load_graph")

graph_app = typer.Typer(help="Draw graphs and their runs.", no_args_is_help=True)

EXIT_RUN_FAILED = 1
"""``--run``: a task did not succeed, or a binder stopped the run."""


class PictureFormat(StrEnum):
    """What ``ditto graph show`` prints."""

    MERMAID = "mermaid"
    DOT = "dot"
    TEXT = "text"


# Errors a user fixes in the graph or the command line rather than in the store.
_USAGE_CODES = frozenset(
    (
        ErrorCode.UNKNOWN_NODE,
        ErrorCode.UNKNOWN_WORKER,
        ErrorCode.INVALID_INPUT,
        ErrorCode.INVALID_GRAPH,
        ErrorCode.INVALID_CONFIG,
    )
)


@graph_app.command("show")
def show(
    target: Annotated[
        str,
        typer.Argument(
            metavar="MODULE:ATTR",
            help="A Graph, or a function returning one, e.g. myapp.graphs:recall.",
        ),
    ],
    picture: Annotated[
        PictureFormat, typer.Option("--format", "-f", help="mermaid, dot or text.")
    ] = PictureFormat.MERMAID,
    run: Annotated[
        bool,
        typer.Option(
            "--run", help="Run the graph on the configured runtime and draw the run's statuses."
        ),
    ] = False,
    run_input: Annotated[
        str | None,
        typer.Option("--input", help="With --run: the run input as JSON (default null)."),
    ] = None,
    workers: Annotated[
        list[str] | None,
        typer.Option(
            "--worker",
            metavar="MODULE:ATTR",
            help="With --run: also register this worker (repeatable), e.g. myapp.workers:weather.",
        ),
    ] = None,
    config: ConfigOption = None,
) -> None:
    """Print a picture of a graph: Mermaid (default), Graphviz DOT or a text summary of its
    shape. With --run, run it first and show each task's status and duration."""
    if run_input is not None and not run:
        fail_usage("--input is the run's input: pass --run too")
    if workers and not run:
        fail_usage("--worker registers a worker for the run: pass --run too")
    value: Any = None
    if run_input is not None:
        try:
            value = json.loads(run_input)
        except json.JSONDecodeError as exc:
            fail_usage(f"--input is not valid JSON: {exc}")
    plan = load_graph(target)
    if not run:
        typer.echo(_picture(plan, picture, None), nl=False)
        return

    settings = settings_or_exit(config)
    result, stopped = _run(plan, value, settings, _workers(workers or []))
    typer.echo(_picture(plan, picture, result), nl=False)
    if stopped is not None:
        _fail(stopped, EXIT_RUN_FAILED)
    if not result.ok:
        missing = result.task_count - len(result)
        errors.print(
            f"the run did not succeed: {len(result.failed)} failed, {missing} did not run",
            highlight=False,
        )
        raise typer.Exit(EXIT_RUN_FAILED)


def load_graph(target: str) -> Graph:
    """The graph ``MODULE:ATTR`` names, importing ``MODULE`` with the current directory on
    ``sys.path``; ``ATTR`` may be dotted, and may be a function of no arguments returning the
    graph. Any problem is printed on one line and exits 2."""
    module_name, colon, attribute = target.partition(":")
    if not colon or not module_name or not attribute:
        fail_usage(f"{target!r} is not MODULE:ATTR (e.g. myapp.graphs:recall)")
    cwd = os.getcwd()
    if cwd not in sys.path:
        sys.path.insert(0, cwd)
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name is not None and (
            module_name == exc.name or module_name.startswith(exc.name + ".")
        ):
            fail_usage(f"no module named {module_name!r} (looked in {cwd} and sys.path)")
        _fail_raised(f"importing {module_name!r}", exc)
    except Exception as exc:
        _fail_raised(f"importing {module_name!r}", exc)

    found: object = module
    for name in attribute.split("."):
        try:
            found = getattr(found, name)
        except AttributeError:
            fail_usage(f"{module_name!r} has no attribute {attribute!r}")
    if not isinstance(found, Graph) and callable(found):
        try:
            found = found()
        except Exception as exc:
            _fail_raised(f"calling {target}()", exc)
    if not isinstance(found, Graph):
        fail_usage(
            f"{target} is a {type(found).__name__}, not a Graph "
            "(or a function of no arguments returning one)"
        )
    return found


def _workers(targets: list[str]) -> list[WorkerDefinition]:
    """The ``--worker`` definitions; a bad one is printed on one line and exits 2."""
    from ditto.app.serve.worker import load_worker

    try:
        return [load_worker(target) for target in targets]
    except ConfigError as exc:
        fail_usage(exc.message.replace("--worker ", "--worker: ", 1))


def _run(
    plan: Graph, value: Any, settings: Settings, workers: list[WorkerDefinition]
) -> tuple[RunResult, DittoError | None]:
    """Run ``plan`` on a runtime with ``workers`` and, when the plan uses them, the configured
    MEMORY and CONTEXT workers (only then is a store opened): the result, and the error that
    stopped the run early (a binder raised), if one did."""
    import anyio

    from ditto.app.bootstrap import open_runtime
    from ditto.runtime.results import GraphRunError

    node_types = plan.compile().node_types
    memory = any(node_type.startswith("MEMORY.") for node_type in node_types)
    context = any(node_type.startswith("CONTEXT.") for node_type in node_types)

    async def main() -> tuple[RunResult, DittoError | None]:
        async with open_runtime(
            settings, workers=workers, memory=memory, context=context
        ) as runtime:
            try:
                return await runtime.run(plan, value), None
            except GraphRunError as exc:
                return exc.partial, exc

    try:
        return anyio.run(main)
    except DittoError as exc:
        _fail(exc, EXIT_USAGE if exc.code in _USAGE_CODES else EXIT_STORE)


def _picture(
    plan: Graph, picture: PictureFormat, results: Mapping[str, NodeResult[Any]] | None
) -> str:
    if picture is PictureFormat.MERMAID:
        return pictures.mermaid(plan.name, plan.tasks, results)
    if picture is PictureFormat.DOT:
        return pictures.dot(plan.name, plan.tasks, results)
    if results is None:
        return plan.describe().render() + "\n"
    shape = plan.describe(pictures.durations(results))
    lines = [shape.render(), "tasks:"]
    for task in plan.tasks:
        result = results.get(task.id)
        status = pictures.run_status(result)
        took = "" if result is None else f" {result.duration_ms:.1f} ms"
        code = "" if result is None or result.error is None else f" {result.error.code}"
        lines.append(f"  {task.id}: {status}{code}{took}")
    return "\n".join(lines) + "\n"


def _fail(exc: DittoError, exit_code: int) -> NoReturn:
    errors.print(f"[red]{escape(exc.code)}:[/red] {escape(exc.message)}", highlight=False)
    raise typer.Exit(exit_code)


def _fail_raised(doing: str, exc: BaseException) -> NoReturn:
    """One line naming the exception and where it was raised, instead of a traceback."""
    frames = traceback.extract_tb(exc.__traceback__)
    where = f" ({frames[-1].filename}, line {frames[-1].lineno})" if frames else ""
    fail_usage(f"{doing} raised {type(exc).__name__}: {exc}{where}")
