"""``ditto memory verify A B``: whether two stores hold the same records, namespace by
namespace (after ``ditto memory copy``, or between a store and its backup).

Each namespace's records are counted and checksummed in one pass over each store
(``workers.memory.maintenance.checksums``: every field, order-independent); with
``--history`` its history entries too. Where a namespace differs, it is read again id by id
to name the records that differ. Exit 0: equal; 1: different (a table says where).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table

from ditto.app.cli.memory_common import JsonOption, NamespaceOption, print_json, progress_bar
from ditto.app.cli.memory_locations import FORMS, locations_or_exit, on_stores
from ditto.app.cli.output import EXIT_NOT_FOUND, console

if TYPE_CHECKING:
    from workers.memory.maintenance.checksums import NamespaceChecksums
    from workers.memory.ports import MemoryStore

__all__ = ("verify",)

_NAMED = 10
"""Most ids named per kind of difference and namespace."""


@dataclass(slots=True)
class _Namespace:
    """One namespace of the comparison."""

    name: str
    a: dict[str, Any]
    b: dict[str, Any]
    equal: bool
    only_in_a: list[str] = field(default_factory=list)
    only_in_b: list[str] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)
    history_differs: list[str] = field(default_factory=list)
    """Ids of the records whose history entries differ."""
    counts: dict[str, int] = field(default_factory=dict)
    """How many ids each list above would hold in full (they name at most ten)."""


def verify(
    first: Annotated[
        str, typer.Argument(help=f"A store: {FORMS}.", metavar="A", show_default=False)
    ],
    second: Annotated[
        str, typer.Argument(help="The store to compare it with.", metavar="B", show_default=False)
    ],
    namespace: NamespaceOption = None,
    with_history: Annotated[
        bool, typer.Option("--history", help="Compare the history entries too.")
    ] = False,
    as_json: JsonOption = False,
) -> None:
    """Compare two stores namespace by namespace: record counts and checksums over every
    field (and history entries with --history). Exit 0 when they hold the same, 1 with a
    table naming the namespaces and records that differ."""
    a, b = locations_or_exit((first, "A"), (second, "B"))

    async def run(store_a: MemoryStore, store_b: MemoryStore) -> list[_Namespace]:
        return await _compare(store_a, store_b, namespace, with_history)

    namespaces = on_stores([(a, True), (b, True)], run)
    equal = all(namespace.equal for namespace in namespaces)
    if as_json:
        print_json(
            {
                "equal": equal,
                "a": a.label,
                "b": b.label,
                "history": with_history,
                "namespaces": [_as_json(namespace) for namespace in namespaces],
            }
        )
    else:
        _print(namespaces, a.label, b.label, with_history, equal)
    if not equal:
        raise typer.Exit(EXIT_NOT_FOUND)


async def _compare(
    store_a: MemoryStore, store_b: MemoryStore, only: str | None, history: bool
) -> list[_Namespace]:
    from workers.memory.maintenance.checksums import store_checksums
    from workers.memory.maintenance.transfer import check_readable

    await check_readable(store_a, "A")
    await check_readable(store_b, "B")
    with progress_bar() as progress:
        task = progress.add_task("checksums", total=2)
        sums_a = await store_checksums(store_a, namespace=only, history=history)
        progress.advance(task)
        sums_b = await store_checksums(store_b, namespace=only, history=history)
        progress.advance(task)
    namespaces = []
    for name in sorted(sums_a.keys() | sums_b.keys()):
        side_a, side_b = _side(sums_a.get(name), history), _side(sums_b.get(name), history)
        namespace = _Namespace(name, side_a, side_b, side_a == side_b)
        if not namespace.equal:
            await _name_differences(namespace, store_a, store_b, history)
        namespaces.append(namespace)
    return namespaces


def _side(sums: NamespaceChecksums | None, history: bool) -> dict[str, Any]:
    from workers.memory.maintenance.checksums import NamespaceChecksums

    sums = sums or NamespaceChecksums()
    side: dict[str, Any] = {"records": sums.records.count, "checksum": sums.records.hex}
    if history:
        side["history"] = sums.history.count
        side["history_checksum"] = sums.history.hex
    return side


async def _name_differences(
    namespace: _Namespace, store_a: MemoryStore, store_b: MemoryStore, history: bool
) -> None:
    """Fill in which records differ, reading the namespace again id by id in both stores."""
    from workers.memory.maintenance.checksums import id_digests

    ids_a = await id_digests(store_a, namespace.name, history=history)
    ids_b = await id_digests(store_b, namespace.name, history=history)
    lists = {
        "only_in_a": sorted(ids_a.records.keys() - ids_b.records.keys()),
        "only_in_b": sorted(ids_b.records.keys() - ids_a.records.keys()),
        "changed": sorted(
            id
            for id in ids_a.records.keys() & ids_b.records.keys()
            if ids_a.records[id] != ids_b.records[id]
        ),
        "history_differs": sorted(
            id
            for id in ids_a.history.keys() | ids_b.history.keys()
            if ids_a.history.get(id) != ids_b.history.get(id)
        ),
    }
    for name, ids in lists.items():
        namespace.counts[name] = len(ids)
        setattr(namespace, name, ids[:_NAMED])


def _as_json(namespace: _Namespace) -> dict[str, Any]:
    found: dict[str, Any] = {
        "namespace": namespace.name,
        "equal": namespace.equal,
        "a": namespace.a,
        "b": namespace.b,
    }
    if not namespace.equal:
        found["differences"] = {
            name: {"count": count, "ids": getattr(namespace, name)}
            for name, count in namespace.counts.items()
        }
    return found


_WHAT = {
    "only_in_a": "only in A",
    "only_in_b": "only in B",
    "changed": "changed",
    "history_differs": "history differs for",
}


def _print(
    namespaces: list[_Namespace], label_a: str, label_b: str, history: bool, equal: bool
) -> None:
    table = Table(title=f"A: {escape(label_a)}\nB: {escape(label_b)}")
    columns = ["namespace", "A records", "B records"]
    if history:
        columns += ["A history", "B history"]
    for column in [*columns, "result"]:
        table.add_column(column, overflow="fold" if column == "result" else "ellipsis")
    for namespace in namespaces:
        cells = [escape(namespace.name), str(namespace.a["records"]), str(namespace.b["records"])]
        if history:
            cells += [str(namespace.a["history"]), str(namespace.b["history"])]
        table.add_row(*cells, _result(namespace))
    console.print(table)
    for namespace in namespaces:
        for name, what in _WHAT.items():
            count = namespace.counts.get(name, 0)
            if count:
                ids = ", ".join(getattr(namespace, name))
                more = f" (and {count - _NAMED} more)" if count > _NAMED else ""
                console.print(
                    f"{escape(namespace.name)}, {what}: {escape(ids)}{more}",
                    highlight=False,
                    soft_wrap=True,
                )
    records = sum(namespace.a["records"] for namespace in namespaces)
    if equal:
        what = "records and history entries" if history else "records"
        console.print(
            f"equal: both hold the same {what} ({records} records in {len(namespaces)} namespaces)",
            highlight=False,
        )
    else:
        different = sum(not namespace.equal for namespace in namespaces)
        console.print(f"different: {different} of {len(namespaces)} namespaces", highlight=False)


def _result(namespace: _Namespace) -> str:
    if namespace.equal:
        return "equal"
    parts = [
        f"{namespace.counts[name]} {what}"
        for name, what in _WHAT.items()
        if namespace.counts.get(name, 0)
    ]
    # Equal id by id, yet different sums: the store changed between the two reads.
    return ", ".join(parts) or "changed while being read: run verify again"
