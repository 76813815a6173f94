"""``ditto``: the command line entry point.

Exit codes: 0 success; 1 nothing found (``memory get``/``search``) or the demo misbehaved;
2 usage or configuration error.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import msgspec
import typer
from rich.markup import escape
from rich.table import Table

import ditto
from ditto.app.cli.checkpoints import checkpoints_app
from ditto.app.cli.graph import graph_app
from ditto.app.cli.logs import LogLevel, configure_logging, level_from
from ditto.app.cli.mcp import mcp_app
from ditto.app.cli.memory import memory_app
from ditto.app.cli.models import models_app
from ditto.app.cli.output import JsonOption, config_error, console, errors
from ditto.app.cli.ui import ui
from ditto.app.cli.worker import worker_app
from ditto.app.config import load_config, redact_url, resolve_config_path
from ditto.app.config.settings import Settings
from ditto.errors import ConfigError

__all__ = ("app", "main")

app = typer.Typer(
    name="ditto",
    help="Ditto: a DAG-based worker runtime for agent memory and context.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
config_app = typer.Typer(help="Inspect configuration.", no_args_is_help=True)
app.add_typer(config_app, name="config")
app.add_typer(memory_app, name="memory")
app.add_typer(mcp_app, name="mcp")
app.add_typer(graph_app, name="graph")
app.add_typer(models_app, name="models")
app.add_typer(worker_app, name="worker")
app.add_typer(checkpoints_app, name="checkpoints")
app.command("ui")(ui)


def _version(value: bool) -> None:
    if value:
        console.print(f"ditto {ditto.__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool,
        typer.Option("--version", callback=_version, is_eager=True, help="Show the version."),
    ] = False,
    log_level: Annotated[
        LogLevel | None,
        typer.Option(
            "--log-level",
            envvar="DITTO_LOG_LEVEL",
            case_sensitive=False,
            help="Log at this level and above, to stderr (default: warning).",
        ),
    ] = None,
    verbose: Annotated[
        int,
        typer.Option("--verbose", "-v", count=True, help="Log more: -v info, -vv debug."),
    ] = 0,
) -> None:
    """Ditto: a DAG-based worker runtime for agent memory and context."""
    configure_logging(level_from(log_level, verbose))


@config_app.command("check")
def config_check(
    path: Annotated[
        Path | None,
        typer.Argument(help="YAML file; default $DITTO_CONFIG, else ./ditto.yaml if present."),
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """Validate the configuration and print the effective settings (secrets redacted)."""
    try:
        settings = load_config(path)
    except ConfigError as exc:
        config_error(exc)
    source = resolve_config_path(path, _environ())
    effective = _effective(settings)
    if as_json:
        typer.echo(json.dumps({"source": str(source) if source else None, "settings": effective}))
        return
    table = Table(title=f"Effective settings ({source or 'library defaults'})")
    table.add_column("key")
    table.add_column("value")
    for key, value in _flatten(effective):
        table.add_row(escape(key), "null" if value is None else escape(str(value)))
    console.print(table)


@app.command()
def demo(
    topic: Annotated[str, typer.Option(help="What the demo researches.")] = "agent memory",
    config: Annotated[
        Path | None,
        typer.Option(help="ditto.yaml to use (default: $DITTO_CONFIG or ./ditto.yaml)."),
    ] = None,
) -> None:
    """Run the demo graph: fan-out, a dependency, a failed node, a timeout, durable memory."""
    import anyio

    from ditto.app.demo import run_demo

    try:
        settings = load_config(config)
    except ConfigError as exc:
        config_error(exc)
    result = anyio.run(run_demo, topic, settings)
    table = Table(title=f"graph {result.graph_id!r}  run {result.run_id}")
    for column, width in (("task", 9), ("node", 18), ("status", 7), ("ms", 5)):
        table.add_column(column, no_wrap=True, min_width=width)
    # Rich only shrinks wrapping columns, so cut the detail to what the terminal has left.
    detail_width = max(16, min(60, console.width - 58))
    table.add_column("output / error", no_wrap=True)
    colours = {"success": "green", "failed": "red", "timeout": "yellow", "cancelled": "magenta"}
    for task_id, node in result.items():
        detail = (
            _describe(node.output)
            if node.error is None
            else (f"{node.error.code}: {node.error.message}")
        )
        table.add_row(
            task_id,
            node.node,
            f"[{colours[node.status]}]{node.status}[/]",
            f"{node.duration_ms:.1f}",
            escape(detail if len(detail) <= detail_width else detail[: detail_width - 1] + "…"),
        )
    console.print(table)
    if not result.ok and set(result.failed) - {"archive", "web"}:
        errors.print(f"[red]unexpected failures:[/red] {sorted(result.failed)}")
        raise typer.Exit(1)
    console.print(f"[bold]summary:[/bold] {escape(result['summarize'].unwrap().text)}")
    console.print(
        f"[bold]memory:[/bold] {_memory_location(settings)} — recalled "
        f"{len(result['recall'].unwrap().hits)}, listing (most used in earlier runs first):"
    )
    for item in result["listing"].unwrap().items:
        console.print(f"  {item.key:<28} used {item.usage_count}x  version {item.version}")
    selection = result["prompt"].unwrap()
    console.print(
        f"[bold]context:[/bold] {len(result['working_set'].unwrap().items)} items in the working "
        f"set; selected for the prompt: {', '.join(selection.selected_item_ids)}"
    )


def _describe(output: object) -> str:
    """A one-line view of a node output: records and hits by key, anything else as JSON."""
    items = getattr(output, "items", None)
    hits = getattr(output, "hits", None)
    selected = getattr(output, "selected_item_ids", None)
    if isinstance(selected, list):
        return f"selected {len(selected)}: " + ", ".join(selected)
    if isinstance(items, list):
        return f"{len(items)} items: " + ", ".join(
            str(getattr(i, "key", None) or i.id[:15]) for i in items
        )
    if isinstance(hits, list):
        return f"{len(hits)} hits: " + ", ".join(
            f"{hit.memory.key or hit.memory.id[:8]} ({hit.score:.3g})" for hit in hits
        )
    return msgspec.json.encode(output).decode()


def _memory_location(settings: Settings) -> str:
    memory = settings.workers.memory
    if memory.backend == "sqlite":
        return str(memory.sqlite_file.resolve())
    if memory.backend == "postgres":
        return f"{redact_url(memory.postgres_url)} (schema {memory.postgres_schema})"
    if memory.backend == "markdown":
        return str(memory.markdown_folder.resolve())
    return f"{memory.backend} store"


def _environ() -> dict[str, str]:
    import os

    return dict(os.environ)


def _effective(settings: Settings) -> dict[str, Any]:
    tree = settings.model_dump(mode="json")
    tree["workers"]["memory"]["postgres_url"] = redact_url(settings.workers.memory.postgres_url)
    tree["workers"]["context"]["redis_url"] = redact_url(settings.workers.context.redis_url)
    return tree


def _flatten(tree: dict[str, Any], prefix: str = "") -> list[tuple[str, Any]]:
    rows: list[tuple[str, Any]] = []
    for key, value in tree.items():
        dotted = f"{prefix}{key}"
        if isinstance(value, dict):
            rows.extend(_flatten(value, dotted + "."))
        else:
            rows.append((dotted, value))
    return rows


def main() -> None:
    """Console-script entry point."""
    app()
