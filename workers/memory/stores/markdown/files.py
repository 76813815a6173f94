"""All-or-nothing batches of file changes: temporary files, a journal, renames.

A batch writes every new file as a hidden temporary file beside its target (same folder, so
the rename cannot cross file systems) and fsyncs it. Then the **journal** — the renames, the
deletions and the history lines to append — is written to a temporary file, fsynced and
renamed to ``.ditto/journal.json``: that rename is the commit point. Only then are the
temporary files renamed over their targets (``os.replace``, atomic on POSIX), the old files
deleted, the folders fsynced, the history appended, and the journal removed.

A crash (``kill -9``, power loss) before the commit point leaves the old files and some
temporary files, which the next scan deletes: the batch never happened. A crash after it leaves
a journal, which the next operation of any store on the folder replays: every rename whose
temporary file still exists is done, every deletion redone, and the history truncated back to
where the batch began and appended again, so replaying twice changes nothing. Each file is, at
every moment, either its old or its new version; only between the commit point and the replay
may a reader that does not replay (``cat``, ``git``) see some files new and others old.
"""

from __future__ import annotations

import contextlib
import os
import secrets
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import msgspec

from workers.memory.stores.markdown.layout import JOURNAL_FILE, STATE_DIR, TEMP_SUFFIX

__all__ = ("Batch", "append_lines", "atomic_write", "commit", "fsync_dir", "recover")


@dataclass(slots=True)
class Batch:
    """The file changes of one operation, relative to the store's folder."""

    writes: dict[str, bytes] = field(default_factory=dict)
    deletes: list[str] = field(default_factory=list)
    log: str | None = None
    """The log (``.ditto/...``) that ``lines`` are appended to."""
    lines: bytes = b""


class _Journal(msgspec.Struct, frozen=True):
    renames: list[tuple[str, str]]
    deletes: list[str]
    log: str | None
    offset: int
    lines: str


_encode = msgspec.json.Encoder()
_decode_journal = msgspec.json.Decoder(_Journal)


def fsync_dir(folder: Path) -> None:
    """Make a rename or deletion in ``folder`` durable."""
    descriptor = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


def _temp_for(target: Path) -> Path:
    return target.with_name(f".{target.name}.{secrets.token_hex(4)}{TEMP_SUFFIX}")


def _write_synced(path: Path, data: bytes) -> None:
    with open(path, "xb") as file:
        file.write(data)
        file.flush()
        os.fsync(file.fileno())


def _make_folder(folder: Path) -> None:
    if not folder.is_dir():
        folder.mkdir(parents=True, exist_ok=True)
        fsync_dir(folder.parent)


def atomic_write(target: Path, data: bytes) -> None:
    """Replace ``target`` with ``data`` at once: a temporary file, fsync, rename, fsync."""
    temp = _temp_for(target)
    try:
        _write_synced(temp, data)
        os.replace(temp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            temp.unlink()
        raise
    fsync_dir(target.parent)


def commit(root: Path, batch: Batch) -> None:
    """Apply ``batch`` all or nothing (see the module docstring).

    Raises:
        OSError: Before the commit point nothing has changed (the temporary files are gone);
            after it, the journal stays and the next :func:`recover` completes the batch.
    """
    renames: list[tuple[str, str]] = []
    temps: list[Path] = []
    try:
        for relative, data in batch.writes.items():
            target = root / relative
            _make_folder(target.parent)
            temp = _temp_for(target)
            temps.append(temp)
            _write_synced(temp, data)
            renames.append((temp.relative_to(root).as_posix(), relative))
        offset = 0
        if batch.log is not None:
            with contextlib.suppress(FileNotFoundError):
                offset = (root / batch.log).stat().st_size
        journal = _Journal(renames, list(batch.deletes), batch.log, offset, batch.lines.decode())
        atomic_write(root / STATE_DIR / JOURNAL_FILE, _encode.encode(journal))
    except BaseException:
        for temp in temps:
            with contextlib.suppress(OSError):
                temp.unlink()
        raise
    _replay(root, journal)


def recover(root: Path) -> bool:
    """Complete the batch a crashed writer committed, if any (call it holding the lock).

    Returns:
        Whether there was one.
    """
    for leftover in (root / STATE_DIR).glob(f".*{TEMP_SUFFIX}"):  # a journal never committed
        with contextlib.suppress(FileNotFoundError):
            leftover.unlink()
    try:
        data = (root / STATE_DIR / JOURNAL_FILE).read_bytes()
    except FileNotFoundError:
        return False
    _replay(root, _decode_journal.decode(data))
    return True


def _replay(root: Path, journal: _Journal) -> None:
    folders: set[Path] = set()
    for temp, target in journal.renames:
        with contextlib.suppress(FileNotFoundError):  # renamed before the crash
            os.replace(root / temp, root / target)
        folders.add((root / target).parent)
    for relative in journal.deletes:
        with contextlib.suppress(FileNotFoundError):
            (root / relative).unlink()
        folders.add((root / relative).parent)
    for folder in sorted(folders):
        fsync_dir(folder)
    if journal.log is not None:
        _append_at(root / journal.log, journal.offset, journal.lines.encode())
    (root / STATE_DIR / JOURNAL_FILE).unlink()
    fsync_dir(root / STATE_DIR)


def _append_at(path: Path, offset: int, data: bytes) -> None:
    """Write ``data`` at ``offset`` and cut the file there: appending again after a crash
    that appended part of it leaves it appended once."""
    with open(path, "ab") as file:
        file.truncate(offset)
        file.write(data)
        file.flush()
        os.fsync(file.fileno())


def append_lines(path: Path, lines: Iterable[bytes]) -> None:
    """Append whole lines to a log, cutting a torn last line a crash left first."""
    data = b"".join(lines)
    with open(path, "a+b") as file:
        size = file.seek(0, os.SEEK_END)
        if size:
            file.seek(max(size - 1, 0))
            if file.read(1) != b"\n":
                file.seek(0)
                kept = file.read().rfind(b"\n") + 1
                file.truncate(kept)
        file.write(data)
        file.flush()
        os.fsync(file.fileno())
