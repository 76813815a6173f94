"""The Markdown store's one error boundary: file system failures as coded store errors that
name the folder (a local path holds no secret), chained ``from`` the ``OSError``."""

from __future__ import annotations

import errno
from pathlib import Path

from ditto.errors import ErrorCode, map_exceptions
from workers.memory.model.errors import MemoryStoreError

__all__ = ("file_errors",)


def file_errors(root: Path) -> map_exceptions:
    """The boundary of the store folder ``root`` (``with file_errors(root):``)."""

    def no_permission(exc: PermissionError) -> MemoryStoreError:
        return MemoryStoreError(
            f"no permission to write the memory folder {root}", code=ErrorCode.STORE_READ_ONLY
        )

    def os_error(exc: OSError) -> MemoryStoreError:
        if exc.errno == errno.ENOSPC:
            reason = "the disk is full"
        elif exc.errno == errno.EROFS:
            return MemoryStoreError(
                f"the memory folder {root} is on a read-only file system",
                code=ErrorCode.STORE_READ_ONLY,
            )
        else:
            reason = exc.strerror or type(exc).__name__
        return MemoryStoreError(
            f"reading or writing the memory folder {root} failed: {reason}",
            code=ErrorCode.STORE_UNAVAILABLE,
            retryable=exc.errno not in (errno.ENOSPC, errno.ENOENT, errno.ENOTDIR),
        )

    return map_exceptions({PermissionError: no_permission, OSError: os_error})
