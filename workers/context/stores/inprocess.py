"""``InProcessContextStore``: scoped working sets in this process (explicit opt-in for
development and tests), with the Redis store's semantics: TTL, versions, compare-and-set."""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable

from ditto.errors import InvalidInputError
from workers.context.contracts import Context, ContextScope
from workers.context.stores.base import (
    ContextStateStore,
    StoredContext,
    conflict,
    decode_context,
    encode_context,
    new_version,
)

__all__ = ("InProcessContextStore",)


def _monotonic_ms() -> float:
    return time.monotonic() * 1000.0


class InProcessContextStore(ContextStateStore):
    """Working sets in a bounded, least-recently-used map.

    Args:
        ttl_ms: Lifetime of a state after its last write (reads do not extend it).
        max_scopes: Most scopes kept; the least recently used is evicted beyond it.
        clock: Milliseconds on a monotonic clock (tests pass a fake one).
    """

    def __init__(
        self,
        *,
        ttl_ms: int = 3_600_000,
        max_scopes: int = 1000,
        clock: Callable[[], float] = _monotonic_ms,
    ) -> None:
        if isinstance(ttl_ms, bool) or not isinstance(ttl_ms, int) or not 1 <= ttl_ms <= 2**31 - 1:
            raise InvalidInputError("ttl_ms must be an integer from 1 to 2147483647")
        if isinstance(max_scopes, bool) or not isinstance(max_scopes, int) or max_scopes < 1:
            raise InvalidInputError("max_scopes must be a positive integer")
        self._ttl = ttl_ms
        self._max = max_scopes
        self._clock = clock
        # Values are stored encoded, so callers can never mutate stored state through a result.
        self._entries: OrderedDict[str, tuple[str, bytes, float]] = OrderedDict()

    async def get(self, scope: ContextScope) -> StoredContext | None:
        key = self.key(scope)
        entry = self._entries.get(key)
        if entry is None:
            return None
        version, raw, expires = entry
        if expires <= self._clock():
            del self._entries[key]
            return None
        self._entries.move_to_end(key)
        return StoredContext(version, decode_context(raw))

    async def compare_and_set(
        self, scope: ContextScope, expected_version: str | None, context: Context
    ) -> StoredContext:
        key = self.key(scope)
        now = self._clock()
        entry = self._entries.get(key)
        current = entry[0] if entry is not None and entry[2] > now else None
        if current != expected_version:
            raise conflict()
        # Encode before anything changes: a context that cannot be stored leaves the old one.
        encoded = encode_context(context)
        version = new_version()
        self._entries.pop(key, None)
        if len(self._entries) >= self._max:
            for stale in [k for k, (_, _, expires) in self._entries.items() if expires <= now]:
                del self._entries[stale]
        self._entries[key] = (version, encoded, now + self._ttl)
        while len(self._entries) > self._max:
            self._entries.popitem(last=False)
        return StoredContext(version, context)

    def remaining_ms(self, scope: ContextScope) -> float | None:
        """Time to live of a scope's state (like Redis ``PTTL``), ``None`` when absent."""
        entry = self._entries.get(self.key(scope))
        if entry is None or entry[2] <= self._clock():
            return None
        return entry[2] - self._clock()
