"""``ditto checkpoints list | show | prune``: look into a checkpoint store and keep it small.

The store is named on the command line, as an application names it in code: a SQLite file
(``--store runs.sqlite``, the embedded default) or a Redis URL (``--store redis://...``, with
``--prefix``), or ``DITTO_CHECKPOINT_STORE``. Exit codes: 0 ok; 1 no such checkpoint; 2 usage;
3 the store failed or cannot be read.
"""

from __future__ import annotations

import json
import re
from collections.abc import Awaitable, Callable, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import anyio
import typer
from rich.markup import escape
from rich.table import Table

from ditto.app.cli.output import (
    EXIT_NOT_FOUND,
    EXIT_STORE,
    EXIT_USAGE,
    JsonOption,
    console,
    errors,
)
from ditto.errors import DittoError, ErrorCode

if TYPE_CHECKING:
    from ditto.runtime.checkpoints import CheckpointInfo, CheckpointStore

__all__ = ("checkpoints_app", "parse_age")

T = TypeVar("T")

checkpoints_app = typer.Typer(
    help="Inspect and prune a checkpoint store (runs, interrupts, loops).", no_args_is_help=True
)

StoreOption = Annotated[
    str,
    typer.Option(
        "--store",
        envvar="DITTO_CHECKPOINT_STORE",
        help="A SQLite file (the runtime's SqliteCheckpointStore) or a redis:// URL.",
    ),
]
PrefixOption = Annotated[str, typer.Option("--prefix", help="Redis key prefix.")]

_AGE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhdw])\s*$")
_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def parse_age(text: str) -> float:
    """``"7d"``, ``"12h"``, ``"30m"``, ``"45s"`` or ``"2w"`` in seconds.

    Raises:
        typer.BadParameter: Anything else.
    """
    match = _AGE.match(text)
    if match is None or float(match[1]) <= 0:
        raise typer.BadParameter(f"{text!r} is not an age such as 7d, 12h, 30m or 45s")
    return float(match[1]) * _SECONDS[match[2]]


def _open(store: str, prefix: str) -> CheckpointStore:
    if store.startswith(("redis://", "rediss://", "unix://")):
        from ditto.adapters.redis import RedisCheckpointStore

        return RedisCheckpointStore.from_url(store, prefix=prefix)
    from pathlib import Path

    from ditto.adapters.sqlite import SqliteCheckpointStore

    path = Path(store)
    if not path.is_file():  # reading commands never create a store
        errors.print(f"STORE_UNAVAILABLE: no checkpoint store at {store}", highlight=False)
        raise typer.Exit(EXIT_STORE)
    return SqliteCheckpointStore(path)


def _on_store(store: str, prefix: str, work: Callable[[CheckpointStore], Awaitable[T]]) -> T:
    """Run ``work`` on the store and close it; a store error is one line and exit 3."""

    async def main() -> T:
        opened = _open(store, prefix)
        try:
            return await work(opened)
        finally:
            await opened.aclose()

    try:
        return anyio.run(main)
    except DittoError as exc:
        errors.print(f"{exc.code}: {exc.message}", highlight=False, markup=False)
        code = EXIT_USAGE if exc.code == ErrorCode.INVALID_INPUT else EXIT_STORE
        raise typer.Exit(code) from None


def _when(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).isoformat(timespec="seconds")


def _rows(infos: Sequence[CheckpointInfo]) -> list[dict[str, Any]]:
    return [
        {
            "id": info.id,
            "scope": info.scope,
            "updated_at": _when(info.updated_at),
            "records": info.records,
        }
        for info in infos
    ]


def _table(title: str, infos: Sequence[CheckpointInfo]) -> Table:
    table = Table(title=title)
    for column in ("id", "scope", "updated (UTC)", "records"):
        table.add_column(column)
    for row in _rows(infos):
        table.add_row(
            escape(row["id"]), escape(row["scope"]), row["updated_at"], str(row["records"])
        )
    return table


