"""What every ``ditto`` command shares: the consoles, exit codes and configuration errors."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, NoReturn

import typer
from rich.console import Console
from rich.markup import escape

from ditto.app.config import Settings, load_config
from ditto.errors import ConfigError

__all__ = (
    "EXIT_FORBIDDEN",
    "EXIT_NOT_FOUND",
    "EXIT_STORE",
    "EXIT_USAGE",
    "JsonOption",
    "config_error",
    "console",
    "errors",
    "fail_usage",
    "settings_or_exit",
)

console = Console()
errors = Console(stderr=True, soft_wrap=True)
"""Messages on standard error: one line each whatever the terminal's width (scripts grep them)."""

EXIT_NOT_FOUND = 1
EXIT_USAGE = 2
EXIT_STORE = 3
EXIT_FORBIDDEN = 4

JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON.")]
"""The ``--json`` flag of every command that prints something a script may read."""


def config_error(exc: ConfigError) -> NoReturn:
    """Print a configuration error, one problem per line, and exit with 2."""
    errors.print("[red]invalid configuration:[/red]", highlight=False)
    for problem in exc.message.split("; "):
        errors.print(f"  {escape(problem)}", highlight=False)
    raise typer.Exit(EXIT_USAGE)


def settings_or_exit(path: Path | None) -> Settings:
    """The configuration at ``path`` (default ``$DITTO_CONFIG`` or ``./ditto.yaml``)."""
    try:
        return load_config(path)
    except ConfigError as exc:
        config_error(exc)


def fail_usage(message: str) -> NoReturn:
    """Print a usage problem (one line) and exit with 2."""
    errors.print(escape(message), highlight=False)
    raise typer.Exit(EXIT_USAGE)
