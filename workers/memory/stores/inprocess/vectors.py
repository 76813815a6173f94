"""The in-process store's ``VectorStore`` capability: vectors kept per record and model, and
the index of the active model's vectors that vector search ranks by."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from workers.memory.model.contracts import MemoryFilter, MemoryItem
from workers.memory.model.errors import conflict
from workers.memory.model.filters import matches_filter
from workers.memory.model.records import now_from
from workers.memory.retrieval.ann_index import AnnSettings
from workers.memory.retrieval.embeddings.base import EmbeddingModel, Matrix
from workers.memory.retrieval.vectors import (
    Vectors,
    VectorState,
    check_model,
    matching_rows,
    ranked_filtered,
    text_hash,
    vectors_required,
)
from workers.memory.stores.inprocess.state import InProcessState, clone

__all__ = ("InProcessVectors",)


class InProcessVectors(InProcessState):
    """Vectors of :class:`~workers.memory.stores.inprocess.InProcessMemoryStore`."""

    def _check_vectors(self, vectors: Vectors | None, *, needed: bool) -> None:
        if vectors is not None:
            check_model(vectors.model, self._state, writing=True)
        elif needed and self._state.active is not None:
            raise vectors_required(self._state)

    def _store_vectors(
        self, vectors: Vectors, items: Sequence[MemoryItem], *, skip_changed: bool = False
    ) -> int:
        rows = matching_rows(items, vectors.hashes, skip=skip_changed)
        model = vectors.model
        if self._state.active is None:
            self._state = VectorState(model, self._state.target)
            self._index.reset(model)
        for row in rows:
            fingerprint = text_hash(items[row])
            held = self._vectors.setdefault(items[row].id, {})
            for other in [m for m, (_, old) in held.items() if old != fingerprint]:
                del held[other]  # another model's vector of the old text is stale
            held[model] = (vectors.of(row).copy(), fingerprint)
        if model == self._state.active and rows:
            chosen = vectors.select(rows)
            self._index.upsert([items[row].id for row in rows], chosen.matrix, chosen.counts)
        return len(rows)

    def configure_ann(self, settings: AnnSettings) -> None:
        self._index.configure_ann(settings)

    async def vector_state(self) -> VectorState:
        return self._state

    async def vector_search(
        self, model: EmbeddingModel, query: Matrix, filter: MemoryFilter, limit: int
    ) -> list[tuple[MemoryItem, float]]:
        check_model(model, self._state, writing=False)
        now = now_from(self._clock)

        def matching(ids: list[str]) -> list[MemoryItem]:
            found = (self._items.get(item_id) for item_id in ids)
            return [
                clone(item)
                for item in found
                if item is not None and matches_filter(item, filter, now)
            ]

        return ranked_filtered(self._index, query, limit, matching, lambda item: item.id)

    async def begin_reindex(self, model: EmbeddingModel) -> None:
        if self._state.active not in (None, model):
            self._state = VectorState(self._state.active, model)

    async def missing_vectors(
        self, model: EmbeddingModel, after: str | None, limit: int
    ) -> list[MemoryItem]:
        lacking = sorted(
            item_id
            for item_id in self._items
            if (after is None or item_id > after) and model not in self._vectors.get(item_id, {})
        )
        return [clone(self._items[item_id]) for item_id in lacking[:limit]]

    async def put_vectors(self, ids: Sequence[str], vectors: Vectors) -> int:
        check_model(vectors.model, self._state, writing=True)
        present = [index for index, item_id in enumerate(ids) if item_id in self._items]
        kept = vectors.select(present)
        items = [self._items[ids[index]] for index in present]
        return self._store_vectors(kept, items, skip_changed=True)

    async def finish_reindex(self, model: EmbeddingModel) -> None:
        lacking = await self.missing_vectors(model, None, 1)
        if lacking:
            raise conflict("some records still lack a vector of the new model; run reindex again")
        self._vectors = {
            item_id: {model: by_model[model]}
            for item_id, by_model in self._vectors.items()
            if model in by_model
        }
        self._state = VectorState(model)
        self._index.reset(model)
        ids = list(self._vectors)
        if ids:
            rows = [self._vectors[item_id][model][0] for item_id in ids]
            self._index.upsert(ids, np.concatenate(rows), [len(chunks) for chunks in rows])
