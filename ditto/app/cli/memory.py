"""``ditto memory``: inspect and govern the memory store ``ditto.yaml`` configures.

``list``, ``get``, ``search``, ``why`` and ``review`` go through the MEMORY nodes (as
``--principal`` when access control is on), so the CLI sees exactly what an application sees.
``stats``, ``history``, ``export``, ``import``, ``hygiene`` and ``audit`` are administration:
they act on the store itself; ``copy`` and ``verify`` act on two stores named on the command
line. Rich tables by default, ``--json`` for scripts, progress bars on standard error.

Exit codes: 0 ok, 1 nothing found (``get``, ``search``, ``history``, a record to review), 2
usage or configuration error, 3 the store failed, cannot be reached or refused the change
(``CONFLICT``), 4 access control refused the call (``verify``: 1 means the stores differ).
"""

from __future__ import annotations

from collections import Counter
from datetime import datetime
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table

from ditto.app.cli.memory_common import (
    ConfigOption,
    JsonOption,
    NamespaceOption,
    PrincipalOption,
    call_nodes,
    on_store,
    preview,
    print_json,
    records,
)
from ditto.app.cli.memory_copy import copy
from ditto.app.cli.memory_get import get_records
from ditto.app.cli.memory_governance import audit, hygiene, reindex
from ditto.app.cli.memory_import import import_records
from ditto.app.cli.memory_review import review
from ditto.app.cli.memory_transfer import export
from ditto.app.cli.memory_verify import verify
from ditto.app.cli.memory_why import why
from ditto.app.cli.output import EXIT_NOT_FOUND, console, errors, settings_or_exit
from ditto.app.config import Settings

if TYPE_CHECKING:
    from workers.memory.ports import MemoryStore

__all__ = ("memory_app",)

memory_app = typer.Typer(
    help="Inspect and govern the configured memory store.", no_args_is_help=True
)

ArchivedOption = Annotated[
    str, typer.Option("--archived", help="exclude (default), include or only archived records.")
]


def _records_table(items: list[Any], title: str) -> Table:
    table = Table(title=title)
    for column in ("key / id", "namespace", "category", "tags", "updated", "uses", "content"):
        table.add_column(column, overflow="fold" if column == "content" else "ellipsis")
    for item in items:
        flags = ("📌 " if item.pinned else "") + ("🗄 " if item.archived_at else "")
        table.add_row(
            escape(item.key or item.id),
            escape(item.namespace),
            escape(item.category),
            escape(", ".join(item.tags)),
            f"{item.updated_at:%Y-%m-%d %H:%M}",
            str(item.usage_count),
            flags + escape(preview(item)),
        )
    return table


@memory_app.command("list")
def list_records(
    namespace: NamespaceOption = None,
    category: Annotated[str | None, typer.Option(help="Only this category.")] = None,
    tag: Annotated[list[str] | None, typer.Option(help="Records with any of these tags.")] = None,
    key_prefix: Annotated[str | None, typer.Option(help="Keys starting with this.")] = None,
    order: Annotated[
        str, typer.Option(help="created_at, updated_at, last_used_at or usage_count.")
    ] = "created_at",
    desc: Annotated[bool, typer.Option("--desc", help="Newest / largest first.")] = False,
    limit: Annotated[int, typer.Option(min=1, max=10_000, help="Records per page.")] = 20,
    cursor: Annotated[str | None, typer.Option(help="next_cursor of the previous page.")] = None,
    archived: ArchivedOption = "exclude",
    principal: PrincipalOption = None,
    as_json: JsonOption = False,
    config: ConfigOption = None,
) -> None:
    """List records, filtered and paged (the cursor of the next page is printed)."""
    filter: dict[str, Any] = {"archived": archived}
    for name, value in (
        ("namespace", namespace),
        ("category", category),
        ("key_prefix", key_prefix),
    ):
        if value is not None:
            filter[name] = value
    if tag:
        filter["tags_any"] = tag
    request: dict[str, Any] = {
        "filter": filter,
        "limit": limit,
        "order_by": {"field": order, "direction": "desc" if desc else "asc"},
    }
    if cursor:
        request["cursor"] = cursor
    (page,) = call_nodes(settings_or_exit(config), [("MEMORY.QUERY", request)], principal)
    if as_json:
        print_json(page)
        return
    console.print(_records_table(page.items, f"{len(page.items)} records"))
    if page.next_cursor:
        console.print(f"next page: --cursor {page.next_cursor}", highlight=False, soft_wrap=True)


