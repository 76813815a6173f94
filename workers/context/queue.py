"""An optional per-scope operation queue: calls on one scope run one at a time inside this
process (so concurrent UPDATEs in one process do not conflict), other scopes run freely. It is
not a distributed lock: across processes the store's compare-and-set still decides."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TypeVar

import anyio

from ditto.errors import ErrorCode, InvalidInputError
from workers.context.errors import ContextError

__all__ = ("ScopeQueue",)

T = TypeVar("T")


class ScopeQueue:
    """FIFO per scope key; ``QUEUE_FULL`` once ``max_pending`` calls are running or waiting."""

    def __init__(self, max_pending: int = 1024) -> None:
        if isinstance(max_pending, bool) or not isinstance(max_pending, int) or max_pending < 1:
            raise InvalidInputError("max_pending must be a positive integer")
        self.max_pending = max_pending
        self.pending = 0
        self._locks: dict[str, tuple[anyio.Lock, int]] = {}

    async def run(self, key: str, operation: Callable[[], Awaitable[T]]) -> T:
        if self.pending >= self.max_pending:
            raise ContextError(
                ErrorCode.QUEUE_FULL,
                "too many context operations are waiting",
                retryable=True,
            )
        self.pending += 1
        lock, users = self._locks.get(key, (None, 0))
        if lock is None:
            lock = anyio.Lock()  # anyio's lock is FIFO
        self._locks[key] = (lock, users + 1)
        try:
            async with lock:
                return await operation()
        finally:
            self.pending -= 1
            lock, users = self._locks[key]
            if users == 1:
                del self._locks[key]
            else:
                self._locks[key] = (lock, users - 1)
