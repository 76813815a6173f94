"""The SQLite store's one driver-error boundary (httpcore's ``map_exceptions`` shape).

Every call into sqlite3 — opening, migrating, reading, writing, ranking vectors — is awaited
through :func:`sqlite_errors`, which turns the driver's failures into coded
:class:`~workers.memory.errors.MemoryStoreError` s that name the file (a local path holds no
secret) and chains the driver's exception (``from exc``) so the log keeps the cause. Errors it
does not know (a bug of ours, say) pass through untouched: the worker reports them as
``MEMORY_BACKEND_ERROR`` and logs them.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from workers.memory.errors import MemoryErrorCode, MemoryStoreError

__all__ = ("cannot_create", "sqlite_errors", "translate")

# Primary result codes (https://sqlite.org/rescode.html); extended codes keep them in the low
# byte, so SQLITE_READONLY_DBMOVED is still READONLY.
_PERM, _BUSY, _LOCKED, _READONLY, _IOERR, _CORRUPT, _FULL, _CANTOPEN = 3, 5, 6, 8, 10, 11, 13, 14
_NOTADB = 26


def translate(exc: sqlite3.Error, path: Path) -> MemoryStoreError | None:
    """The store error for a driver failure on the file at ``path``, or ``None`` when the
    failure is not the driver's to explain (it then reaches the worker as it is)."""
    code = (getattr(exc, "sqlite_errorcode", None) or 0) & 0xFF
    if code in (_BUSY, _LOCKED):
        return _error(
            f"the memory store at {path} is locked by another connection; try again",
            MemoryErrorCode.STORE_TIMEOUT,
            retryable=True,
        )
    if code == _READONLY:
        return _error(f"the memory store at {path} is read-only", MemoryErrorCode.STORE_READ_ONLY)
    if code in (_CORRUPT, _NOTADB):
        return _error(
            f"{path} is not a memory store: the file is not an SQLite database or is damaged",
            MemoryErrorCode.STORE_CORRUPT,
        )
    if code == _CANTOPEN:
        return _error(
            f"cannot open the memory store at {path} (a folder, a missing folder, or no "
            "permission)",
            MemoryErrorCode.STORE_UNAVAILABLE,
        )
    if code == _PERM:
        return _error(
            f"no permission to use the memory store at {path}", MemoryErrorCode.STORE_UNAVAILABLE
        )
    if code == _FULL:
        return _error(
            f"the disk holding the memory store at {path} is full",
            MemoryErrorCode.STORE_UNAVAILABLE,
        )
    if code == _IOERR:
        return _error(
            f"reading or writing the memory store at {path} failed (disk I/O error)",
            MemoryErrorCode.STORE_UNAVAILABLE,
            retryable=True,
        )
    return None


def _error(message: str, code: str, *, retryable: bool = False) -> MemoryStoreError:
    return MemoryStoreError(message, code=code, retryable=retryable)


class sqlite_errors:  # lower case: it reads as a function, ``with sqlite_errors(path):``
    """Translate driver failures raised inside the block (see :func:`translate`).

    A class, not ``@contextmanager``: every store call passes through it, and a generator-based
    context manager costs several times more per use."""

    __slots__ = ("path",)

    def __init__(self, path: Path) -> None:
        self.path = path

    def __enter__(self) -> None:
        return None

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, trace: object
    ) -> None:
        if exc is None:
            return
        if isinstance(exc, UnicodeEncodeError):  # sqlite3 binding a lone surrogate
            raise MemoryStoreError(
                "text that is not valid Unicode cannot be stored or looked up"
            ) from exc
        if isinstance(exc, sqlite3.Error):
            translated = translate(exc, self.path)
            if translated is not None:
                raise translated from exc


def cannot_create(path: Path, exc: OSError) -> MemoryStoreError:
    """``STORE_UNAVAILABLE``: the folder of a new store file cannot be made."""
    reason = exc.strerror or type(exc).__name__
    return _error(
        f"cannot create the memory store at {path}: {reason}", MemoryErrorCode.STORE_UNAVAILABLE
    )
