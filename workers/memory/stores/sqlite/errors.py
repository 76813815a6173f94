"""The SQLite store's one driver-error boundary (httpcore's ``map_exceptions`` shape).

Every call into sqlite3 — opening, migrating, reading, writing, ranking vectors — is awaited
through :func:`sqlite_errors`, a :class:`~ditto.errors.map_exceptions` table that turns the
driver's failures into coded :class:`~workers.memory.model.errors.MemoryStoreError` s that name
the file (a local path holds no secret) and chains the driver's exception (``from exc``) so the
log keeps the cause. Errors it does not know (a bug of ours, say) pass through untouched: the
worker reports them as ``MEMORY_BACKEND_ERROR`` and logs them.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from ditto.errors import ErrorCode, map_exceptions
from workers.memory.model.errors import MemoryStoreError

__all__ = ("StoreVanishedError", "cannot_create", "no_folder", "sqlite_errors")

# Primary result codes (https://sqlite.org/rescode.html); extended codes keep them in the low
# byte, so SQLITE_READONLY_DBMOVED is still READONLY.
_PERM, _BUSY, _LOCKED, _READONLY, _IOERR, _CORRUPT, _FULL, _CANTOPEN = 3, 5, 6, 8, 10, 11, 13, 14
_NOTADB = 26

_LOCKED_BY_ANOTHER = (
    "the memory store at {path} is locked by another connection; try again",
    ErrorCode.STORE_TIMEOUT,
    True,
)
_NOT_A_STORE = (
    "{path} is not a memory store: the file is not an SQLite database or is damaged",
    ErrorCode.STORE_CORRUPT,
    False,
)
_BY_RESULT_CODE: dict[int, tuple[str, ErrorCode, bool]] = {
    _BUSY: _LOCKED_BY_ANOTHER,
    _LOCKED: _LOCKED_BY_ANOTHER,
    _READONLY: ("the memory store at {path} is read-only", ErrorCode.STORE_READ_ONLY, False),
    _CORRUPT: _NOT_A_STORE,
    _NOTADB: _NOT_A_STORE,
    _CANTOPEN: (
        "cannot open the memory store at {path} (a folder, a missing folder, or no permission)",
        ErrorCode.STORE_UNAVAILABLE,
        False,
    ),
    _PERM: ("no permission to use the memory store at {path}", ErrorCode.STORE_UNAVAILABLE, False),
    _FULL: (
        "the disk holding the memory store at {path} is full",
        ErrorCode.STORE_UNAVAILABLE,
        False,
    ),
    _IOERR: (
        "reading or writing the memory store at {path} failed (disk I/O error)",
        ErrorCode.STORE_UNAVAILABLE,
        True,
    ),
}
"""Result code -> (message, code, retryable). A code not listed is not the driver's to explain:
the failure reaches the worker as it is."""


def _not_unicode(exc: UnicodeEncodeError) -> MemoryStoreError:
    # sqlite3 binding a lone surrogate
    return MemoryStoreError("text that is not valid Unicode cannot be stored or looked up")


def sqlite_errors(path: Path) -> map_exceptions:
    """The boundary of the store file at ``path`` (``with sqlite_errors(path):``): driver
    failures as coded store errors that name the file. It holds nothing but its table, so a
    store builds it once and enters it on every call."""

    def driver_error(exc: sqlite3.Error) -> MemoryStoreError | None:
        found = _BY_RESULT_CODE.get((getattr(exc, "sqlite_errorcode", None) or 0) & 0xFF)
        if found is None:
            return None
        message, code, retryable = found
        return MemoryStoreError(message.format(path=path), code=code, retryable=retryable)

    return map_exceptions({UnicodeEncodeError: _not_unicode, sqlite3.Error: driver_error})


def cannot_create(path: Path, exc: OSError) -> MemoryStoreError:
    """``STORE_UNAVAILABLE``: the folder of a new store file cannot be made."""
    reason = exc.strerror or type(exc).__name__
    return MemoryStoreError(
        f"cannot create the memory store at {path}: {reason}", code=ErrorCode.STORE_UNAVAILABLE
    )


def no_folder(path: Path) -> MemoryStoreError:
    """``STORE_UNAVAILABLE``: the folder of the store file does not exist (and may not be made)."""
    return MemoryStoreError(
        f"no folder {path.parent} for the memory store at {path}", code=ErrorCode.STORE_UNAVAILABLE
    )


class StoreVanishedError(MemoryStoreError):
    """``STORE_UNAVAILABLE``: the store's file was deleted, moved or replaced while it was open
    (the path no longer names the file the store opened). Nothing the failing call asked for
    was written; reopen the store."""

    default_code: str = ErrorCode.STORE_UNAVAILABLE

    def __init__(self, path: Path) -> None:
        super().__init__(
            f"the memory store file {path} was deleted, moved or replaced while open: nothing "
            "more is read from it or written to it (reopen the store)"
        )
