"""``ditto memory``: look at the memory store ``ditto.yaml`` configures.

Every command opens the configured store through :func:`ditto.bootstrap.open_runtime` and goes
through the MEMORY nodes, so the CLI sees exactly what an application sees. Rich tables by
default, ``--json`` for scripts. Exit codes: 0 ok, 1 nothing found (``get``, ``search``),
2 usage or configuration error, 3 the store failed or cannot be reached.
"""

from __future__ import annotations

from collections import Counter
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any, NoReturn

import msgspec
import typer
from rich.markup import escape
from rich.table import Table

from ditto.cli.output import (
    EXIT_NOT_FOUND,
    EXIT_STORE,
    EXIT_USAGE,
    console,
    errors,
    settings_or_exit,
)
from ditto.config import Settings
from ditto.errors import DittoError

__all__ = ("memory_app",)

memory_app = typer.Typer(help="Inspect the configured memory store.", no_args_is_help=True)

ConfigOption = Annotated[
    Path | None,
    typer.Option("--config", help="ditto.yaml (default: $DITTO_CONFIG or ./ditto.yaml)."),
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON.")]
NamespaceOption = Annotated[str | None, typer.Option(help="Only this namespace.")]
_PREVIEW = 60


def _call(settings: Settings, calls: list[tuple[str, dict[str, Any]]]) -> list[Any]:
    """Run MEMORY calls on a runtime over the configured store; the outputs, in order.

    A refused input exits 2, a missing record 1, a failing or unreachable store 3 — each with
    the error's code and safe message, never a traceback.
    """
    import anyio

    from ditto.bootstrap import open_runtime

    def fail(code: str, message: str) -> NoReturn:
        errors.print(f"[red]{escape(code)}:[/red] {escape(message)}", highlight=False)
        exit_code = {"NOT_FOUND": EXIT_NOT_FOUND, "INVALID_INPUT": EXIT_USAGE}.get(code, EXIT_STORE)
        raise typer.Exit(exit_code)

    async def run() -> list[Any]:
        async with open_runtime(settings) as runtime:
            outputs = []
            for node, payload in calls:
                result = await runtime.invoke(node, payload)
                if not result.ok:
                    assert result.error is not None
                    fail(result.error.code, result.error.message)
                outputs.append(result.output)
            return outputs

    try:
        return anyio.run(run)
    except DittoError as exc:  # the store could not be opened
        fail(exc.code, exc.message)


def _preview(item: Any) -> str:
    from workers.memory.records import content_text

    text = " ".join((item.summary or content_text(item.content)).split())
    return text if len(text) <= _PREVIEW else text[: _PREVIEW - 1] + "…"


def _records_table(items: list[Any], title: str) -> Table:
    table = Table(title=title)
    for column in ("key / id", "namespace", "category", "tags", "updated", "uses", "content"):
        table.add_column(column, overflow="fold" if column == "content" else "ellipsis")
    for item in items:
        table.add_row(
            escape(item.key or item.id),
            escape(item.namespace),
            escape(item.category),
            escape(", ".join(item.tags)),
            f"{item.updated_at:%Y-%m-%d %H:%M}",
            str(item.usage_count),
            escape(_preview(item)),
        )
    return table


def _print_json(value: Any) -> None:
    typer.echo(msgspec.json.encode(value).decode())


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
    as_json: JsonOption = False,
    config: ConfigOption = None,
) -> None:
    """List records, filtered and paged (the cursor of the next page is printed)."""
    filter: dict[str, Any] = {}
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
    (page,) = _call(settings_or_exit(config), [("MEMORY.QUERY", request)])
    if as_json:
        _print_json(page)
        return
    console.print(_records_table(page.items, f"{len(page.items)} records"))
    if page.next_cursor:
        console.print(f"next page: --cursor {page.next_cursor}", highlight=False, soft_wrap=True)


@memory_app.command("get")
def get_records(
    refs: Annotated[list[str], typer.Argument(help="Record ids or keys.", metavar="ID_OR_KEY...")],
    namespace: Annotated[str, typer.Option(help="Namespace the keys are in.")] = "default",
    as_json: JsonOption = False,
    config: ConfigOption = None,
) -> None:
    """Show records by id or key (exit 1 when none is found)."""
    (found,) = _call(
        settings_or_exit(config),
        [("MEMORY.GET", {"ids": refs, "keys": refs, "namespace": namespace})],
    )
    if as_json:
        _print_json(found)
    else:
        for item in found.items:
            console.print_json(msgspec.json.encode(item).decode())
    if not found.items:
        errors.print("no record found")
        raise typer.Exit(EXIT_NOT_FOUND)


