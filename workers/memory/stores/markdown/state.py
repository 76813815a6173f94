"""What a Markdown store knows about its folder: the records read from the files, where each
lives, the words each holds, and the history — and how it commits a change to files and log
together."""

from __future__ import annotations

import hashlib
import os
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import msgspec

from workers.memory.model.contracts import AuditEntry, HistoryEntry, MemoryItem
from workers.memory.model.records import Clock, content_text
from workers.memory.retrieval.text import light_stem
from workers.memory.retrieval.text import words as text_words
from workers.memory.stores.markdown.fileformat import render
from workers.memory.stores.markdown.files import Batch, commit
from workers.memory.stores.markdown.jsonlog import JsonLog
from workers.memory.stores.markdown.layout import (
    AUDIT_FILE,
    HISTORY_FILE,
    STATE_DIR,
    VECTOR_FILE,
    record_path,
)
from workers.memory.stores.markdown.vectorlog import VectorLog

__all__ = ("FileState", "FolderState", "clone", "clone_entry", "digest_of")

_encode = msgspec.json.Encoder()
_decode_item = msgspec.json.Decoder(MemoryItem)
_decode_entry = msgspec.json.Decoder(HistoryEntry)


def clone(item: MemoryItem) -> MemoryItem:
    """A deep copy: what the store keeps and what it hands out never share mutable content."""
    return _decode_item.decode(_encode.encode(item))


def clone_entry(entry: HistoryEntry) -> HistoryEntry:
    """A deep copy of a history entry (see :func:`clone`)."""
    return _decode_entry.decode(_encode.encode(entry))


def digest_of(data: bytes) -> bytes:
    """The hash that tells a changed file from a touched one."""
    return hashlib.blake2b(data, digest_size=16).digest()


@dataclass(frozen=True, slots=True)
class FileState:
    """A record file as last read or written: a changed size or modification time makes the
    store read it again, a changed digest makes it a change."""

    mtime_ns: int
    size: int
    digest: bytes
    id: str | None
    """The record the file holds; ``None`` when it cannot be read."""


class FolderState:
    """The records of one folder, as the store last saw them.

    Args:
        root: The store's folder.
        clock: The store's clock.
    """

    def __init__(self, root: Path, clock: Clock) -> None:
        self.root = root
        self._clock = clock
        self.items: dict[str, MemoryItem] = {}
        self.paths: dict[str, str] = {}
        """id -> the file holding the record, relative to ``root``."""
        self.files: dict[str, FileState] = {}
        self.keys: dict[tuple[str, str], set[str]] = {}
        """(namespace, key) -> the ids of every record under it, any status."""
        self.terms: dict[str, Counter[str]] = {}
        self.history: JsonLog[HistoryEntry] = JsonLog(root / STATE_DIR / HISTORY_FILE, HistoryEntry)
        self.audit: JsonLog[AuditEntry] = JsonLog(root / STATE_DIR / AUDIT_FILE, AuditEntry)
        self.vectors = VectorLog(root / STATE_DIR / VECTOR_FILE)
        self.last: dict[str, HistoryEntry] = {}
        """id -> its latest history entry: the record as the store last wrote it."""

    # ----------------------------------------------------------------- lookups

    def ids_with_key(self, namespace: str, key: str) -> list[str]:
        """The active record's id first, then the others sharing the key (sorted)."""
        ids = self.keys.get((namespace, key), set())
        active = [i for i in ids if self.items[i].status == "active"]
        return active[:1] + sorted(i for i in ids if i not in active[:1])

    def holder(self, namespace: str, key: str) -> str | None:
        """The id of the active record holding ``key``, if any."""
        for item_id in self.keys.get((namespace, key), ()):
            if self.items[item_id].status == "active":
                return item_id
        return None

    def refresh_history(self) -> None:
        """Catch up with entries other stores on the folder appended."""
        before = len(self.history.entries)
        added = self.history.refresh()
        if len(self.history.entries) != before + len(added):  # read again from the start
            self.last = {}
            added = self.history.entries
        for entry in added:
            self.last[entry.id] = entry

    # ----------------------------------------------------------------- changes in memory

    def put(self, item: MemoryItem, relative: str) -> None:
        """Know ``item`` (a copy) as held by the file ``relative``, with its words."""
        self.drop(item.id)
        item = clone(item)
        self.items[item.id] = item
        self.paths[item.id] = relative
        if item.key is not None:
            self.keys.setdefault((item.namespace, item.key), set()).add(item.id)
        text = " ".join(filter(None, (item.key, item.summary, content_text(item.content))))
        self.terms[item.id] = Counter(light_stem(word) for word in text_words(text))

    def drop(self, item_id: str) -> MemoryItem | None:
        """Forget a record; the record it was, if known."""
        item = self.items.pop(item_id, None)
        self.paths.pop(item_id, None)
        self.terms.pop(item_id, None)
        if item is not None and item.key is not None:
            place = (item.namespace, item.key)
            sharing = self.keys.get(place)
            if sharing is not None:
                sharing.discard(item_id)
                if not sharing:
                    del self.keys[place]
        return item

    # ----------------------------------------------------------------- changes on disk

    def save(
        self,
        items: Sequence[MemoryItem],
        entries: Sequence[HistoryEntry],
        deleted: Sequence[str] = (),
    ) -> None:
        """Write ``items`` to their files (deleting a file a record moved away from), delete
        the records ``deleted``, and append ``entries`` to the history: one all-or-nothing
        batch (see :mod:`~workers.memory.stores.markdown.files`)."""
        batch = Batch()
        placed = []
        for item in items:
            relative = record_path(item)
            batch.writes[relative] = render(item)
            placed.append((item, relative))
            old = self.paths.get(item.id)
            if old is not None and old != relative:
                batch.deletes.append(old)
        batch.deletes.extend(self.paths[item_id] for item_id in deleted if item_id in self.paths)
        batch.deletes = sorted(set(batch.deletes) - batch.writes.keys())
        if entries:
            batch.log = f"{STATE_DIR}/{HISTORY_FILE}"
            batch.lines = b"".join(_encode.encode(entry) + b"\n" for entry in entries)
        commit(self.root, batch)
        for item_id in deleted:
            self.drop(item_id)
        self.vectors.forget(deleted)
        for relative in batch.deletes:
            self.files.pop(relative, None)
        for item, relative in placed:
            self.put(item, relative)
            data = batch.writes[relative]
            stat = os.stat(self.root / relative)
            self.files[relative] = FileState(
                stat.st_mtime_ns, stat.st_size, digest_of(data), item.id
            )
        if entries:
            # Kept as decoded from the lines written: nothing shared with the caller's drafts.
            kept = [_decode_entry.decode(line) for line in batch.lines.splitlines()]
            self.history.mark_appended(kept, self.history.path.stat().st_size)
            for entry in kept:
                self.last[entry.id] = entry
