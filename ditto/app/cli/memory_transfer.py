"""``ditto memory export``: every record (and optionally the whole history, deleted records'
included) as JSON lines, streamed so memory use stays flat however many records there are.

Lines: ``{"type": "record", "record": {...}}``, then with ``--history`` every
``{"type": "history", "entry": {...}}`` in the order the store logged them. ``ditto memory
import`` (``memory_import``) restores records exactly (ids, timestamps, versions, usage,
governance fields) and appends history entries it does not hold yet, so export, import into an
empty store and export again gives the same file.
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

if TYPE_CHECKING:
    from workers.memory.ports import MemoryStore

__all__ = ("export",)

_EXPORT_PAGE = 1000


def export(
    file: Annotated[
        str | None,
        typer.Argument(help="JSONL file to write; - or nothing: standard output.", metavar="FILE"),
    ] = None,
    namespace: NamespaceOption = None,
    with_history: Annotated[
        bool,
        typer.Option("--history", help="Also write the history, deleted records' included."),
    ] = False,
    force: Annotated[bool, typer.Option("--force", help="Overwrite FILE if it exists.")] = False,
    config: ConfigOption = None,
) -> None:
    """Write every record, archived ones included (and optionally the whole history, deleted
    records' too), as JSON lines, page by page. A file is written beside its target and
    renamed into place when complete: a failed export leaves no half file, and never touches
    the store."""
    from workers.memory.maintenance.transfer import everything, read_pages

    settings = settings_or_exit(config)
    target = (
        None if file in (None, "-") else _export_target(Path(file).expanduser(), settings, force)
    )
    encoder = msgspec.json.Encoder()
    buffer = bytearray()

    async def run(store: MemoryStore) -> tuple[int, int]:
        with _output(target) as out, progress_bar() as progress:
            records = progress.add_task("exporting", total=await store.count(everything(namespace)))
            entries = progress.add_task("history", total=None, visible=False)
            done = {records: 0, entries: 0}
            pages = read_pages(store, namespace=namespace, history=with_history)
            async for page in pages:
                task = records if page.records else entries
                for item in page.records:
                    encoder.encode_into({"type": "record", "record": item}, buffer, -1)
                    buffer.extend(b"\n")
                for entry in page.entries:
                    encoder.encode_into({"type": "history", "entry": entry}, buffer, -1)
                    buffer.extend(b"\n")
                out.write(buffer)  # one write per page: flat memory, few system calls
                buffer.clear()
                done[task] += len(page.records) + len(page.entries)
                progress.update(task, completed=done[task], visible=True)
            return done[records], done[entries]

    count, entries = on_store(settings, run, reading=True)
    extra = f" and {entries} history entries" if with_history else ""
    errors.print(f"exported {count} records{extra}", highlight=False)


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


def _write_failed(target: Path, exc: OSError) -> typer.Exit:
    """Exit 3: the export could not be written (a full disk, an I/O error); nothing was left
    at ``target``."""
    errors.print(f"writing {escape(str(target))} failed: {exc.strerror or type(exc).__name__}")
    return typer.Exit(EXIT_STORE)
