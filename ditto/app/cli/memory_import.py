"""``ditto memory import``: restore an export, all or nothing.

By default the whole file (from ``--resume-from`` on) is checked before anything is stored, so
a bad line stores nothing of it. ``--batch N`` checks and stores N lines at a time instead: a
bad line stores nothing of its batch, and the message names the line to resume from. Records
are compared with what the store holds, so a second import says it changed nothing.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING, Annotated

import msgspec
import typer

from ditto.app.cli.memory_common import ConfigOption, JsonOption, on_store, print_json, progress_bar
from ditto.app.cli.output import errors, fail_usage, settings_or_exit
from ditto.errors import DittoError, ErrorCode

if TYPE_CHECKING:
    from workers.memory.model.contracts import ExportLine, MemoryItem
    from workers.memory.ports import MemoryStore

    Line = tuple[int, ExportLine]

__all__ = ("import_records",)

_CHUNK = 500
"""Lines per store call when no ``--batch`` is given."""


@dataclass
class _Tally:
    lines: int = 0
    new: int = 0
    replaced: int = 0
    unchanged: int = 0
    history_added: int = 0
    history_held: int = 0


class _PastEnd(Exception):
    """``--resume-from`` names a line after the file's end (a mistyped line, another file)."""

    def __init__(self, lines: int) -> None:
        super().__init__(lines)
        self.lines = lines


class _BadLine(Exception):
    def __init__(self, number: int, reason: str, code: str = ErrorCode.INVALID_INPUT) -> None:
        super().__init__(reason)
        self.number, self.reason, self.code = number, reason, code


def import_records(
    file: Annotated[
        str,
        typer.Argument(help="JSONL written by `ditto memory export`; - reads standard input."),
    ],
    batch: Annotated[
        int | None,
        typer.Option(
            "--batch",
            min=1,
            help="Check and store N lines at a time (a bad line stores nothing of its batch); "
            "default: the whole file or nothing.",
            metavar="N",
        ),
    ] = None,
    resume_from: Annotated[
        int,
        typer.Option("--resume-from", min=1, help="Skip the lines before LINE.", metavar="LINE"),
    ] = 1,
    overwrite: Annotated[
        bool,
        typer.Option(
            "--overwrite",
            help="Replace a record the store holds at a newer version, or in another state at "
            "the same version, with the file's (default: CONFLICT, nothing stored).",
        ),
    ] = False,
    as_json: JsonOption = False,
    config: ConfigOption = None,
) -> None:
    """Restore records and history from an export. The file (from --resume-from on) is checked
    before anything is stored: a bad line stores nothing and is named. With --batch N, each
    batch is all or nothing and a failure names the line to resume from. Importing the same
    file twice changes nothing (the summary counts new, replaced and unchanged records). A
    record the store holds at a lower version is brought up to date; one changed in the store
    since the export (a newer version) is a CONFLICT unless --overwrite."""
    settings = settings_or_exit(config)
    source = None if file == "-" else Path(file).expanduser()
    if source is not None and not source.is_file():
        fail_usage(f"no such file: {source}")
    size = None if source is None else source.stat().st_size
    tally = _Tally()

    async def run(store: MemoryStore) -> None:
        with _input(source, spool=batch is None) as lines:
            checks = _Checks(overwrite)
            if batch is None:
                await _whole_file(store, lines, resume_from, size, tally, checks)
            else:
                await _batches(store, lines, resume_from, batch, size, tally, checks)

    try:
        on_store(settings, run)
    except _PastEnd as past:
        fail_usage(f"--resume-from {resume_from} is past the end of the input ({past.lines} lines)")
    if as_json:
        print_json(asdict(tally))
        return
    message = (
        f"imported {tally.new + tally.replaced} records ({tally.new} new, "
        f"{tally.replaced} replaced, {tally.unchanged} unchanged)"
    )
    if tally.history_added or tally.history_held:
        message += f" and {tally.history_added} history entries ({tally.history_held} already held)"
    errors.print(message, highlight=False)


