"""``ditto worker serve``, ``ditto worker list`` and ``ditto worker dead-letters``: remote
workers over Redis Streams."""

from __future__ import annotations

import json
import time
from typing import Annotated

import anyio
import typer
from rich.table import Table

from ditto.app.cli.memory_common import ConfigOption
from ditto.app.cli.output import (
    EXIT_STORE,
    EXIT_USAGE,
    JsonOption,
    config_error,
    console,
    errors,
    settings_or_exit,
)
from ditto.app.cli.worker_dead_letters import dead_letters_app
from ditto.errors import ConfigError, DittoError, ErrorCode

worker_app = typer.Typer(
    help="Serve node types to runtimes on other hosts (Redis Streams).", no_args_is_help=True
)
worker_app.add_typer(dead_letters_app, name="dead-letters")


@worker_app.command("serve")
def serve(
    config: ConfigOption = None,
    worker: Annotated[
        list[str] | None,
        typer.Option(
            "--worker",
            help="memory, context, retrieval or module:attr (a worker definition); repeat for "
            "several. Default: memory and context.",
        ),
    ] = None,
    concurrency: Annotated[
        int | None,
        typer.Option(
            min=1,
            max=100_000,
            help="Calls this process runs at once (default: what its workers declare).",
        ),
    ] = None,
    worker_id: Annotated[
        str | None, typer.Option("--id", help="This worker's name (default HOST-PID).")
    ] = None,
) -> None:
    """Serve the node types of the chosen workers to every runtime whose ditto.yaml lists them
    under runtime.remote.node_types. Needs DITTO_RUNTIME_REMOTE_REDIS_URL and the shared secret
    DITTO_REMOTE_SECRET. SIGTERM or Ctrl-C stops reading, finishes the calls in flight and exits
    0."""
    settings = settings_or_exit(config)
    from ditto.app.serve.worker import serve_worker

    def started(name: str, node_types: list[str], taken: int) -> None:
        errors.print(
            f"worker {name} serving {', '.join(node_types)} (concurrency {taken})",
            markup=False,
            highlight=False,
        )

    try:
        anyio.run(
            lambda: serve_worker(
                settings,
                kinds=worker or [],
                concurrency=concurrency,
                worker_id=worker_id,
                started=started,
            )
        )
    except ConfigError as exc:
        config_error(exc)
    except DittoError as exc:
        errors.print(str(exc), markup=False, highlight=False)
        unreachable = exc.code == ErrorCode.TRANSPORT_UNAVAILABLE
        raise typer.Exit(EXIT_STORE if unreachable else EXIT_USAGE) from None
    errors.print("worker stopped: every call in flight was answered", highlight=False)


@worker_app.command("list")
def list_(
    config: ConfigOption = None,
    as_json: JsonOption = False,
) -> None:
    """The live workers and what is pending per node type."""
    settings = settings_or_exit(config)
    from ditto.app.serve.worker import list_workers

    try:
        view = anyio.run(list_workers, settings)
    except ConfigError as exc:
        config_error(exc)
    except DittoError as exc:
        errors.print(str(exc), markup=False, highlight=False)
        raise typer.Exit(EXIT_STORE) from None
    if as_json:
        typer.echo(json.dumps(view))
        return
    now = time.time()
    table = Table(title=f"{len(view['workers'])} live workers")
    for column in ("id", "host", "node types", "in flight", "free", "handled", "heartbeat"):
        table.add_column(column)
    for info in view["workers"]:
        table.add_row(
            info["id"],
            f"{info['host']} ({info['pid']})",
            ", ".join(info["node_types"]),
            str(info["in_flight"]),
            str(info["free"]),
            str(info["handled"]),
            f"{max(0.0, now - info['heartbeat_at']):.1f} s ago",
        )
    console.print(table)
    if view["pending"]:
        pending = Table(title="pending calls")
        for column in ("node type", "queued", "running"):
            pending.add_column(column)
        for node_type, counts in view["pending"].items():
            pending.add_row(node_type, str(counts["queued"]), str(counts["running"]))
        console.print(pending)
