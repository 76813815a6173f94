"""The RETRIEVAL worker's errors and its one boundary with providers.

A provider raises coded :class:`~ditto.errors.DittoError`s; the boundary keeps their codes,
renames the two the MEMORY pipeline speaks in (``SEARCH_UNAVAILABLE`` is a strategy this target
cannot run; ``MEMORY_BACKEND_ERROR`` a provider failure), and turns anything uncoded into
``RETRIEVAL_BACKEND_ERROR`` with a fixed message, the cause kept for the log.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable
from typing import TypeVar

from ditto.errors import DittoError, ErrorCode

__all__ = ("RetrievalError", "invalid", "provider_boundary", "unsupported")

logger = logging.getLogger("ditto.workers.retrieval")

T = TypeVar("T")


class RetrievalError(DittoError):
    """A RETRIEVAL failure with a stable code and a message safe to show."""

    default_code: str = ErrorCode.INVALID_INPUT


def invalid(message: str) -> RetrievalError:
    return RetrievalError(message, code=ErrorCode.INVALID_INPUT)


def unsupported(message: str) -> RetrievalError:
    return RetrievalError(message, code=ErrorCode.RETRIEVAL_STRATEGY_UNSUPPORTED)


_RENAMED: dict[str, ErrorCode] = {
    ErrorCode.SEARCH_UNAVAILABLE: ErrorCode.RETRIEVAL_STRATEGY_UNSUPPORTED,
    ErrorCode.MEMORY_BACKEND_ERROR: ErrorCode.RETRIEVAL_BACKEND_ERROR,
}
"""Codes of the MEMORY pipeline and what they mean to a RETRIEVAL caller."""


async def provider_boundary(call: Awaitable[T]) -> T:
    """``await call``, with the provider's failures as RETRIEVAL codes (see the module).

    Raises:
        DittoError: The provider's coded error (renamed per ``_RENAMED``), or
            ``RETRIEVAL_BACKEND_ERROR`` for anything uncoded.
    """
    try:
        return await call
    except DittoError as exc:
        renamed = _RENAMED.get(exc.code)
        if renamed is None:
            raise
        raise RetrievalError(
            exc.message, code=renamed, retryable=exc.retryable, details=exc.details
        ) from exc
    except Exception as exc:
        logger.exception("retrieval provider failed")
        raise RetrievalError(
            "retrieval provider failed (details in the log)",
            code=ErrorCode.RETRIEVAL_BACKEND_ERROR,
        ) from exc
