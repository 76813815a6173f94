"""The PostgreSQL store's ``VectorStore`` capability: each method one call into ``vectors``."""

from __future__ import annotations

from collections.abc import Sequence

from workers.memory.model.contracts import MemoryFilter, MemoryItem
from workers.memory.model.records import now_from
from workers.memory.retrieval.ann_index import AnnSettings
from workers.memory.retrieval.embeddings.base import EmbeddingModel, Matrix
from workers.memory.retrieval.vectors import Vectors, VectorState
from workers.memory.stores.postgres import vectors as pg_vectors
from workers.memory.stores.postgres.errors import postgres_errors
from workers.memory.stores.postgres.store_base import PostgresStoreBase

__all__ = ("PostgresVectors",)


class PostgresVectors(PostgresStoreBase):
    """Vectors of :class:`~workers.memory.stores.postgres.store.PostgresMemoryStore`."""

    def configure_ann(self, settings: AnnSettings) -> None:
        self._index.configure_ann(settings)

    async def vector_state(self) -> VectorState:
        async with self._connection() as connection:
            return (await pg_vectors.read_state(connection, self._s))[0]

    async def vector_search(
        self, model: EmbeddingModel, query: Matrix, filter: MemoryFilter, limit: int
    ) -> list[tuple[MemoryItem, float]]:
        pool = await self._ready()
        async with postgres_errors():
            return await pg_vectors.search_vectors(
                pool,
                self._s,
                self._index,
                self._refreshing,
                model,
                query,
                filter,
                limit,
                now_from(self._clock),
            )

    async def begin_reindex(self, model: EmbeddingModel) -> None:
        async with self._connection() as connection:
            await pg_vectors.begin_reindex(connection, self._s, model)

    async def missing_vectors(
        self, model: EmbeddingModel, after: str | None, limit: int
    ) -> list[MemoryItem]:
        async with self._connection() as connection:
            return await pg_vectors.missing_vectors(connection, self._s, model, after, limit)

    async def count_missing_vectors(self, model: EmbeddingModel) -> int:
        async with self._connection() as connection:
            return await pg_vectors.count_missing_vectors(connection, self._s, model)

    async def put_vectors(self, ids: Sequence[str], vectors: Vectors) -> int:
        async with self._connection(transaction=True) as connection:
            return await pg_vectors.put_vectors(connection, self._s, ids, vectors)

    async def finish_reindex(self, model: EmbeddingModel) -> None:
        async with self._connection(transaction=True) as connection:
            await pg_vectors.finish_reindex(connection, self._s, model)
