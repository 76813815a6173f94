"""``ditto memory export`` and ``import``: every record (and optionally its history) as JSON
lines, streamed both ways so memory use stays flat however many records there are.

Lines: ``{"type": "record", "record": {...}}`` and ``{"type": "history", "entry": {...}}``.
An import restores records exactly (ids, timestamps, versions, usage, governance fields) and
appends history entries it does not hold yet, so importing the same file twice changes nothing.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import msgspec
import typer

from ditto.cli.memory_common import ConfigOption, NamespaceOption, on_store, progress_bar
from ditto.cli.output import EXIT_USAGE, errors, settings_or_exit
from ditto.errors import DittoError

if TYPE_CHECKING:
    from workers.memory.ports import MemoryStore

__all__ = ("export", "import_records")

_EXPORT_PAGE = 1000
_IMPORT_BATCH = 500


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
    """Write every record, archived ones included (and optionally each record's history), as
    JSON lines, page by page."""
    from workers.memory import MemoryFilter
    from workers.memory.ports import HistoryLog, require

    settings = settings_or_exit(config)
    encoder = msgspec.json.Encoder()
    buffer = bytearray()
    everything = MemoryFilter(namespace=namespace, archived="include")

    async def run(store: MemoryStore) -> int:
        out = file.open("wb") if file is not None else None
        try:
            with progress_bar() as progress:
                task = progress.add_task("exporting", total=await store.count(everything))
                count = 0
                async for page in store.pages(everything, _EXPORT_PAGE):
                    for item in page:
                        encoder.encode_into({"type": "record", "record": item}, buffer, -1)
                        buffer.extend(b"\n")
                        if with_history:
                            for entry in await require(store, HistoryLog).history(item.id):
                                encoder.encode_into({"type": "history", "entry": entry}, buffer, -1)
                                buffer.extend(b"\n")
                    # One write per page: flat memory, few system calls.
                    if out is not None:
                        out.write(buffer)
                    else:
                        typer.echo(buffer.decode(), nl=False)
                    buffer.clear()
                    count += len(page)
                    progress.update(task, completed=count)
                return count
        finally:
            if out is not None:
                out.close()

    count = on_store(settings, run)
    errors.print(f"exported {count} records", highlight=False)


def import_records(
    file: Annotated[Path, typer.Argument(help="JSONL written by `ditto memory export`.")],
    config: ConfigOption = None,
) -> None:
    """Restore records (and history lines) from an export, in batches. Importing the same file
    twice changes nothing."""
    from workers.memory import HistoryEntry, MemoryItem
    from workers.memory.contracts import ExportLine
    from workers.memory.ports import HistoryLog, RecordImport, require

    settings = settings_or_exit(config)
    if not file.is_file():
        errors.print(f"no such file: {file}")
        raise typer.Exit(EXIT_USAGE)
    decoder = msgspec.json.Decoder(ExportLine)

    async def run(store: MemoryStore) -> tuple[int, int]:
        records, entries = 0, 0
        batch: list[MemoryItem] = []
        history: list[HistoryEntry] = []

        async def store_batches() -> None:
            nonlocal records, entries, batch, history
            if batch:  # records first: a history line may follow its record in the batch
                records += await require(store, RecordImport).restore(batch)
                batch = []
            if history:
                entries += await require(store, HistoryLog).restore_history(history)
                history = []

        with progress_bar() as progress, file.open("rb") as lines:
            task = progress.add_task("importing", total=file.stat().st_size)
            read = 0
            for number, line in enumerate(lines, start=1):
                read += len(line)
                if not line.strip():
                    continue
                try:
                    parsed = decoder.decode(line)
                except (msgspec.DecodeError, msgspec.ValidationError) as exc:
                    raise DittoError(f"line {number}: {exc}", code="INVALID_INPUT") from None
                if parsed.type == "record" and parsed.record is not None:
                    batch.append(parsed.record)
                elif parsed.type == "history" and parsed.entry is not None:
                    history.append(parsed.entry)
                else:
                    raise DittoError(
                        f"line {number}: a {parsed.type} line needs its "
                        f"{'record' if parsed.type == 'record' else 'entry'}",
                        code="INVALID_INPUT",
                    )
                if len(batch) + len(history) >= _IMPORT_BATCH:
                    await store_batches()
                    progress.update(task, completed=read)
            await store_batches()
            progress.update(task, completed=read)
        return records, entries

    records, entries = on_store(settings, run)
    extra = f" and {entries} history entries" if entries else ""
    errors.print(f"imported {records} records{extra}", highlight=False)
