"""``ditto worker dead-letters list | show ID | replay ID | purge``: the calls the remote workers
under the configured prefix would not run, kept in the dead-letter stream with their reason.

The Redis is ``DITTO_RUNTIME_REMOTE_REDIS_URL`` and the prefix ``runtime.remote.prefix``, as for
``ditto worker list``. Calls stay sealed: no command shows an input or a principal. Exit codes:
0 ok; 1 no such dead letter, or it cannot be replayed (its deadline passed, or it never opened);
2 usage or configuration; 3 Redis unreachable.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import anyio
import typer
from rich.markup import escape
from rich.table import Table

from ditto.app.cli.checkpoints import parse_age
from ditto.app.cli.memory_common import ConfigOption
from ditto.app.cli.output import (
    EXIT_NOT_FOUND,
    EXIT_STORE,
    JsonOption,
    config_error,
    console,
    errors,
    settings_or_exit,
)
from ditto.errors import ConfigError, DittoError

if TYPE_CHECKING:
    from pathlib import Path

    from ditto.adapters.redis.dead_letters import DeadLetter
    from ditto.app.config.settings import Settings

__all__ = ("dead_letters_app",)

T = TypeVar("T")

dead_letters_app = typer.Typer(
    help="Calls the remote workers dead-lettered: list, show, replay, purge.",
    no_args_is_help=True,
)
IdArgument = Annotated[str, typer.Argument(metavar="ID", help="The dead letter's id.")]


def _run(config: Path | None, work: Callable[[Settings], Awaitable[T]]) -> T:
    settings = settings_or_exit(config)
    try:
        return anyio.run(work, settings)
    except ConfigError as exc:
        config_error(exc)
    except DittoError as exc:
        errors.print(f"{exc.code}: {exc.message}", markup=False, highlight=False)
        raise typer.Exit(EXIT_STORE) from None


def _when(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    return datetime.fromtimestamp(seconds, UTC).isoformat(timespec="seconds")


def _row(letter: DeadLetter) -> dict[str, Any]:
    row = letter.as_dict()
    row["at_utc"] = _when(letter.at)
    row["deadline_utc"] = _when(letter.deadline)
    return row


def _not_found(letter_id: str) -> typer.Exit:
    errors.print(f"NOT_FOUND: no dead letter has id {letter_id!r}", markup=False, highlight=False)
    return typer.Exit(EXIT_NOT_FOUND)


@dead_letters_app.command("list")
def list_(
    config: ConfigOption = None,
    limit: Annotated[int, typer.Option("--limit", min=1, help="Most dead letters.")] = 50,
    as_json: JsonOption = False,
) -> None:
    """The newest dead letters, newest first."""
    from ditto.app.serve.dead_letters import list_dead_letters

    letters, total = _run(config, lambda settings: list_dead_letters(settings, limit))
    if as_json:
        typer.echo(json.dumps({"total": total, "dead_letters": [_row(x) for x in letters]}))
        return
    table = Table(title=f"{total} dead letters" + (f" (newest {limit})" if total > limit else ""))
    for column in (
        "id",
        "when (UTC)",
        "reason",
        "node type",
        "execution id",
        "deliveries",
        "worker",
    ):
        table.add_column(column)
    for letter in letters:
        table.add_row(
            letter.id,
            _when(letter.at),
            letter.reason,
            escape(letter.node_type or "-"),
            escape(letter.execution_id or "-"),
            str(letter.deliveries),
            escape(letter.worker),
        )
    console.print(table)


@dead_letters_app.command("show")
def show(letter_id: IdArgument, config: ConfigOption = None, as_json: JsonOption = False) -> None:
    """One dead letter: reason, node type, execution id, deadline, deliveries (still sealed)."""
    from ditto.app.serve.dead_letters import show as read

    letter = _run(config, lambda settings: read(settings, letter_id))
    if letter is None:
        raise _not_found(letter_id)
    row = _row(letter)
    if as_json:
        typer.echo(json.dumps(row))
        return
    for name in (
        "id",
        "reason",
        "detail",
        "node_type",
        "execution_id",
        "deliveries",
        "worker",
        "at_utc",
        "deadline_utc",
        "stream",
        "sealed_bytes",
    ):
        value = row[name]
        console.print(f"{name}: {'-' if value is None else value}", markup=False, highlight=False)


@dead_letters_app.command("replay")
def replay(letter_id: IdArgument, config: ConfigOption = None, as_json: JsonOption = False) -> None:
    """Put a dead call back on its stream if its deadline has not passed (it runs again)."""
    from ditto.adapters.redis.dead_letters import ReplayOutcome
    from ditto.app.serve.dead_letters import replay as put_back

    outcome, letter = _run(config, lambda settings: put_back(settings, letter_id))
    if as_json:
        typer.echo(json.dumps({"id": letter_id, "outcome": outcome.value}))
    if outcome is ReplayOutcome.NOT_FOUND:
        raise _not_found(letter_id)
    assert letter is not None
    if outcome is ReplayOutcome.EXPIRED:
        errors.print(
            f"not replayed: the deadline of {letter_id} passed at {_when(letter.deadline)} UTC "
            "(a worker would only answer it timeout)",
            markup=False,
            highlight=False,
        )
        raise typer.Exit(EXIT_NOT_FOUND)
    if outcome is ReplayOutcome.UNOPENED:
        errors.print(
            f"not replayed: {letter_id} never opened ({letter.reason}), so it has no node type "
            "or deadline to replay it to",
            markup=False,
            highlight=False,
        )
        raise typer.Exit(EXIT_NOT_FOUND)
    if not as_json:
        console.print(
            f"replayed {letter_id}: {letter.node_type} {letter.execution_id} is on its stream "
            "again",
            markup=False,
            highlight=False,
        )


@dead_letters_app.command("purge")
def purge(
    config: ConfigOption = None,
    older_than: Annotated[
        str | None, typer.Option("--older-than", help="Only those older than 7d, 12h, 30m...")
    ] = None,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")] = False,
    as_json: JsonOption = False,
) -> None:
    """Delete the dead letters (or those older than --older-than); asks unless --yes."""
    from ditto.app.serve.dead_letters import purge as delete

    age = None if older_than is None else parse_age(older_than)
    if not yes:
        which = "every dead letter" if age is None else f"every dead letter older than {older_than}"
        typer.confirm(f"Delete {which}?", abort=True, err=True)
    deleted = _run(config, lambda settings: delete(settings, age))
    if as_json:
        typer.echo(json.dumps({"deleted": deleted}))
        return
    console.print(f"deleted {deleted} dead letters", markup=False, highlight=False)
