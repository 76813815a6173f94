"""The MEMORY worker's boundary with stores and search providers: it trusts neither.

Every output is checked against the node's contract (``INVALID_BACKEND_OUTPUT``), and anything
a store or provider raises that is not a coded :class:`~ditto.errors.DittoError` becomes
``MEMORY_BACKEND_ERROR`` with a fixed message, the cause kept for the log.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from ditto.errors import DittoError, ErrorCode
from ditto.runtime.context import NodeContext
from workers.memory.model.contracts import MemoryItem

__all__ = ("backend_boundary", "check_items", "off_contract")

logger = logging.getLogger("ditto.workers.memory")

T = TypeVar("T")


class _BackendOutputError(DittoError):
    default_code = ErrorCode.INVALID_BACKEND_OUTPUT


def off_contract(what: str) -> _BackendOutputError:
    return _BackendOutputError(f"the memory backend returned an invalid result: {what}")


Handler = Callable[[Any, NodeContext], Awaitable[T]]


def backend_boundary(handler: Handler[T]) -> Handler[T]:
    """Keep coded errors; report anything else a store or provider raised as
    ``MEMORY_BACKEND_ERROR`` with a fixed message (the cause goes to the log)."""

    @functools.wraps(handler)
    async def run(request: Any, ctx: NodeContext) -> T:
        try:
            return await handler(request, ctx)
        except DittoError:
            raise
        except Exception as exc:
            logger.exception("memory backend operation failed")
            raise DittoError(
                "memory backend operation failed", code=ErrorCode.MEMORY_BACKEND_ERROR
            ) from exc

    return run


def check_items(items: object, what: str, *, unique: bool = True) -> list[MemoryItem]:
    """``items`` if it is a list of records (each once, when ``unique``).

    Raises:
        DittoError: ``INVALID_BACKEND_OUTPUT`` naming ``what``.
    """
    if not isinstance(items, list) or not all(isinstance(item, MemoryItem) for item in items):
        raise off_contract(f"{what} must be a list of MemoryItem")
    ids = [item.id for item in items]
    if unique and len(set(ids)) != len(ids):
        raise off_contract(f"{what} repeats a record")
    return items