@contextmanager
def _input(source: Path | None, *, spool: bool) -> Iterator[IO[bytes]]:
    """The file, or standard input (copied to a temporary file when it is read twice)."""
    if source is not None:
        with source.open("rb") as lines:
            yield lines
    elif spool:
        with tempfile.TemporaryFile() as copy:
            shutil.copyfileobj(sys.stdin.buffer, copy)
            copy.seek(0)
            yield copy
    else:
        yield sys.stdin.buffer


def _read(lines: IO[bytes]) -> int | None:
    """Bytes read so far; ``None`` from a pipe."""
    try:
        return lines.tell()
    except OSError:
        return None


def _chunks(lines: IO[bytes], start: int, size: int) -> Iterator[list[Line]]:
    """Parsed lines from line ``start`` on, ``size`` at a time; a line that does not parse or
    validate raises :class:`_BadLine` as its chunk is built."""
    from workers.memory.model.contracts import ExportLine
    from workers.memory.model.validation import check_record

    decoder = msgspec.json.Decoder(ExportLine)
    chunk: list[Line] = []
    number = 0
    for number, line in enumerate(lines, start=1):
        if number < start or not line.strip():
            continue
        try:
            parsed = decoder.decode(line)
            if parsed.record is not None:
                check_record(parsed.record)
            if parsed.entry is not None:
                check_record(parsed.entry)
        except (msgspec.DecodeError, msgspec.ValidationError, RecursionError) as exc:
            reason = "nested too deeply" if isinstance(exc, RecursionError) else str(exc)
            raise _BadLine(number, reason) from None
        except DittoError as exc:
            raise _BadLine(number, exc.message) from None
        if (parsed.record if parsed.type == "record" else parsed.entry) is None:
            needs = "record" if parsed.type == "record" else "entry"
            raise _BadLine(number, f"a {parsed.type} line needs its {needs}")
        chunk.append((number, parsed))
        if len(chunk) == size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk
    if start > number + 1:  # line number + 1 resumes after a complete import: nothing left
        raise _PastEnd(number)


async def _whole_file(
    store: MemoryStore,
    lines: IO[bytes],
    start: int,
    size: int | None,
    tally: _Tally,
    checks: _Checks,
) -> None:
    """Check every line, then store them: a bad line stores nothing."""
    total = 0
    try:
        with progress_bar(in_bytes=True) as progress:
            task = progress.add_task("checking", total=size)
            for chunk in _chunks(lines, start, _CHUNK):
                await checks.check(store, chunk)
                total += len(chunk)
                progress.update(task, completed=_read(lines))
    except _BadLine as bad:
        again = "import the file again" if start == 1 else f"import again --resume-from {start}"
        raise DittoError(
            f"line {bad.number}: {bad.reason} (nothing was imported: fix the line and {again})",
            code=bad.code,
        ) from None
    lines.seek(0)
    with progress_bar(rate="lines") as progress:
        task = progress.add_task("importing", total=total)
        for chunk in _chunks(lines, start, _CHUNK):
            await _stored(store, chunk, tally)
            progress.advance(task, len(chunk))


async def _batches(
    store: MemoryStore,
    lines: IO[bytes],
    start: int,
    batch: int,
    size: int | None,
    tally: _Tally,
    checks: _Checks,
) -> None:
    """Check and store ``batch`` lines at a time: a bad line stores nothing of its batch."""
    resume = start
    try:
        with progress_bar(in_bytes=True) as progress:
            task = progress.add_task("importing", total=size)
            for chunk in _chunks(lines, start, batch):
                await checks.check(store, chunk)
                await _stored(store, chunk, tally)
                resume = chunk[-1][0] + 1
                progress.update(task, completed=_read(lines))
    except _BadLine as bad:
        before = f"; the lines before {resume} were" if resume > start else ""
        raise DittoError(
            f"line {bad.number}: {bad.reason} (nothing of its batch was imported{before}: "
            f"fix the line and import again --resume-from {resume})",
            code=bad.code,
        ) from None


