"""``recency_search``: the handbook's ``recent-keyword`` strategy.

Keyword candidates from the store, re-ranked by age: ``score = 1 / (1 + age_days)`` where the
age comes from ``metadata["saved_at"]`` or the handbook's ``savedAt`` (an ISO 8601 time; missing
or unparsable scores 0). It only re-orders what the store returned, so it cannot promise the
newest relevant records of a whole corpus: it looks at ``min(limit * 4, 100)`` candidates.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

import msgspec

from ditto.runtime.context import NodeContext
from workers.memory.model.contracts import SearchHit, SearchInput
from workers.memory.model.errors import MemoryStoreError, SearchUnavailableError
from workers.memory.ports import KeywordSearch, MemoryStore

__all__ = ("STRATEGY", "RecencySearch", "recency_search")

STRATEGY = "recent-keyword"
_DAY_SECONDS = 86_400.0
_MAX_CANDIDATES = 100


class RecencySearch:
    """A :class:`~workers.memory.ports.MemorySearchProvider`; build it with
    :func:`recency_search`."""

    def __init__(self, store: MemoryStore, now: Callable[[], datetime]) -> None:
        self._store = store
        self._now = now

    async def search(self, input: SearchInput, ctx: NodeContext) -> list[SearchHit]:
        if input.strategy != STRATEGY or not isinstance(input.query, str):
            raise MemoryStoreError(f"expected strategy {STRATEGY!r} and a text query")
        if input.options:
            raise MemoryStoreError(f"{STRATEGY!r} takes no options")
        if not isinstance(self._store, KeywordSearch):
            raise SearchUnavailableError()
        limit = input.limit or 10
        candidates = await self._store.search(
            msgspec.structs.replace(
                input, strategy="keyword", limit=min(limit * 4, _MAX_CANDIDATES)
            ),
            ctx,
        )
        now = self._now()
        rescored = [
            msgspec.structs.replace(hit, score=_freshness(_saved_at(hit.memory.metadata), now))
            for hit in candidates
        ]
        rescored.sort(key=lambda hit: (-(hit.score or 0.0), hit.memory.id))
        return rescored[:limit]


def _saved_at(metadata: dict[str, object]) -> object:
    """``saved_at``, or the handbook's ``savedAt`` (the reference's spelling)."""
    return metadata.get("saved_at", metadata.get("savedAt"))


def _freshness(saved_at: object, now: datetime) -> float:
    if not isinstance(saved_at, str):
        return 0.0
    try:
        moment = datetime.fromisoformat(saved_at)
    except ValueError:
        return 0.0
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    age_days = max(0.0, (now - moment).total_seconds() / _DAY_SECONDS)
    return 1.0 / (1.0 + age_days)


def recency_search(store: MemoryStore, now: datetime | None = None) -> RecencySearch:
    """Re-rank ``store``'s keyword hits by recency.

    Args:
        store: A store with keyword search.
        now: A fixed evaluation time (for reproducible results); default the current time.
    """
    if now is not None and now.tzinfo is None:
        raise ValueError("now must be timezone-aware")
    return RecencySearch(store, (lambda: now) if now is not None else (lambda: datetime.now(UTC)))
