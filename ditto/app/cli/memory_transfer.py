"""``ditto memory export`` and ``import``: every record (and optionally its history) as JSON
lines, streamed both ways so memory use stays flat however many records there are.

Lines: ``{"type": "record", "record": {...}}`` and ``{"type": "history", "entry": {...}}``.
An import restores records exactly (ids, timestamps, versions, usage, governance fields) and
appends history entries it does not hold yet, so importing the same file twice changes nothing.
"""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, TYPE_CHECKING, Annotated

import msgspec
import typer
from rich.markup import escape

from ditto.app.cli.memory_common import ConfigOption, NamespaceOption, on_store, progress_bar
from ditto.app.cli.output import EXIT_STORE, errors, fail_usage, settings_or_exit
from ditto.app.config import Settings
from ditto.errors import DittoError

if TYPE_CHECKING:
    from workers.memory.ports import MemoryStore

__all__ = ("export", "import_records")

_EXPORT_PAGE = 1000
_IMPORT_BATCH = 500


def export(
    file: Annotated[
        str | None,
        typer.Argument(help="JSONL file to write; - or nothing: standard output.", metavar="FILE"),
    ] = None,
    namespace: NamespaceOption = None,
    with_history: Annotated[
        bool, typer.Option("--history", help="Also write each record's history.")
    ] = False,
    force: Annotated[bool, typer.Option("--force", help="Overwrite FILE if it exists.")] = False,
    config: ConfigOption = None,
) -> None:
    """Write every record, archived ones included (and optionally each record's history), as
    JSON lines, page by page. A file is written beside its target and renamed into place when
    complete: a failed export leaves no half file, and never touches the store."""
    from workers.memory import MemoryFilter
    from workers.memory.ports import HistoryLog, require

    settings = settings_or_exit(config)
    target = (
        None if file in (None, "-") else _export_target(Path(file).expanduser(), settings, force)
    )
    encoder = msgspec.json.Encoder()
    buffer = bytearray()
    everything = MemoryFilter(namespace=namespace, archived="include")

    async def run(store: MemoryStore) -> int:
        with _output(target) as out, progress_bar() as progress:
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
                out.write(buffer)  # one write per page: flat memory, few system calls
                buffer.clear()
                count += len(page)
                progress.update(task, completed=count)
            return count

    count = on_store(settings, run, reading=True)
    errors.print(f"exported {count} records", highlight=False)


def _export_target(path: Path, settings: Settings, force: bool) -> Path:
    """``path`` checked as an export target: never the store's own files, never an existing
    file without ``--force``, in a folder that exists."""
    memory = settings.workers.memory
    if memory.backend == "sqlite":
        database = memory.sqlite_file.resolve()
        store_files = {database, *(database.with_name(database.name + end) for end in _SIDECARS)}
        if path.resolve() in store_files:
            fail_usage(f"{path} is the memory store itself: export to another file")
    if path.is_dir():
        fail_usage(f"{path} is a folder: name a file to export to")
    if not path.parent.is_dir():
        fail_usage(f"cannot export to {path}: the folder {path.parent} does not exist")
    if path.exists() and not force:
        fail_usage(f"{path} exists: pass --force to overwrite it")
    return path


_SIDECARS = ("-wal", "-shm", "-journal")


@contextmanager
def _output(target: Path | None) -> Iterator[IO[bytes]]:
    """Standard output, or a temporary file beside ``target`` renamed onto it on success (and
    removed on failure). Failing writes (a full disk) become a coded error."""
    if target is None:
        yield sys.stdout.buffer
        sys.stdout.buffer.flush()
        return
    try:
        handle = tempfile.NamedTemporaryFile(  # noqa: SIM115 - closed below, then renamed
            "wb", dir=target.parent, prefix=f".{target.name}.", suffix=".partial", delete=False
        )
    except OSError as exc:
        raise _write_failed(target, exc) from exc
    try:
        with handle:
            yield handle
        os.replace(handle.name, target)
    except OSError as exc:
        Path(handle.name).unlink(missing_ok=True)
        raise _write_failed(target, exc) from exc
    except BaseException:
        Path(handle.name).unlink(missing_ok=True)
        raise


@contextmanager
def _input(source: Path | None) -> Iterator[IO[bytes]]:
    if source is None:
        yield sys.stdin.buffer
        return
    with source.open("rb") as lines:
        yield lines


def _write_failed(target: Path, exc: OSError) -> typer.Exit:
    """Exit 3: the export could not be written (a full disk, an I/O error); nothing was left
    at ``target``."""
    errors.print(f"writing {escape(str(target))} failed: {exc.strerror or type(exc).__name__}")
    return typer.Exit(EXIT_STORE)


def import_records(
    file: Annotated[
        str,
        typer.Argument(help="JSONL written by `ditto memory export`; - reads standard input."),
    ],
    config: ConfigOption = None,
) -> None:
    """Restore records (and history lines) from an export, in batches. Importing the same file
    twice changes nothing; a bad line stops the import and says how much was stored before it
    (import the fixed file again: nothing is stored twice)."""
    from workers.memory import HistoryEntry, MemoryItem
    from workers.memory.model.contracts import ExportLine
    from workers.memory.model.validation import check_record
    from workers.memory.ports import HistoryLog, RecordImport, require

    settings = settings_or_exit(config)
    source = None if file == "-" else Path(file).expanduser()
    if source is not None and not source.is_file():
        fail_usage(f"no such file: {source}")
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

        with progress_bar() as progress, _input(source) as lines:
            size = None if source is None else source.stat().st_size
            task = progress.add_task("importing", total=size)
            read = 0
            for number, line in enumerate(lines, start=1):
                read += len(line)
                if not line.strip():
                    continue
                try:
                    parsed = decoder.decode(line)
                    if parsed.record is not None:
                        check_record(parsed.record)
                    if parsed.entry is not None:
                        check_record(parsed.entry)
                except (
                    msgspec.DecodeError,
                    msgspec.ValidationError,
                    DittoError,
                    RecursionError,
                ) as exc:
                    reason = (
                        exc.message
                        if isinstance(exc, DittoError)
                        else "nested too deeply"
                        if isinstance(exc, RecursionError)
                        else str(exc)
                    )
                    done = f"{records} records and {entries} history entries were imported"
                    raise DittoError(
                        f"line {number}: {reason} ({done} before it)", code="INVALID_INPUT"
                    ) from None
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