@memory_app.command("search")
def search_records(
    query: Annotated[str, typer.Argument(help="What to look for, in plain words.")],
    namespace: NamespaceOption = None,
    strategy: Annotated[
        str | None, typer.Option(help="Search strategy (default: the store's).")
    ] = None,
    limit: Annotated[int, typer.Option(min=1, max=10_000, help="Most hits.")] = 10,
    as_json: JsonOption = False,
    config: ConfigOption = None,
) -> None:
    """Search records (exit 1 when nothing matches). Hits count as uses of the records."""
    request: dict[str, Any] = {"query": query, "limit": limit}
    if namespace is not None:
        request["filter"] = {"namespace": namespace}
    if strategy is not None:
        request["strategy"] = strategy
    (output,) = _call(settings_or_exit(config), [("MEMORY.SEARCH", request)])
    if as_json:
        _print_json(output)
    else:
        console.print(_hits_table(output.hits))
    if not output.hits:
        raise typer.Exit(EXIT_NOT_FOUND)


def _hits_table(hits: list[Any]) -> Table:
    table = Table(title=f"{len(hits)} hits")
    for column in ("score", "key / id", "namespace", "uses", "content"):
        table.add_column(column, overflow="fold" if column == "content" else "ellipsis")
    for hit in hits:
        item = hit.memory
        score = "-" if hit.score is None else f"{hit.score:.4g}"
        table.add_row(
            score,
            escape(item.key or item.id),
            escape(item.namespace),
            str(item.usage_count),
            escape(_preview(item)),
        )
    return table


@memory_app.command("stats")
def stats(as_json: JsonOption = False, config: ConfigOption = None) -> None:
    """Counts per namespace and category, oldest and newest record, and the store's size."""
    settings = settings_or_exit(config)
    items: list[Any] = []
    cursor = None
    while True:  # page through everything, as any application could
        request: dict[str, Any] = {"limit": 10_000}
        if cursor:
            request["cursor"] = cursor
        (page,) = _call(settings, [("MEMORY.QUERY", request)])
        items.extend(page.items)
        cursor = page.next_cursor
        if cursor is None:
            break
    counts = Counter((item.namespace, item.category) for item in items)
    created = [item.created_at for item in items]
    groups = [
        {"namespace": ns, "category": category, "records": count}
        for (ns, category), count in sorted(counts.items())
    ]
    report: dict[str, Any] = {
        "backend": settings.workers.memory.backend,
        "records": len(items),
        "by_namespace_category": groups,
        "oldest": _iso(min(created)) if created else None,
        "newest": _iso(max(created)) if created else None,
        "size_bytes": _size(settings),
    }
    if as_json:
        _print_json(report)
        return
    table = Table(title=f"{report['records']} records ({report['backend']})")
    for column in ("namespace", "category", "records"):
        table.add_column(column)
    for row in groups:
        table.add_row(escape(row["namespace"]), escape(row["category"]), str(row["records"]))
    console.print(table)
    size = "n/a" if report["size_bytes"] is None else f"{report['size_bytes']} bytes"
    console.print(f"oldest: {report['oldest']}  newest: {report['newest']}  size: {size}")


def _iso(moment: datetime) -> str:
    return moment.isoformat()


def _size(settings: Settings) -> int | None:
    memory = settings.workers.memory
    if memory.backend != "sqlite":
        return None
    path = Path(memory.sqlite_path)
    files = [path, path.with_name(path.name + "-wal")]
    return sum(file.stat().st_size for file in files if file.exists())


@memory_app.command("history")
def history(
    ref: Annotated[str, typer.Argument(help="A record id, or a key.", metavar="ID_OR_KEY")],
    namespace: Annotated[str, typer.Option(help="Namespace the key is in.")] = "default",
    as_json: JsonOption = False,
    config: ConfigOption = None,
) -> None:
    """Every change of a record, oldest first — also after it was deleted (exit 1: none)."""
    import anyio

    from ditto.bootstrap import build_memory_store

    settings = settings_or_exit(config)

    async def read() -> list[Any]:
        async with build_memory_store(settings) as store:
            found = await store.get([], [ref], namespace)
            return await store.history(found[0].id if found else ref)

    try:
        entries = anyio.run(read)
    except DittoError as exc:
        errors.print(f"[red]{escape(exc.code)}:[/red] {escape(exc.message)}", highlight=False)
        raise typer.Exit(EXIT_STORE) from None
    if as_json:
        _print_json(entries)
    else:
        table = Table(title=f"history of {escape(ref)}")
        for column in ("version", "change", "at", "content"):
            table.add_column(column, overflow="fold" if column == "content" else "ellipsis")
        for entry in entries:
            table.add_row(
                str(entry.version),
                entry.change,
                f"{entry.at:%Y-%m-%d %H:%M:%S}",
                escape(_preview(entry.record)),
            )
        console.print(table)
    if not entries:
        errors.print("no history for this record")
        raise typer.Exit(EXIT_NOT_FOUND)


