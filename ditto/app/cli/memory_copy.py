"""``ditto memory copy SRC DST``: move a store to another backend without a script.

Records (archived and hidden ones included) go exactly as they are — ids, timestamps,
versions, usage, governance fields — then the whole history, page by page through the
store ports (``workers.memory.maintenance.transfer``), with no file in between. Running it
again is safe: what DST holds already is skipped, so an interrupted copy finishes by running
it again and a finished one changes nothing. ``ditto memory verify SRC DST`` then says
whether the two stores hold the same.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.markup import escape

from ditto.app.cli.memory_common import JsonOption, NamespaceOption, print_json, progress_bar
from ditto.app.cli.memory_locations import FORMS, locations_or_exit, on_stores
from ditto.app.cli.output import errors
from ditto.errors import DittoError

if TYPE_CHECKING:
    from workers.memory.maintenance.transfer import TransferCounts
    from workers.memory.ports import MemoryStore

__all__ = ("copy",)

_HELP_SRC = f"The store to copy from: {FORMS}. Passwords in URLs are never printed."


def copy(
    source: Annotated[str, typer.Argument(help=_HELP_SRC, metavar="SRC", show_default=False)],
    target: Annotated[
        str,
        typer.Argument(
            help="The store to copy into (created if missing), named like SRC.",
            metavar="DST",
            show_default=False,
        ),
    ],
    namespace: NamespaceOption = None,
    with_history: Annotated[
        bool,
        typer.Option(
            "--history/--no-history",
            help="Copy the history too, deleted records' included.",
        ),
    ] = True,
    overwrite: Annotated[
        bool,
        typer.Option(
            "--overwrite",
            help="Replace a different record DST holds under a copied id (and delete a DST "
            "record holding a copied record's key) instead of stopping with CONFLICT.",
        ),
    ] = False,
    batch: Annotated[
        int,
        typer.Option(
            "--batch", min=1, max=10_000, help="Records per transaction in DST.", metavar="N"
        ),
    ] = 1000,
    as_json: JsonOption = False,
) -> None:
    """Copy every record and its history from SRC into DST (any two of SQLite, PostgreSQL,
    MySQL, Markdown). Idempotent and resumable: records DST holds as they are and history
    entries it holds are skipped, so run it again after an interruption. A record DST holds
    in an earlier state (fewer versions, other usage counters) is brought up to date; a
    different one stops the copy with CONFLICT unless --overwrite. Vectors are not copied:
    run `ditto memory reindex` on DST."""
    from workers.memory.maintenance.transfer import TransferConflict, copy_store

    src, dst = locations_or_exit((source, "SRC"), (target, "DST"))
    done = {"records": 0}

    async def run(
        source_store: MemoryStore, target_store: MemoryStore
    ) -> tuple[TransferCounts, str | None]:
        with progress_bar(rate="records") as progress:
            tasks = {
                "records": progress.add_task("records", total=None),
                "history": progress.add_task("history", total=None, visible=False),
            }

            def advance(part: str, count: int, total: int | None) -> None:
                done[part] = count
                progress.update(tasks[part], completed=count, total=total, visible=True)

            try:
                counts = await copy_store(
                    source_store,
                    target_store,
                    namespace=namespace,
                    history=with_history,
                    overwrite=overwrite,
                    size=batch,
                    progress=advance,
                )
            except TransferConflict as exc:
                raise DittoError(
                    f"{exc.message} (DST holds a different record: pass --overwrite to replace "
                    f"it with SRC's; the {done['records']} records before it were copied)",
                    code=exc.code,
                    details=exc.details,
                ) from exc
        return counts, await _vector_model(source_store)

    counts, model = on_stores([(src, True), (dst, False)], run)
    report = _report(counts, src.label, dst.label, model)
    if as_json:
        print_json(report)
        return
    errors.print(_summary(report), highlight=False)
    if model is not None:
        errors.print(
            f"vectors ({escape(model)}) were not copied: run `ditto memory reindex` with DST's "
            "configuration to embed its records",
            highlight=False,
        )


async def _vector_model(store: MemoryStore) -> str | None:
    """The model of the store's vectors, if it holds any."""
    from workers.memory.ports import VectorStore

    if not isinstance(store, VectorStore):
        return None
    active = (await store.vector_state()).active
    return None if active is None else str(active)


def _report(counts: TransferCounts, source: str, target: str, model: str | None) -> dict[str, Any]:
    return {
        "source": source,
        "target": target,
        "records": {
            "new": counts.new,
            "updated": counts.updated,
            "unchanged": counts.unchanged,
            "overwritten": counts.overwritten,
            "removed": counts.removed,
        },
        "history": {"added": counts.history_added, "held": counts.history_held},
        "vectors_not_copied": model,
    }


def _summary(report: dict[str, Any]) -> str:
    records = report["records"]
    copied = records["new"] + records["updated"] + records["overwritten"]
    parts = [f"{records['new']} new", f"{records['updated']} updated"]
    if records["overwritten"]:
        parts.append(f"{records['overwritten']} overwritten")
    parts.append(f"{records['unchanged']} unchanged")
    text = (
        f"copied {copied} records from {report['source']} to {report['target']} "
        f"({', '.join(parts)})"
    )
    if records["removed"]:
        text += f"; deleted {records['removed']} records of DST that held copied keys"
    history = report["history"]
    if history["added"] or history["held"]:
        text += f" and {history['added']} history entries ({history['held']} already held)"
    return escape(text)