@checkpoints_app.command("list")
def list_checkpoints(
    store: StoreOption,
    prefix: PrefixOption = "ditto:",
    scope: Annotated[str | None, typer.Option("--scope", help="Only this scope.")] = None,
    limit: Annotated[int, typer.Option("--limit", min=1, help="Most checkpoints.")] = 20,
    as_json: JsonOption = False,
) -> None:
    """The most recently updated checkpoints, newest first."""
    infos = _on_store(store, prefix, lambda opened: opened.list(scope=scope, limit=limit))
    if as_json:
        typer.echo(json.dumps(_rows(infos)))
        return
    console.print(_table(f"{len(infos)} checkpoints", infos))


@checkpoints_app.command("show")
def show(
    checkpoint_id: Annotated[str, typer.Argument(metavar="ID", help="The checkpoint id.")],
    store: StoreOption,
    prefix: PrefixOption = "ditto:",
    as_json: JsonOption = False,
) -> None:
    """A checkpoint's scope, status, recorded tasks and open interrupts (digests checked)."""
    from ditto.runtime.checkpoints.envelope import open_envelope

    async def read(opened: CheckpointStore) -> dict[str, Any] | None:
        stored = await opened.load(checkpoint_id)
        if stored is None:
            return None
        state = open_envelope(stored.envelope, checkpoint_id).state
        return {
            "id": checkpoint_id,
            "scope": stored.scope,
            "status": state.get("status", "saved"),
            "updated_at": _when(stored.updated_at),
            "records": sorted({key for key, _ in stored.records}),
            "interrupts": state.get("interrupts", []),
        }

    found = _on_store(store, prefix, read)
    if found is None:
        errors.print(f"CHECKPOINT_NOT_FOUND: no checkpoint has id {checkpoint_id!r}", markup=False)
        raise typer.Exit(EXIT_NOT_FOUND)
    if as_json:
        typer.echo(json.dumps(found))
        return
    for name in ("id", "scope", "status", "updated_at"):
        console.print(f"{name}: {found[name]}", markup=False, highlight=False)
    console.print(f"records: {', '.join(found['records']) or '-'}", markup=False, highlight=False)
    for interrupt in found["interrupts"]:
        payload = json.dumps(interrupt.get("payload"))
        console.print(
            f"waits: {interrupt.get('task')} asks {payload}", markup=False, highlight=False
        )


@checkpoints_app.command("prune")
def prune(
    store: StoreOption,
    prefix: PrefixOption = "ditto:",
    older_than: Annotated[
        str | None, typer.Option("--older-than", help="Age such as 7d, 12h or 30m.")
    ] = None,
    keep_last: Annotated[
        int | None,
        typer.Option("--keep-last", min=0, help="Always keep this many of the newest."),
    ] = None,
    scope: Annotated[str | None, typer.Option("--scope", help="Only this scope.")] = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Delete nothing; list what would go.")
    ] = False,
    as_json: JsonOption = False,
) -> None:
    """Delete checkpoints older than --older-than, always keeping the --keep-last newest."""
    from ditto.runtime.checkpoints import prune_checkpoints

    if older_than is None and keep_last is None:
        errors.print("pass --older-than, --keep-last or both", highlight=False)
        raise typer.Exit(EXIT_USAGE)
    age = None if older_than is None else parse_age(older_than)
    gone = _on_store(
        store,
        prefix,
        lambda opened: prune_checkpoints(
            opened, older_than=age, keep_last=keep_last, scope=scope, dry_run=dry_run
        ),
    )
    if as_json:
        typer.echo(
            json.dumps({"dry_run": dry_run, "deleted": _rows(gone), "busy": _rows(gone.busy)})
        )
        return
    verb = "would delete" if dry_run else "deleted"
    console.print(_table(f"{verb} {len(gone)} checkpoints", gone))
    if gone.busy:  # a run holds them: a later prune takes them once it ends
        console.print(_table(f"kept {len(gone.busy)} checkpoints a run holds", gone.busy))