class _Checks:
    """What every line is checked for before it is stored (over the whole input)."""

    def __init__(self, overwrite: bool) -> None:
        self.overwrite = overwrite
        self.lines_of: dict[str, int] = {}
        """Record id -> the line that holds it."""

    async def check(self, store: MemoryStore, chunk: list[Line]) -> None:
        """Refuse a record that is on two lines, that the store holds in a state it changed
        since (unless ``overwrite``), or that takes a key another record holds."""
        records = [(number, line.record) for number, line in chunk if line.record is not None]
        for number, record in records:
            first = self.lines_of.setdefault(record.id, number)
            if first != number:
                raise _BadLine(number, f"record {record.id} is also on line {first}")
        if not self.overwrite:
            held = {item.id: item for item in await store.get([r.id for _, r in records], [], "")}
            _changed_in_store(held, records)
        await _check(store, chunk)


def _changed_in_store(held: dict[str, MemoryItem], records: list[tuple[int, MemoryItem]]) -> None:
    """Refuse a record the store changed since the file was written."""
    from workers.memory.maintenance.transfer import held_differently

    for number, record in records:
        stored = held.get(record.id)
        reason = None if stored is None else held_differently(stored, record)
        if reason is not None:
            raise _BadLine(
                number,
                f"record {record.id}: {reason} (pass --overwrite to replace it with the file's)",
                ErrorCode.CONFLICT,
            )


async def _check(store: MemoryStore, chunk: list[Line]) -> None:
    """Refuse a record that takes a key another record holds (in the store, or earlier in the
    chunk): storing it would fail half way through. Only active records hold their key
    (superseded, contested and quarantined ones share it with the one that holds it)."""
    keys: dict[str, dict[str, tuple[int, str]]] = {}
    statuses: dict[str, str] = {}
    for number, line in chunk:
        record = line.record
        if record is None:
            continue
        statuses[record.id] = record.status
        if record.key is None or record.status != "active":
            continue
        held = keys.setdefault(record.namespace, {})
        if held.get(record.key, (0, record.id))[1] != record.id:
            raise _BadLine(
                number,
                f"key {record.key!r} in namespace {record.namespace!r} is also another "
                f"record's, on line {held[record.key][0]}",
                ErrorCode.CONFLICT,
            )
        held[record.key] = (number, record.id)
    for namespace, held in keys.items():
        for item in await store.get([], list(held), namespace):
            assert item.key is not None
            number, id = held[item.key]
            # A holder this chunk stores as superseded (or contested, ...) lets go of the key.
            if (
                item.id != id
                and item.status == "active"
                and statuses.get(item.id, "active") == "active"
            ):
                raise _BadLine(
                    number,
                    f"key {item.key!r} in namespace {namespace!r} belongs to another record "
                    f"in the store ({item.id})",
                    ErrorCode.CONFLICT,
                )


async def _stored(store: MemoryStore, chunk: list[Line], tally: _Tally) -> None:
    """:func:`_store`, its failure naming the line to resume from (what came before stays)."""
    try:
        await _store(store, chunk, tally)
    except DittoError as exc:
        first = chunk[0][0]
        raise DittoError(
            f"{exc.message} (storing lines {first}-{chunk[-1][0]}; the lines before {first} "
            f"were imported: import again --resume-from {first})",
            code=exc.code,
            retryable=exc.retryable,
        ) from exc


async def _store(store: MemoryStore, chunk: list[Line], tally: _Tally) -> None:
    """Store a chunk as a copy would, except that a record the store holds differently is
    replaced (the file is what the user asked for; :func:`_check` refused key conflicts)."""
    from workers.memory.maintenance.transfer import Page, TransferCounts, write_page

    page = Page(
        records=[line.record for _, line in chunk if line.record is not None],
        entries=[line.entry for _, line in chunk if line.entry is not None],
    )
    counts = TransferCounts()
    await write_page(store, page, counts, overwrite=True)
    tally.lines += len(chunk)
    tally.new += counts.new
    tally.replaced += counts.updated + counts.overwritten
    tally.unchanged += counts.unchanged
    tally.history_added += counts.history_added
    tally.history_held += counts.history_held
