"""An append-only JSON-lines log beside the records (history, audit), mirrored in memory.

Every store on the folder appends under the folder's lock, so a store brings its copy up to
date by reading what was appended since it last looked (the file only grows; if it shrank —
an audit purge, a ``git checkout`` — it is read again from the start). A line that is not an
entry (a person's slip) is logged with its line number and skipped.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Generic, TypeVar

import msgspec

__all__ = ("JsonLog",)

logger = logging.getLogger("workers.memory.stores.markdown")

T = TypeVar("T")


class JsonLog(Generic[T]):
    """The entries of one ``.jsonl`` file.

    Args:
        path: The file (it may not exist yet: an empty log).
        type: The type of an entry.
    """

    def __init__(self, path: Path, type: type[T]) -> None:
        self.path = path
        self.entries: list[T] = []
        self._decode = msgspec.json.Decoder(type)
        self._read_to = 0
        self._lines = 0
        self._inode: int | None = None

    def refresh(self) -> list[T]:
        """Read what was appended since the last look.

        Returns:
            The new entries (all of them after a re-read from the start: check
            :attr:`entries`).
        """
        try:
            stat = self.path.stat()
            size, inode = stat.st_size, stat.st_ino
        except FileNotFoundError:
            size, inode = 0, None
        if inode != self._inode:  # replaced (a purge writes a new file): read it all
            self._inode, self._read_to = inode, -1
        if size == self._read_to:
            return []
        if size < self._read_to or self._read_to < 0:
            self.entries, self._read_to, self._lines = [], 0, 0
        if size == 0:
            return []
        with open(self.path, "rb") as file:
            file.seek(self._read_to)
            data = file.read(size - self._read_to)
        whole = data[: data.rfind(b"\n") + 1]  # a torn last line waits for its end
        added = []
        for line in whole.splitlines():
            self._lines += 1
            if not line.strip():
                continue
            try:
                added.append(self._decode.decode(line))
            except msgspec.DecodeError as exc:
                logger.warning("skipping line %d of %s: %s", self._lines, self.path, exc)
        self._read_to += len(whole)
        self.entries.extend(added)
        return added

    def mark_appended(self, entries: list[T], size: int) -> None:
        """Count entries this store appended itself (the file is now ``size`` bytes)."""
        self.entries.extend(entries)
        self._read_to = size
        self._lines += len(entries)
        self._inode = self.path.stat().st_ino

    def reset(self) -> None:
        """Forget everything: the next :meth:`refresh` reads the file from the start."""
        self.entries, self._read_to, self._lines = [], 0, 0
