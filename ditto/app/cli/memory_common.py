"""What the ``ditto memory`` commands share: options, running nodes or store calls on the
configured store, failing with the right exit code, and printing records."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn, TypeVar

import msgspec
import typer
from rich.markup import escape
from rich.progress import (
    BarColumn,
    DownloadColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    Task,
    TaskProgressColumn,
    TextColumn,
    TimeRemainingColumn,
)
from rich.text import Text

from ditto.app.cli.output import (
    EXIT_FORBIDDEN,
    EXIT_NOT_FOUND,
    EXIT_STORE,
    EXIT_USAGE,
    JsonOption,
    errors,
)
from ditto.app.config import Settings
from ditto.errors import DittoError

if TYPE_CHECKING:
    from workers.memory.ports import MemoryStore

__all__ = (
    "ConfigOption",
    "JsonOption",
    "NamespaceOption",
    "NodeCall",
    "PrincipalOption",
    "call_nodes",
    "fail",
    "on_nodes",
    "on_store",
    "preview",
    "print_json",
    "progress_bar",
    "records",
)

T = TypeVar("T")

PrincipalOption = Annotated[
    str | None, typer.Option("--principal", help="Act as this principal (access control).")
]
ConfigOption = Annotated[
    Path | None,
    typer.Option("--config", help="ditto.yaml (default: $DITTO_CONFIG or ./ditto.yaml)."),
]
NamespaceOption = Annotated[str | None, typer.Option(help="Only this namespace.")]
_PREVIEW = 60


_EXIT_CODES = {
    "NOT_FOUND": EXIT_NOT_FOUND,
    "INVALID_INPUT": EXIT_USAGE,
    "INVALID_CONFIG": EXIT_USAGE,
    "SEARCH_UNAVAILABLE": EXIT_USAGE,
    "EMBEDDER_UNAVAILABLE": EXIT_USAGE,
    "FORBIDDEN": EXIT_FORBIDDEN,
}


def fail(code: str, message: str) -> NoReturn:
    """Print a coded error (never a traceback) and exit: 1 for a missing record, 2 for refused
    input or a configuration that cannot do what was asked (no search, no embedder), 3 for a
    failing or unreachable store, 4 for access control's ``FORBIDDEN``."""
    errors.print(f"[red]{escape(code)}:[/red] {escape(message)}", highlight=False)
    exit_code = _EXIT_CODES.get(code, EXIT_STORE)
    raise typer.Exit(exit_code)


def call_nodes(
    settings: Settings, calls: list[tuple[str, dict[str, Any]]], principal: str | None = None
) -> list[Any]:
    """Run MEMORY calls on a runtime over the configured store, so the CLI sees exactly what an
    application sees; the outputs, in order."""

    async def work(call: NodeCall) -> list[Any]:
        return [await call(node, payload) for node, payload in calls]

    return on_nodes(settings, work, principal)


NodeCall = Callable[[str, dict[str, Any]], Awaitable[Any]]
"""Runs one MEMORY call and returns its output (a failed call exits the command, coded)."""


def on_nodes(
    settings: Settings, work: Callable[[NodeCall], Awaitable[T]], principal: str | None = None
) -> T:
    """:func:`call_nodes` for calls that depend on earlier answers: ``work`` makes them, one
    runtime over the configured store serving them all."""
    import anyio

    from ditto.app.bootstrap import open_runtime

    async def run() -> T:
        async with open_runtime(settings, existing=True) as runtime:

            async def call(node: str, payload: dict[str, Any]) -> Any:
                result = await runtime.invoke(node, payload, principal=principal)
                if not result.ok:
                    assert result.error is not None
                    fail(result.error.code, result.error.message)
                return result.output

            return await work(call)

    try:
        return anyio.run(run)
    except DittoError as exc:  # the store could not be opened
        fail(exc.code, exc.message)


def on_store(
    settings: Settings,
    work: Callable[[MemoryStore], Awaitable[T]],
    *,
    reading: bool = False,
    maintaining: bool = False,
) -> T:
    """Open the configured store, run ``work`` on it and close it; store errors exit coded.
    For the administrative commands (history, export, import, hygiene, audit) that act on the
    store itself rather than through a principal's nodes. ``reading``: the command only reads,
    so it never creates a store (a missing one is an error) and reads a read-only one.
    ``maintaining``: the command changes a store that must already exist (hygiene, reindex):
    a missing one is an error too, never a new empty store."""
    import anyio

    from ditto.app.bootstrap import build_memory_store

    async def run() -> T:
        async with build_memory_store(settings, existing=reading or maintaining) as store:
            return await work(store)

    try:
        return anyio.run(run)
    except DittoError as exc:
        fail(exc.code, exc.message)


def preview(item: Any) -> str:
    """One line of a record: its content's text, then its summary labelled as one, cut to fit
    a table column (the content is what was stored; a summary only describes it)."""
    from workers.memory.model.records import content_text

    text = " ".join(content_text(item.content).split())
    if item.summary:
        text += f" (summary: {' '.join(item.summary.split())})"
    return text if len(text) <= _PREVIEW else text[: _PREVIEW - 1] + "…"


def print_json(value: Any) -> None:
    typer.echo(msgspec.json.encode(value).decode())


class _RateColumn(ProgressColumn):
    """Units per second, e.g. ``212 records/s`` (blank until rich has an estimate)."""

    def __init__(self, unit: str) -> None:
        super().__init__()
        self.unit = unit

    def render(self, task: Task) -> Text:
        speed = task.finished_speed or task.speed
        shown = "" if speed is None else f"{speed:,.0f} {self.unit}/s"
        return Text(shown, style="progress.data.speed")


def progress_bar(rate: str | None = None, *, in_bytes: bool = False) -> Progress:
    """A progress bar on standard error (standard output may carry the data), with a count
    and the time left; it disappears when done.

    Args:
        rate: The unit counted (``"records"``): adds a column with how many go by per second.
        in_bytes: The count is bytes, shown in human units (``1.2/3.4 MB``).
    """
    columns: list[ProgressColumn] = [
        TextColumn("{task.description}"),
        BarColumn(),
        DownloadColumn() if in_bytes else MofNCompleteColumn(),
        TaskProgressColumn(),
    ]
    if rate is not None:
        columns.append(_RateColumn(rate))
    columns.append(TimeRemainingColumn())
    return Progress(*columns, console=errors, transient=True)


def records(count: int) -> str:
    """``"1 record"``, ``"3 records"``."""
    return f"{count} record" if count == 1 else f"{count} records"
