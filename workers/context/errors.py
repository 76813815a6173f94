"""The error the CONTEXT worker raises (its codes are in :class:`ditto.errors.ErrorCode`)."""

from __future__ import annotations

from ditto.errors import DittoError, ErrorCode

__all__ = ("ContextError",)


class ContextError(DittoError):
    """A CONTEXT failure with a stable code and a message safe to show."""

    def __init__(self, code: ErrorCode, message: str, *, retryable: bool = False) -> None:
        super().__init__(message, code=code, retryable=retryable)