memory_app.command("get")(get_records)


@memory_app.command("search")
def search_records(
    query: Annotated[str, typer.Argument(help="What to look for, in plain words.")],
    namespace: NamespaceOption = None,
    strategy: Annotated[
        str | None,
        typer.Option(help="auto (default), keyword, vector, hybrid or recent-keyword."),
    ] = None,
    limit: Annotated[int, typer.Option(min=1, max=10_000, help="Most hits.")] = 10,
    explain: Annotated[
        bool, typer.Option("--explain", help="Show why each hit ranked where it did.")
    ] = False,
    archived: ArchivedOption = "exclude",
    principal: PrincipalOption = None,
    as_json: JsonOption = False,
    config: ConfigOption = None,
) -> None:
    """Search records (exit 1 when nothing matches). Hits count as uses of the records."""
    filter: dict[str, Any] = {"archived": archived}
    if namespace is not None:
        filter["namespace"] = namespace
    request: dict[str, Any] = {"query": query, "limit": limit, "filter": filter}
    if strategy is not None:
        request["strategy"] = strategy
    if explain:
        request["options"] = {"explain": True}
    (output,) = call_nodes(settings_or_exit(config), [("MEMORY.SEARCH", request)], principal)
    if as_json:
        print_json(output)
    else:
        console.print(_hits_table(output.hits, explain))
    if output.vector_missing:
        errors.print(
            f"note: vector search cannot see {records(output.vector_missing)} without a vector; "
            "run `ditto memory reindex` to embed them",
            highlight=False,
        )
    if not output.hits:
        raise typer.Exit(EXIT_NOT_FOUND)


def _hits_table(hits: list[Any], explain: bool = False) -> Table:
    table = Table(title=f"{len(hits)} hits")
    columns = ["score", "key / id", "namespace", "uses", "content"]
    if explain:
        columns.append("why")
    for column in columns:
        table.add_column(column, overflow="fold" if column in ("content", "why") else "ellipsis")
    for hit in hits:
        item = hit.memory
        score = "-" if hit.score is None else f"{hit.score:.4g}"
        row = [
            score,
            escape(item.key or item.id),
            escape(item.namespace),
            str(item.usage_count),
            escape(preview(item)),
        ]
        if explain:
            row.append(escape(_why(hit.explain or {})))
        table.add_row(*row)
    return table


def _why(explain: dict[str, Any]) -> str:
    """One fact per line, in words a narrow terminal can wrap between (``keyword score:
    0.5798``), never inside a token such as ``keyword_score=0.5797876389294174``."""
    return "\n".join(
        f"{name.replace('_', ' ')}: {f'{value:.4g}' if isinstance(value, float) else value}"
        for name, value in explain.items()
    )


@memory_app.command("stats")
def stats(as_json: JsonOption = False, config: ConfigOption = None) -> None:
    """Counts per namespace and category (live and archived), pinned records, the oldest and
    newest record, the store's size and the health of its indexes."""
    from workers.memory import MemoryFilter
    from workers.memory.model.contracts import HIDDEN_ALL

    settings = settings_or_exit(config)

    async def gather(store: MemoryStore) -> dict[str, Any]:
        # Streamed page by page: counters only, never every record in memory at once.
        counts: Counter[tuple[str, str]] = Counter()
        archived: Counter[tuple[str, str]] = Counter()
        pinned = 0
        oldest: datetime | None = None
        newest: datetime | None = None
        async for page in store.pages(
            MemoryFilter(archived="include", include=list(HIDDEN_ALL)), _STATS_PAGE
        ):
            for item in page:
                group = (item.namespace, item.category)
                counts[group] += 1
                archived[group] += item.archived_at is not None
                pinned += item.pinned
                oldest = item.created_at if oldest is None else min(oldest, item.created_at)
                newest = item.created_at if newest is None else max(newest, item.created_at)
        groups = [
            {"namespace": ns, "category": category, "records": count, "archived": archived[key]}
            for key, count in sorted(counts.items())
            for ns, category in [key]
        ]
        return {
            "backend": settings.workers.memory.backend,
            "records": sum(counts.values()),
            "archived": sum(archived.values()),
            "pinned": pinned,
            "by_namespace_category": groups,
            "oldest": None if oldest is None else oldest.isoformat(),
            "newest": None if newest is None else newest.isoformat(),
            "size_bytes": _size(settings),
            "index_health": await store.health(),
            "vectors": await _vector_report(store, settings),
        }

    report = on_store(settings, gather, reading=True)
    if as_json:
        print_json(report)
        return
    table = Table(title=f"{report['records']} records ({report['backend']})")
    for column in ("namespace", "category", "records", "archived"):
        table.add_column(column)
    for row in report["by_namespace_category"]:
        table.add_row(
            escape(row["namespace"]),
            escape(row["category"]),
            str(row["records"]),
            str(row["archived"]),
        )
    console.print(table)
    size = "n/a" if report["size_bytes"] is None else f"{report['size_bytes']} bytes"
    console.print(
        f"oldest: {report['oldest']}  newest: {report['newest']}  size: {size}  "
        f"pinned: {report['pinned']}",
        highlight=False,
    )
    vectors = report["vectors"]
    if vectors and vectors["model"]:
        console.print(
            f"vectors: {vectors['model']} ({vectors['dimension']}-d), "
            f"{records(vectors['records_without_vector'])} without one"
            + (f", reindexing to {vectors['reindex_target']}" if vectors["reindex_target"] else "")
            + (" (run `ditto memory reindex`)" if vectors["records_without_vector"] else ""),
            highlight=False,
        )
    health = report["index_health"]
    if health:
        console.print(
            "index health: " + ", ".join(f"{name}={value}" for name, value in health.items()),
            highlight=False,
        )


