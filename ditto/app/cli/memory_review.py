"""``ditto memory review``: list what the write policy held back for a person, and accept or
reject it.

Contested records are lower-trust claims kept beside the record they contradict; quarantined
ones are writes the safety stage found unsafe (an injection, by default). Reads, search and
recall leave both out. Listing shows why each waits: the record it contests (with both trust
levels), or what the configured safety scanner finds in it (kinds and counts, never the text
it matched). ``--accept`` makes a record active (it takes its key; the key's holder is kept
``superseded``), ``--reject`` deletes it (its history keeps it). Both go through
``MEMORY.REVIEW`` in one call: all of them, or none.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from ditto.app.cli.memory_common import (
    ConfigOption,
    JsonOption,
    NamespaceOption,
    NodeCall,
    on_nodes,
    preview,
    print_json,
)
from ditto.app.cli.output import console, errors, fail_usage, settings_or_exit
from ditto.app.review_reasons import safety_kinds, waiting_for_review, why_waiting

if TYPE_CHECKING:
    from ditto.app.config import Settings
    from workers.memory import MemoryItem

__all__ = ("review",)

_TABLE_WIDTH = 80
"""Below this many columns records are listed one block each: the table's id and status
columns alone take half of 80."""


def review(
    accept: Annotated[
        list[str] | None,
        typer.Option("--accept", metavar="ID", help="Accept this record (repeat for more)."),
    ] = None,
    reject: Annotated[
        list[str] | None,
        typer.Option("--reject", metavar="ID", help="Reject this record (repeat for more)."),
    ] = None,
    namespace: NamespaceOption = None,
    limit: Annotated[int, typer.Option(min=1, max=10_000, help="Records to list.")] = 50,
    cursor: Annotated[str | None, typer.Option(help="next_cursor of the previous page.")] = None,
    principal: Annotated[
        str | None,
        typer.Option("--principal", help="Review as this principal (history names it)."),
    ] = None,
    as_json: JsonOption = False,
    config: ConfigOption = None,
) -> None:
    """List contested and quarantined records with why each waits, or decide them with
    --accept / --reject ID (all in one review: every decision is applied, or none). Accepting
    makes a record active and lets it take its key (the record holding the key is kept
    superseded); rejecting deletes it, its history keeping it. Exit 1: no such record (in
    --namespace); 2: bad usage; 3: the store refused (CONFLICT: not contested or quarantined
    any more, expired) or failed; 4: access control refused."""
    settings = settings_or_exit(config)
    accepted, rejected = list(dict.fromkeys(accept or ())), list(dict.fromkeys(reject or ()))
    both = set(accepted) & set(rejected)
    if both:
        fail_usage(f"{sorted(both)[0]} is both accepted and rejected: decide it once")
    if accepted or rejected:
        if cursor is not None:
            fail_usage("--cursor pages the listing: it does not go with --accept or --reject")
        _decide(settings, accepted, rejected, namespace, principal, as_json)
    else:
        _list(settings, namespace, limit, cursor, principal, as_json)


def _decide(
    settings: Settings,
    accepted: list[str],
    rejected: list[str],
    namespace: str | None,
    principal: str | None,
    as_json: bool,
) -> None:
    decisions = [{"id": record, "decision": "accept"} for record in accepted]
    decisions += [{"id": record, "decision": "reject"} for record in rejected]
    request: dict[str, Any] = {"decisions": decisions}
    if namespace is not None:
        request["namespace"] = namespace

    async def work(call: NodeCall) -> Any:
        return await call("MEMORY.REVIEW", request)

    output = on_nodes(settings, work, principal)
    if as_json:
        print_json(output)
        return
    for outcome in output.items:
        record = outcome.record
        name = escape(record.id + (f" (key {record.key})" if record.key else ""))
        if outcome.decision == "accept":
            held = f"; superseded {escape(record.supersedes)}" if record.supersedes else ""
            console.print(f"accepted {name}: active now{held}", highlight=False)
        else:
            console.print(f"rejected {name}: deleted (its history keeps it)", highlight=False)


def _list(
    settings: Settings,
    namespace: str | None,
    limit: int,
    cursor: str | None,
    principal: str | None,
    as_json: bool,
) -> None:
    async def work(call: NodeCall) -> tuple[Any, dict[str, MemoryItem]]:
        return await waiting_for_review(call, namespace, limit, cursor)

    page, contested = on_nodes(settings, work, principal)
    found = safety_kinds(settings, page.items)
    rows = [
        {"record": item, "contests": contested.get(item.contests or ""), "safety": found[item.id]}
        for item in page.items
    ]
    if as_json:
        print_json({"items": rows, "next_cursor": page.next_cursor})
        return
    if not rows:
        errors.print("nothing waits for review", highlight=False)
        return
    if console.width < _TABLE_WIDTH:
        _print_cards(rows)
    else:
        _print_table(rows)
    if page.next_cursor:
        console.print(f"next page: --cursor {page.next_cursor}", highlight=False, soft_wrap=True)
    errors.print("decide with --accept ID or --reject ID", highlight=False)


def _print_cards(rows: list[dict[str, Any]]) -> None:
    """One block per record: a table this narrow would squeeze every column but the id and
    the status to nothing."""
    console.print(f"{len(rows)} records wait for review", highlight=False)
    for row in rows:
        item = row["record"]
        why = why_waiting(item, row["contests"], row["safety"])
        console.print()
        # The id whole on its line (it is what --accept and --reject take).
        console.print(f"{item.id}  {item.status}", highlight=False, markup=False, soft_wrap=True)
        for line in (
            f"key: {item.key or '-'} · namespace: {item.namespace}",
            f"trust: {item.trust or '-'} · source: {item.source or '-'}",
            f"why: {why}",
            f"content: {preview(item)}",
        ):
            console.print(Text("  " + line))  # Text: a value's brackets are no markup


def _print_table(rows: list[dict[str, Any]]) -> None:
    table = Table(title=f"{len(rows)} records wait for review")
    # The id is what --accept and --reject take: whole on one line at any width (80 columns
    # when piped), the other columns fold around it.
    widest = max(len(row["record"].id) for row in rows)
    table.add_column("id", no_wrap=True, min_width=widest)
    table.add_column("status", no_wrap=True, min_width=len("quarantined"))
    for column in ("key", "namespace", "trust", "source", "why", "content"):
        table.add_column(column, overflow="fold")
    for row in rows:
        item = row["record"]
        table.add_row(
            escape(item.id),
            item.status,
            escape(item.key or "-"),
            escape(item.namespace),
            escape(item.trust or "-"),
            escape(item.source or "-"),
            escape(why_waiting(item, row["contests"], row["safety"])),
            escape(preview(item)),
        )
    console.print(table)
