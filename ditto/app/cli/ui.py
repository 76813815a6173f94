"""``ditto ui``: serve the memory browser (:mod:`ditto.app.ui`) on the configured store.

Loopback by default. Every request needs the token: ``DITTO_UI_TOKEN``, or one generated at
start and printed once, inside the address to open. A non-loopback ``--host`` is refused unless
``DITTO_UI_TOKEN`` is set. Exit codes: 0 stopped (Ctrl-C); 2 usage or configuration error.
"""

from __future__ import annotations

import os
import re
import secrets
from typing import Annotated

import typer

from ditto.app.cli.memory_common import ConfigOption
from ditto.app.cli.output import config_error, errors, fail_usage, settings_or_exit
from ditto.app.loopback import is_loopback
from ditto.errors import ConfigError
from ditto.extras import install_hint

__all__ = ("TOKEN_VARIABLE", "ui")

TOKEN_VARIABLE = "DITTO_UI_TOKEN"
_TOKEN = re.compile(r"^[A-Za-z0-9._~-]{16,256}$")


def ui(
    config: ConfigOption = None,
    host: Annotated[str, typer.Option(help="The address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=1, max=65_535, help="The port.")] = 8765,
    read_only: Annotated[
        bool, typer.Option("--read-only", help="Hide and refuse every change.")
    ] = False,
    principal: Annotated[
        str | None,
        typer.Option(envvar="DITTO_UI_PRINCIPAL", help="Who the page acts as (access control)."),
    ] = None,
    checkpoints: Annotated[
        str | None,
        typer.Option(
            envvar="DITTO_CHECKPOINT_STORE",
            help="Runs page: a checkpoint store (SQLite file or redis:// URL).",
        ),
    ] = None,
    graph: Annotated[
        list[str] | None,
        typer.Option(
            "--graph",
            metavar="MODULE:ATTR",
            help="Runs page: a graph whose checkpointed runs to draw and resume (repeatable).",
        ),
    ] = None,
    worker: Annotated[
        list[str] | None,
        typer.Option(
            "--worker",
            metavar="MODULE:ATTR",
            help="A worker those graphs need (repeatable), e.g. myapp.workers:approve.",
        ),
    ] = None,
) -> None:
    """Browse and govern the memory store in a web page: search with explanations, records
    and their history, the review queue, what another principal sees, the audit log,
    retention, checkpointed runs and remote workers. Prints the address to open once; the
    token in it is the only key (keep it to yourself)."""
    try:
        import uvicorn

        from ditto.app.ui import UiOptions, create_app
    except ImportError:
        errors.print(f"ditto ui needs the ui extra: {install_hint('ui')}", markup=False)
        raise typer.Exit(2) from None
    from ditto.app.cli.graph import load_graph

    given = os.environ.get(TOKEN_VARIABLE) or None
    if given is None and not is_loopback(host):
        fail_usage(
            f"refusing to serve on {host}, which is not a loopback address, with a generated "
            f"token: set {TOKEN_VARIABLE} (at least 16 characters)"
        )
    if given is not None and not _TOKEN.match(given):
        fail_usage(f"{TOKEN_VARIABLE} must be 16 to 256 letters, digits or ._~-")
    settings = settings_or_exit(config)
    if settings.workers.memory.acl.mode == "enforce" and principal is None:
        fail_usage(
            "access control is enforced (workers.memory.acl.mode): pass --principal NAME, "
            "who the page acts as"
        )
    try:
        from ditto.app.serve.worker import load_worker

        extra = [load_worker(target) for target in worker or ()]
    except ConfigError as exc:
        config_error(exc)
    token = given or secrets.token_urlsafe(32)
    options = UiOptions(
        settings=settings,
        token=token,
        read_only=read_only,
        principal=principal,
        checkpoints=checkpoints,
        graphs=[load_graph(target) for target in graph or ()],
        workers=extra,
    )
    shown = f"[{host}]" if ":" in host else host
    address = f"http://{shown}:{port}/"
    if given is None:
        # The one place the token is ever shown: nothing logs it (no access log).
        typer.echo(f"ditto ui: open {address}?token={token}")
    else:
        typer.echo(f"ditto ui: open {address}?token=<{TOKEN_VARIABLE}>")
    if read_only:
        typer.echo("read-only: nothing can be changed from the page")
    uvicorn.run(
        create_app(options),
        host=host,
        port=port,
        access_log=False,
        log_level="warning",
        lifespan="on",
    )
