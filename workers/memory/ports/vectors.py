"""Capability: the store keeps embedding vectors with its records and ranks by them."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import TYPE_CHECKING

from workers.memory.model.contracts import MemoryFilter, MemoryItem

if TYPE_CHECKING:  # annotations only: importing the ports loads no numpy
    from workers.memory.retrieval.ann_index import AnnSettings
    from workers.memory.retrieval.embeddings.base import EmbeddingModel, Matrix
    from workers.memory.retrieval.vectors import Vectors, VectorState

__all__ = ("VectorStore",)


class VectorStore(ABC):
    """Vectors of one embedding model at a time (the *active* model), written in the same
    transaction as their records, and an exact cosine ranking over them.

    A store moves to another model with a resumable reindex: :meth:`begin_reindex`, then
    :meth:`put_vectors` for what :meth:`missing_vectors` lists, then :meth:`finish_reindex`.
    Every method may raise ``EMBEDDING_MISMATCH`` for vectors of a model the store does not
    hold (it never compares incomparable vectors).
    """

    def configure_ann(self, settings: AnnSettings) -> None:  # noqa: B027 - optional
        """Rank from an approximate (HNSW) graph above ``settings.threshold`` vector rows
        (:class:`~workers.memory.retrieval.ann_index.AnnSettings`: 100,000 unless told).

        Stores that keep their vectors in an in-memory index apply it to that index; a store
        ranking elsewhere may ignore it. Call it before the store opens or at any time (a
        graph built with other settings is dropped and rebuilt).
        """

    @abstractmethod
    async def vector_state(self) -> VectorState:
        """The model of the store's vectors, and the target of a reindex in progress."""

    @abstractmethod
    async def vector_search(
        self, model: EmbeddingModel, query: Matrix, filter: MemoryFilter, limit: int
    ) -> list[tuple[MemoryItem, float]]:
        """The ``limit`` records most similar to the unit vector ``query``.

        Args:
            model: The model ``query`` comes from.
            query: A unit float32 vector.
            filter: Applied before the limit.
            limit: Most records returned.

        Returns:
            ``(record, cosine)`` pairs, best first, ties by id; ``[]`` before any vector.

        Raises:
            MemoryStoreError: ``EMBEDDING_MISMATCH`` when ``model`` is not the store's.
        """

    @abstractmethod
    async def begin_reindex(self, model: EmbeddingModel) -> None:
        """Start moving the store to ``model`` (calling it again continues the same move)."""

    @abstractmethod
    async def missing_vectors(
        self, model: EmbeddingModel, after: str | None, limit: int
    ) -> list[MemoryItem]:
        """Up to ``limit`` records (archived ones included) without a vector of ``model``,
        by id, after id ``after``."""

    @abstractmethod
    async def put_vectors(self, ids: Sequence[str], vectors: Vectors) -> int:
        """Store vectors (of the active model or the reindex target) for existing records.

        Args:
            ids: Row ``i`` of ``vectors`` belongs to ``ids[i]``.
            vectors: With ``hashes``: a record whose text changed since is skipped.

        Returns:
            How many vectors were stored (ids that no longer exist are skipped).
        """

    @abstractmethod
    async def finish_reindex(self, model: EmbeddingModel) -> None:
        """Make ``model`` active and drop every other model's vectors.

        Raises:
            MemoryStoreError: ``CONFLICT`` while some record still lacks a vector of ``model``.
        """

    async def count_missing_vectors(self, model: EmbeddingModel) -> int:
        """How many records lack a vector of ``model`` (pages through :meth:`missing_vectors`;
        stores may count directly)."""
        total, after = 0, None
        while True:
            page = await self.missing_vectors(model, after, 1000)
            total += len(page)
            if len(page) < 1000:
                return total
            after = page[-1].id
