"""Where a Markdown store keeps things: a folder per namespace, a file per record named from
its key, and the store's own files under ``.ditto/``.

File names are percent-encoded: every character outside ``[A-Za-z0-9._-]`` becomes ``%XX`` of
its UTF-8 bytes (a leading ``.`` too, so no record file is hidden and no name is ``.`` or
``..``), which is safe on every file system and reversible. ``~`` never survives the encoding,
so it separates the parts a store adds itself: a record that shares its key with the key's
active record (superseded, contested, quarantined) is ``<key>~<id>.md``, a record without a key
``~<id>.md``, and a name longer than :data:`MAX_STEM` is cut and ends in ``~<hash>``. Such
names are not decoded back: the front matter holds the key and id (it always wins over the
name). Case-insensitive file systems (macOS, Windows) would merge keys differing only in case:
the store targets case-sensitive ones.
"""

from __future__ import annotations

import hashlib
import string
from urllib.parse import unquote

from workers.memory.model.contracts import MemoryItem

__all__ = (
    "AUDIT_FILE",
    "GITIGNORE",
    "HISTORY_FILE",
    "JOURNAL_FILE",
    "MAX_STEM",
    "SECRET_FILE",
    "STATE_DIR",
    "SUFFIX",
    "TEMP_SUFFIX",
    "VECTOR_FILE",
    "decode_name",
    "encode_name",
    "is_record_file",
    "is_temp_file",
    "record_path",
)

STATE_DIR = ".ditto"
"""The store's own files, beside the namespace folders."""
HISTORY_FILE = "history.jsonl"
AUDIT_FILE = "audit.jsonl"
JOURNAL_FILE = "journal.json"
SECRET_FILE = "cursor-secret"
VECTOR_FILE = "vectors.bin"
SUFFIX = ".md"
TEMP_SUFFIX = ".ditto-tmp"
"""Ends the store's temporary files: distinct from an editor's, which the store never touches."""
MAX_STEM = 150
"""Longest encoded file name stem (bytes; most file systems allow 255 for the whole name)."""
GITIGNORE = (
    "# Written by the Markdown memory store: machine state that does not belong in git.\n"
    f"{SECRET_FILE}\n{JOURNAL_FILE}\n*{TEMP_SUFFIX}\n{VECTOR_FILE}\n"
)
"""``.ditto/.gitignore``: records, history and audit are tracked; the cursor key (a secret),
a pending batch's journal, temporary files and the vectors (derived data, rebuilt by
``ditto memory reindex``) are not."""

_SAFE = frozenset(string.ascii_letters + string.digits + "._-")


def encode_name(text: str) -> str:
    """``text`` as a file or folder name (see the module docstring)."""
    encoded = "".join(
        char if char in _SAFE else "".join(f"%{byte:02X}" for byte in _utf8(char)) for char in text
    )
    if encoded.startswith("."):
        encoded = "%2E" + encoded[1:]
    if len(encoded) > MAX_STEM:
        digest = hashlib.sha256(_utf8(text)).hexdigest()[:16]
        # A cut %XX does no harm: a name with ``~`` is never decoded.
        encoded = encoded[: MAX_STEM - 17] + "~" + digest
    return encoded


def _utf8(text: str) -> bytes:
    # A lone surrogate (JSON allows one) still gets a name; such a name is not decoded back.
    return text.encode("utf-8", "surrogatepass")


def decode_name(stem: str) -> str | None:
    """The text ``stem`` encodes; ``None`` for a name the store made up (it holds ``~``)."""
    if "~" in stem or not stem:
        return None
    try:
        return unquote(stem, errors="strict")
    except UnicodeDecodeError:  # a person's name with a stray %XX: not a key
        return None


def record_path(item: MemoryItem) -> str:
    """Where ``item`` lives, relative to the store's folder (``/``-separated)."""
    folder = encode_name(item.namespace)
    if item.key is None:
        return f"{folder}/~{encode_name(item.id)}{SUFFIX}"
    if item.status != "active":
        return f"{folder}/{encode_name(item.key)}~{encode_name(item.id)}{SUFFIX}"
    return f"{folder}/{encode_name(item.key)}{SUFFIX}"


def is_record_file(name: str) -> bool:
    """A record file: a visible ``.md`` file."""
    return name.endswith(SUFFIX) and not name.startswith(".")


def is_temp_file(name: str) -> bool:
    """A temporary file of an unfinished write (hidden, so scans and editors pass it by)."""
    return name.startswith(".") and name.endswith(TEMP_SUFFIX)
