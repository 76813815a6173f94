"""The MySQL store's ``VectorStore`` capability: each method one call into ``vectors``."""

from __future__ import annotations

from collections.abc import Sequence

from workers.memory.model.contracts import MemoryFilter, MemoryItem
from workers.memory.model.records import now_from
from workers.memory.retrieval.ann_index import AnnSettings
from workers.memory.retrieval.embeddings.base import EmbeddingModel, Matrix
from workers.memory.retrieval.vectors import Vectors, VectorState
from workers.memory.stores.mysql import vectors as my_vectors
from workers.memory.stores.mysql.errors import mysql_errors
from workers.memory.stores.mysql.store_base import MysqlStoreBase

__all__ = ("MysqlVectors",)


class MysqlVectors(MysqlStoreBase):
    """Vectors of :class:`~workers.memory.stores.mysql.store.MysqlMemoryStore`."""

    def configure_ann(self, settings: AnnSettings) -> None:
        self._index.configure_ann(settings)

    async def vector_state(self) -> VectorState:
        driver = await self._ready()
        async with mysql_errors():
            return (await my_vectors.read_state(driver))[0]

    async def vector_search(
        self, model: EmbeddingModel, query: Matrix, filter: MemoryFilter, limit: int
    ) -> list[tuple[MemoryItem, float]]:
        driver = await self._ready()
        async with mysql_errors():
            return await my_vectors.search_vectors(
                driver,
                self._index,
                self._refreshing,
                model,
                query,
                filter,
                limit,
                now_from(self._clock),
            )

    async def begin_reindex(self, model: EmbeddingModel) -> None:
        driver = await self._ready()
        async with mysql_errors():
            await my_vectors.begin_reindex(driver, model)

    async def missing_vectors(
        self, model: EmbeddingModel, after: str | None, limit: int
    ) -> list[MemoryItem]:
        driver = await self._ready()
        async with mysql_errors():
            return await my_vectors.missing_vectors(driver, model, after, limit)

    async def count_missing_vectors(self, model: EmbeddingModel) -> int:
        driver = await self._ready()
        async with mysql_errors():
            return await my_vectors.count_missing_vectors(driver, model)

    async def put_vectors(self, ids: Sequence[str], vectors: Vectors) -> int:
        return await self._transaction(lambda db: my_vectors.put_vectors(db, ids, vectors))

    async def finish_reindex(self, model: EmbeddingModel) -> None:
        await self._transaction(lambda db: my_vectors.finish_reindex(db, model))