_EXPORT_PAGE = 1000


@memory_app.command("export")
def export(
    file: Annotated[
        Path | None, typer.Argument(help="JSONL file to write (default: standard output).")
    ] = None,
    namespace: NamespaceOption = None,
    with_history: Annotated[
        bool, typer.Option("--history", help="Also write each record's history.")
    ] = False,
    config: ConfigOption = None,
) -> None:
    """Write every record (and optionally its history) as JSON lines, page by page, so memory
    use stays flat however many records there are. Lines: ``{"type": "record", "record": {...}}``
    and ``{"type": "history", "entry": {...}}``."""
    import anyio
    from rich.progress import Progress, SpinnerColumn, TextColumn

    from ditto.bootstrap import build_memory_store
    from workers.memory import MemoryFilter, OrderBy
    from workers.memory.records import order_key

    settings = settings_or_exit(config)
    encoder = msgspec.json.Encoder()
    out = file.open("wb") if file is not None else None

    def emit(line: dict[str, Any]) -> None:
        data = encoder.encode(line) + b"\n"
        if out is not None:
            out.write(data)
        else:
            typer.echo(data.decode(), nl=False)

    async def run(progress: Progress, task: Any) -> int:
        count = 0
        async with build_memory_store(settings) as store:
            order = OrderBy()
            after = None
            while True:
                page = await store.query(
                    MemoryFilter(namespace=namespace), order, _EXPORT_PAGE, after
                )
                for item in page:
                    emit({"type": "record", "record": item})
                    if with_history:
                        for entry in await store.history(item.id):
                            emit({"type": "history", "entry": entry})
                count += len(page)
                progress.update(task, completed=count)
                if len(page) < _EXPORT_PAGE:
                    return count
                after = (order_key(page[-1], order.field), page[-1].id)

    with Progress(
        SpinnerColumn(), TextColumn("{task.description}"), console=errors, transient=True
    ) as progress:
        task = progress.add_task("exporting records", total=None)
        try:
            count = anyio.run(run, progress, task)
        except DittoError as exc:
            errors.print(f"[red]{escape(exc.code)}:[/red] {escape(exc.message)}", highlight=False)
            raise typer.Exit(EXIT_STORE) from None
        finally:
            if out is not None:
                out.close()
    errors.print(f"exported {count} records", highlight=False)


_IMPORT_BATCH = 500


@memory_app.command("import")
def import_records(
    file: Annotated[Path, typer.Argument(help="JSONL written by `ditto memory export`.")],
    config: ConfigOption = None,
) -> None:
    """Restore records from an export exactly (ids, timestamps, versions, usage), in batches.
    Importing the same file twice changes nothing; history lines are skipped (an import
    restores a state, it is not a change)."""
    import anyio
    from rich.progress import Progress, SpinnerColumn, TextColumn

    from ditto.bootstrap import build_memory_store
    from workers.memory import MemoryItem
    from workers.memory.contracts import ExportLine

    settings = settings_or_exit(config)
    if not file.is_file():
        errors.print(f"no such file: {file}")
        raise typer.Exit(EXIT_USAGE)
    decoder = msgspec.json.Decoder(ExportLine)

    async def run(progress: Progress, task: Any) -> int:
        count = 0
        batch: list[MemoryItem] = []
        async with build_memory_store(settings) as store:
            with file.open("rb") as lines:
                for number, line in enumerate(lines, start=1):
                    if not line.strip():
                        continue
                    try:
                        parsed = decoder.decode(line)
                    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
                        raise DittoError(f"line {number}: {exc}", code="INVALID_INPUT") from None
                    if parsed.type == "record" and parsed.record is not None:
                        batch.append(parsed.record)
                    if len(batch) >= _IMPORT_BATCH:
                        count += await store.restore(batch)
                        batch = []
                        progress.update(task, completed=count)
                if batch:
                    count += await store.restore(batch)
        return count

    with Progress(
        SpinnerColumn(), TextColumn("{task.description}"), console=errors, transient=True
    ) as progress:
        task = progress.add_task("importing records", total=None)
        try:
            count = anyio.run(run, progress, task)
        except DittoError as exc:
            errors.print(f"[red]{escape(exc.code)}:[/red] {escape(exc.message)}", highlight=False)
            raise typer.Exit(EXIT_USAGE if exc.code == "INVALID_INPUT" else EXIT_STORE) from None
    errors.print(f"imported {count} records", highlight=False)
