"""Change detection: what a person (or ``git``) did to the folder since the store last looked.

Every operation begins with :meth:`FolderScan.sync`: one ``stat`` per record file; a file
whose size or modification time changed is read and hashed, and a changed hash makes it a
change. The store tells its own writes — and those of other stores on the folder — from a
person's edits by the version: every store write raises it, a person's edit leaves it as it
was. So a file whose version is above the one the store knows is adopted as is; one that
differs at the same version is a person's edit, which becomes a new version (``source:
file``, unless the edit set another source) with an ``update`` entry in the history, and the
file is rewritten in the store's format. A new file without an ``id`` is a person's record: it
gets an id (and a ``create`` entry); a file that vanished is a ``delete``. The history's last
entry of each record is what the store last wrote, so edits made while no store ran are found
too. A file that cannot be read is logged with its path and left out, never deleted.

Limits, by design of plain files: an editor takes no lock, so an edit saved while the store
rewrites that very file may be lost (the store's rename wins; the next scan sees the store's
version). A copy of a record's file (``cp coffee.md tea.md``) becomes a record of its own: a new
id, keyed by its file name unless its key line was changed.
"""

from __future__ import annotations

import contextlib
import logging
import os
from datetime import datetime
from typing import Any

import msgspec

from workers.memory.model.changes import ENDINGS
from workers.memory.model.contracts import HistoryEntry, MemoryItem
from workers.memory.model.planning import history_entry
from workers.memory.model.records import new_id, now_from
from workers.memory.stores.markdown.fileformat import (
    MalformedFileError,
    RecordFile,
    parse,
    to_item,
)
from workers.memory.stores.markdown.files import recover
from workers.memory.stores.markdown.layout import (
    SUFFIX,
    decode_name,
    is_record_file,
    is_temp_file,
    record_path,
)
from workers.memory.stores.markdown.state import FileState, FolderState, digest_of

__all__ = ("FolderScan",)

logger = logging.getLogger("workers.memory.stores.markdown")

_encode = msgspec.json.Encoder()
_decode_text = msgspec.json.Decoder(str)