_STATS_PAGE = 1000


async def _vector_report(store: MemoryStore, settings: Settings) -> dict[str, Any] | None:
    """The store's embedding model and how many records lack its vector. A store that has no
    vectors yet is measured against the configured embedder: gaining one leaves every record
    written before it without a vector until ``reindex``."""
    from ditto.app.bootstrap import build_embedder
    from workers.memory.ports import VectorStore
    from workers.memory.retrieval.embeddings.base import model_of

    if not isinstance(store, VectorStore):
        return None
    state = await store.vector_state()
    model = state.active
    if model is None:
        embedder = build_embedder(settings)
        model = None if embedder is None else model_of(embedder)
    return {
        "model": None if model is None else model.model_id,
        "dimension": None if model is None else model.dimension,
        "reindex_target": None if state.target is None else str(state.target),
        "records_without_vector": (
            None if model is None else await store.count_missing_vectors(model)
        ),
    }


def _size(settings: Settings) -> int | None:
    memory = settings.workers.memory
    if memory.backend != "sqlite":
        return None
    path = memory.sqlite_file
    files = [path, path.with_name(path.name + "-wal")]
    return sum(file.stat().st_size for file in files if file.exists())


@memory_app.command("history")
def history(
    ref: Annotated[str, typer.Argument(help="A record id, or a key.", metavar="ID_OR_KEY")],
    namespace: Annotated[str, typer.Option(help="Namespace the key is in.")] = "default",
    as_json: JsonOption = False,
    config: ConfigOption = None,
) -> None:
    """Every change of a record, oldest first — also after it was deleted, by id or by key
    (a key a deleted record freed and a new record took names both; exit 1: none)."""
    settings = settings_or_exit(config)

    from workers.memory.ports import HistoryLog, require

    async def read(store: MemoryStore) -> list[Any]:
        log = require(store, HistoryLog)
        return await log.key_history(namespace, ref) or await log.history(ref)

    entries = on_store(settings, read, reading=True)
    if as_json:
        print_json(entries)
    else:
        table = Table(title=f"history of {escape(ref)}")
        several = len({entry.id for entry in entries}) > 1
        reviewed = any(entry.reviewer for entry in entries)  # a review names who decided
        columns = ("id",) * several + ("version", "change", "at") + ("reviewer",) * reviewed
        for column in (*columns, "content"):
            table.add_column(column, overflow="fold" if column == "content" else "ellipsis")
        for entry in entries:
            cells = [str(entry.version), entry.change, f"{entry.at:%Y-%m-%d %H:%M:%S}"]
            cells += [escape(entry.reviewer or "-")] * reviewed + [escape(preview(entry.record))]
            table.add_row(*([escape(entry.id)] if several else []), *cells)
        console.print(table)
    if not entries:
        errors.print("no history for this record")
        raise typer.Exit(EXIT_NOT_FOUND)


memory_app.command("export")(export)
memory_app.command("import")(import_records)
memory_app.command("copy")(copy)
memory_app.command("verify")(verify)
memory_app.command("hygiene")(hygiene)
memory_app.command("audit")(audit)
memory_app.command("reindex")(reindex)
memory_app.command("why")(why)
memory_app.command("review")(review)
