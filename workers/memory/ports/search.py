"""Ranking ports: a store's own keyword search, and the search provider strategy."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from workers.memory.model.contracts import SearchHit, SearchInput, SearchOutput

if TYPE_CHECKING:
    from ditto.runtime.context import NodeContext

__all__ = ("KeywordSearch", "MemorySearchProvider")


class KeywordSearch(ABC):
    """Capability: the store ranks its records by keywords (BM25 or its equivalent)."""

    @abstractmethod
    async def search(self, input: SearchInput, ctx: NodeContext | None = None) -> list[SearchHit]:
        """Rank records for ``input.query`` (strategy ``None`` or ``"keyword"``).

        Words are OR-ed; user text is always data, never query syntax. ``input.filter``
        applies before ``input.limit``. Scores are in [0, 1], higher for better matches, and
        the hybrid fusion reads them as calibrated: a BM25 store reports
        ``search.keyword.calibrated``, ``1 - exp(-bm25 / Σ idf(query terms))`` with Okapi BM25
        (k1 1.2, b 0.75, FTS5's IDF floored just above 0) over its whole index, so one
        ``min_score`` means the same on every store. SQLite uses FTS5's own statistics;
        PostgreSQL computes the same formula over its ``tsvector`` and estimates a frequent
        term's document count, the average record length and, in a large table, the record
        count (``stores.postgres.search``). With ``options.explain`` each hit says how it
        ranked.

        Args:
            input: The validated SEARCH input, ``limit`` resolved.
            ctx: The node context (unused by the built-in stores).

        Returns:
            At most ``input.limit`` hits, best first, ties by id.

        Raises:
            MemoryStoreError: ``INVALID_INPUT`` for another strategy, a non-text query or an
                unknown option.
        """


@runtime_checkable
class MemorySearchProvider(Protocol):
    """A recall and ranking strategy for MEMORY.SEARCH.

    A provider receives the validated input (``limit`` already resolved) and the node context,
    and returns hits made of complete records that came from the store: it re-ranks, it never
    invents records. It raises ``MemoryStoreError(code=INVALID_INPUT)`` for strategies or
    options it does not support.
    """

    async def search(self, input: SearchInput, ctx: NodeContext) -> list[SearchHit] | SearchOutput:
        """The hits, best first; or a whole :class:`SearchOutput` to report more than hits
        (such as ``vector_missing``)."""
        ...
