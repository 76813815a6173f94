"""``ditto memory why KEY --query TEXT``: why a search does not return a record."""

from __future__ import annotations

from typing import Annotated, Any

import typer
from rich.markup import escape

from ditto.app.cli.memory_common import (
    ConfigOption,
    JsonOption,
    NamespaceOption,
    call_nodes,
    print_json,
)
from ditto.app.cli.output import EXIT_NOT_FOUND, console, errors, settings_or_exit

__all__ = ("why",)


def why(
    record: Annotated[str, typer.Argument(help="The record's id, or its key.")],
    query: Annotated[str, typer.Option("--query", "-q", help="The search, in plain words.")],
    namespace: NamespaceOption = None,
    limit: Annotated[int, typer.Option(min=1, max=10_000, help="The search's limit.")] = 10,
    principal: Annotated[
        str | None, typer.Option("--principal", help="Search as this principal.")
    ] = None,
    as_json: JsonOption = False,
    config: ConfigOption = None,
) -> None:
    """Say which stage kept RECORD out of the search for --query: its namespace, status or
    expiry, the filter, or the ranking (no match, under min_score, past the limit, with its
    rank). Exit 1 when no such record exists (or may be seen)."""
    settings = settings_or_exit(config)
    filter: dict[str, Any] = {} if namespace is None else {"namespace": namespace}
    request: dict[str, Any] = {"query": query, "limit": limit, "filter": filter}
    asked_by_id = {**request, "explain_miss": {"id": record}}
    asked_by_key = {**request, "explain_miss": {"key": record}}
    by_id, by_key = call_nodes(
        settings, [("MEMORY.SEARCH", asked_by_id), ("MEMORY.SEARCH", asked_by_key)], principal
    )
    miss = by_id.miss if by_id.miss.stage != "not_found" else by_key.miss
    if as_json:
        print_json(miss)
    else:
        facts = [f"[bold]{miss.stage}[/bold]: {escape(miss.reason)}"]
        if miss.rank is not None:
            facts.append(f"rank: {miss.rank}")
        if miss.score is not None:
            facts.append(f"score: {miss.score:.4f}")
        # No such record is an error, on stderr as every command's; an explanation is the answer.
        (errors if miss.stage == "not_found" else console).print("\n".join(facts))
    if miss.stage == "not_found":
        raise typer.Exit(EXIT_NOT_FOUND)