class FolderScan(FolderState):
    """Brings a :class:`FolderState` up to date with the files (call it holding the lock)."""

    _synced = False

    def sync(self) -> None:
        """Replay a crashed batch, catch up with the history and the vectors, and take in
        every change made to the files since the last look (see the module docstring)."""
        recover(self.root)
        self.refresh_history()
        self.vectors.refresh()
        now = now_from(self._clock)
        seen: dict[str, FileState] = {}
        found: set[str] = set()
        edited: list[MemoryItem] = []
        entries: list[HistoryEntry] = []
        for folder in sorted(os.scandir(self.root), key=lambda entry: entry.name):
            if folder.name.startswith(".") or not folder.is_dir(follow_symlinks=False):
                # .ditto, .git, files beside the folders (a README) are not records; nor is
                # what a symbolic link points to, which may be anywhere.
                continue
            for file in sorted(os.scandir(folder.path), key=lambda entry: entry.name):
                relative = f"{folder.name}/{file.name}"
                if is_temp_file(file.name):  # a batch that crashed before its commit point
                    with contextlib.suppress(FileNotFoundError):
                        os.unlink(file.path)
                    continue
                if not is_record_file(file.name) or not file.is_file(follow_symlinks=False):
                    continue
                state = self._look(relative, folder.name, file, now, found, edited, entries)
                if state is not None:
                    seen[relative] = state
                    if state.id is not None:
                        found.add(state.id)
        for relative in self.files.keys() - seen.keys():
            self._vanished(relative, found, now, entries)
        if not self._synced:  # deleted while no store watched: the history still holds them
            self._synced = True
            for item_id, last in self.last.items():
                gone = item_id not in found and last.change not in ENDINGS
                if gone and record_path(last.record) not in seen:
                    entries.append(history_entry(last.record, "delete", now))
        self.files = seen
        if edited or entries:  # rewritten in the store's format, moved where its key says
            self.save(edited, entries)

    def _look(
        self,
        relative: str,
        folder: str,
        file: os.DirEntry[str],
        now: datetime,
        found: set[str],
        edited: list[MemoryItem],
        entries: list[HistoryEntry],
    ) -> FileState | None:
        try:
            stat = file.stat()
            known = self.files.get(relative)
            if known is not None and (known.mtime_ns, known.size) == (
                stat.st_mtime_ns,
                stat.st_size,
            ):
                return known
            with open(file.path, "rb") as handle:
                data = handle.read()
        except FileNotFoundError:  # deleted while we looked: the next scan sees it gone
            return None
        digest = digest_of(data)
        if known is not None and known.digest == digest:
            return FileState(stat.st_mtime_ns, stat.st_size, digest, known.id)
        try:
            item, change = self._reconcile(relative, folder, parse(data), now, found)
        except MalformedFileError as exc:
            logger.warning("skipping the memory file %s: %s", self.root / relative, exc)
            if known is not None and known.id is not None and self.paths.get(known.id) == relative:
                self.drop(known.id)  # hidden until the file reads again; never a deletion
            return FileState(stat.st_mtime_ns, stat.st_size, digest, None)
        self.put(item, relative)
        if change is not None:
            edited.append(item)
            entries.append(history_entry(item, change, now))
        return FileState(stat.st_mtime_ns, stat.st_size, digest, item.id)

    def _reconcile(
        self, relative: str, folder: str, parsed: RecordFile, now: datetime, found: set[str]
    ) -> tuple[MemoryItem, Any]:
        """The record a changed file holds, and the history change it makes (``None``: none,
        it is the store's own write)."""
        fields = dict(parsed.fields)
        item_id = _text_field(fields, "id")
        last = self.last.get(item_id) if item_id is not None else None
        if item_id is not None and self._copied(item_id, relative, last):
            # A person's copy of another record's file: a new record of its own, keyed by
            # its file name unless its key line was changed too.
            original = _text_field(fields, "key")
            for name in _NOT_COPIED:
                fields.pop(name, None)
            if original is not None and original == self._key_of(item_id, last):
                del fields["key"]
            return self._checked(
                self._created(relative, folder, fields, parsed, now, None)
            ), "create"
        if item_id is not None and item_id in found:
            raise MalformedFileError(f"another file holds record {item_id!r} too")
        base = self.items.get(item_id) if item_id is not None else None
        if base is None and last is not None and last.change not in ENDINGS:
            base = last.record
        if base is not None:
            merged = {**_fields_of(base), **fields}
            item = to_item(merged, parsed.content)
            if item == base or item.version > base.version or _usage_only(item, base):
                # Another store's write, checked by it. Not checked here: the key's former
                # holder may be in a file this scan has not reached yet. Usage counters are
                # no edit: they change without a version or a history entry (a record
                # imported with its usage differs so from its last history entry).
                return item, None
            source = "file" if item.source == base.source else item.source
            edit = msgspec.structs.replace(
                item, version=base.version + 1, updated_at=now, source=source
            )
            return self._checked(edit), "update"
        if item_id is not None and "version" in fields and (last is None):
            return to_item(fields, parsed.content), None  # a record another store restored
        return self._checked(self._created(relative, folder, fields, parsed, now, last)), "create"

    def _copied(self, item_id: str, relative: str, last: HistoryEntry | None) -> bool:
        """Whether the file ``relative`` copies record ``item_id``, which still lives in its
        own file (a record that moved — renamed by a person, or superseded — is no copy)."""
        home = self.paths.get(item_id)
        if home is None and last is not None and last.change not in ENDINGS:
            home = record_path(last.record)
        if home is None or home == relative:
            return False
        try:
            return _text_field(dict(parse((self.root / home).read_bytes()).fields), "id") == item_id
        except (OSError, MalformedFileError):
            return False

    def _key_of(self, item_id: str, last: HistoryEntry | None) -> str | None:
        known = self.items.get(item_id)
        if known is not None:
            return known.key
        return None if last is None else last.record.key

    def _created(
        self,
        relative: str,
        folder: str,
        fields: dict[str, bytes],
        parsed: RecordFile,
        now: datetime,
        last: HistoryEntry | None,
    ) -> MemoryItem:
        """A person's new record (or a deleted one brought back, by ``git`` say)."""
        namespace = decode_name(folder)
        if "namespace" not in fields and namespace is None:
            raise MalformedFileError("the folder name is not a namespace; give 'namespace'")
        stem = relative.rsplit("/", 1)[1][: -len(SUFFIX)]
        when = _encode.encode(now)
        defaults: dict[str, bytes] = {
            "id": _encode.encode(new_id()),
            "key": _encode.encode(decode_name(stem)),
            "namespace": _encode.encode(namespace),
            "summary": b"null",
            "category": b'"core"',
            "tags": b"[]",
            "metadata": b"{}",
            "source": b'"file"',
            "created_at": when,
            "updated_at": when,
            "version": b"1" if last is None else str(last.version + 1).encode(),
            "usage_count": b"0",
            "last_used_at": b"null",
        }
        forced = {"updated_at": when}
        if last is not None:  # brought back: a new version after the deleted one
            forced["version"] = str(last.version + 1).encode()
        return to_item({**defaults, **fields, **forced}, parsed.content)

    def _checked(self, item: MemoryItem) -> MemoryItem:
        if item.key is not None and item.status == "active":
            holder = self.holder(item.namespace, item.key)
            if holder is not None and holder != item.id:
                raise MalformedFileError(f"record {holder!r} holds key {item.key!r} already")
        return item

    def _vanished(
        self, relative: str, found: set[str], now: datetime, entries: list[HistoryEntry]
    ) -> None:
        state = self.files[relative]
        if state.id is None or state.id in found or self.paths.get(state.id) != relative:
            return  # unreadable, or the record moved to another file
        item = self.drop(state.id)
        last = self.last.get(state.id)
        if item is not None and (last is None or last.change not in ENDINGS):
            entries.append(history_entry(item, "delete", now))


def _usage_only(item: MemoryItem, base: MemoryItem) -> bool:
    """Whether ``item`` is ``base`` with other usage counters."""
    unused = {"usage_count": 0, "last_used_at": None}
    return msgspec.structs.replace(item, **unused) == msgspec.structs.replace(base, **unused)


_NOT_COPIED = (
    "id",
    "version",
    "created_at",
    "updated_at",
    "source",
    "usage_count",
    "last_used_at",
    "archived_at",
    "status",
    "valid_to",
    "supersedes",
    "contests",
    "sources",
)
"""Front matter a copied file does not take over from the record it copies."""


def _text_field(fields: dict[str, bytes], name: str) -> str | None:
    raw = fields.get(name)
    if raw is None or raw == b"null":
        return None
    try:
        return _decode_text.decode(raw)
    except msgspec.DecodeError as exc:
        raise MalformedFileError(f"{name}: {exc}") from None


def _fields_of(item: MemoryItem) -> dict[str, bytes]:
    values = msgspec.to_builtins(item)
    return {name: _encode.encode(value) for name, value in values.items() if name != "content"}
