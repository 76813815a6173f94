"""``ditto memory get ID_OR_KEY...``: records by id or key, hidden ones on request."""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated

import msgspec
import typer
from rich.markup import escape

from ditto.app.cli.memory_common import (
    ConfigOption,
    JsonOption,
    PrincipalOption,
    call_nodes,
    print_json,
)
from ditto.app.cli.output import EXIT_NOT_FOUND, console, errors, settings_or_exit

__all__ = ("HiddenStatus", "get_records")


class HiddenStatus(StrEnum):
    """Records reads leave out unless asked for (``include``)."""

    superseded = "superseded"
    contested = "contested"
    quarantined = "quarantined"
    expired = "expired"


def get_records(
    refs: Annotated[list[str], typer.Argument(help="Record ids or keys.", metavar="ID_OR_KEY...")],
    namespace: Annotated[str, typer.Option(help="Namespace the keys are in.")] = "default",
    archived: Annotated[
        bool, typer.Option("--archived", help="Also show archived records.")
    ] = False,
    include: Annotated[
        list[HiddenStatus] | None,
        typer.Option(
            "--include",
            help="Also show records hidden by default: superseded, contested, quarantined, "
            "expired (repeatable).",
        ),
    ] = None,
    principal: PrincipalOption = None,
    as_json: JsonOption = False,
    config: ConfigOption = None,
) -> None:
    """Show records by id or key (exit 1 when one is not found, naming it; a key that lives in
    another namespace is named with its namespaces)."""
    settings = settings_or_exit(config)
    request = {
        "ids": refs,
        "keys": refs,
        "namespace": namespace,
        "include_archived": archived,
        "include": [status.value for status in include or ()],
    }
    calls = [("MEMORY.GET", request)]
    # Keys the namespace does not hold may live elsewhere: one query per key, asked together.
    calls += [
        ("MEMORY.QUERY", {"filter": {"key": ref, "archived": "include"}, "limit": 20})
        for ref in refs
    ]
    found, *elsewhere = call_nodes(settings, calls, principal)
    if as_json:
        print_json(found)
    else:
        for item in found.items:
            console.print_json(msgspec.json.encode(item).decode())
    named = {item.id for item in found.items} | {item.key for item in found.items}
    missing = [ref for ref in dict.fromkeys(refs) if ref not in named]
    if missing:
        shown = ", ".join(map(repr, missing[:10])) + (" …" if len(missing) > 10 else "")
        message = f"not found in namespace {namespace!r}: {shown}"
        namespaces = sorted(
            {item.namespace for page in elsewhere for item in page.items if item.key in missing}
        )
        if namespaces:
            message += f"; the key exists in {', '.join(map(repr, namespaces))} (pass --namespace)"
        errors.print(escape(message), highlight=False)
        raise typer.Exit(EXIT_NOT_FOUND)
