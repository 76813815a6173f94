"""The Markdown store's ``VectorStore`` capability: vectors kept in ``.ditto/vectors.bin``
(:mod:`~workers.memory.stores.markdown.vectorlog`) and ranked exactly, like every store's.

A vector counts only while its record still has the text it was computed from: a record a
person edited (or one imported with another text) is listed by :meth:`missing_vectors` and left
out of vector search until ``ditto memory reindex`` embeds it again — never ranked by what it
used to say.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from workers.memory.model.contracts import MemoryFilter, MemoryItem
from workers.memory.model.errors import conflict
from workers.memory.model.filters import matches_filter
from workers.memory.model.records import Clock, now_from, utc_now
from workers.memory.ports import VectorStore
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
from workers.memory.stores.markdown.base import MarkdownBase
from workers.memory.stores.markdown.state import clone

__all__ = ("MarkdownVectors",)


class MarkdownVectors(MarkdownBase, VectorStore):
    """Vectors of :class:`~workers.memory.stores.markdown.MarkdownMemoryStore` (every method
    runs holding the folder's lock, after a scan)."""

    def __init__(self, path: str | os.PathLike[str], *, clock: Clock = utc_now) -> None:
        super().__init__(path, clock=clock)
        self._hashes: dict[str, tuple[MemoryItem, str]] = {}
        """id -> (the record as last hashed, :func:`text_hash` of it)."""

    # ----------------------------------------------------------------- used by writes

    def _check_vectors(self, vectors: Vectors | None, *, needed: bool) -> None:
        """Refuse vectors of another model, or none once the store holds some (``needed``:
        the change alters embedded text), before anything is written."""
        state = self._folder.vectors.state
        if vectors is not None:
            check_model(vectors.model, state, writing=True)
        elif needed and state.active is not None:
            raise vectors_required(state)

    def _store_vectors(
        self, vectors: Vectors, items: Sequence[MemoryItem], *, skip_changed: bool = False
    ) -> int:
        """Keep record ``i``'s vectors for ``items[i]`` (a record whose text no longer matches
        its hash is a ``CONFLICT``, or with ``skip_changed`` left without)."""
        rows = matching_rows(items, vectors.hashes, skip=skip_changed)
        if rows:
            log = self._folder.vectors
            ids = [items[row].id for row in rows]
            chunks = [vectors.of(row) for row in rows]
            log.put(vectors.model, ids, chunks, [self._hash(items[row]) for row in rows])
            log.compact_if_long(self._folder.items.keys())
        return len(rows)

    def _hash(self, item: MemoryItem) -> str:
        """:func:`text_hash` of a record, remembered while the store holds that very record
        (a search or a reindex page would otherwise hash every record again)."""
        known = self._hashes.get(item.id)
        if known is not None and known[0] is item:  # held here, so never another's address
            return known[1]
        if len(self._hashes) > 2 * len(self._folder.items) + 1024:  # deleted records' go
            items = self._folder.items
            self._hashes = {i: known for i, known in self._hashes.items() if i in items}
        fingerprint = text_hash(item)
        self._hashes[item.id] = (item, fingerprint)
        return fingerprint

    def _has_vector(self, item: MemoryItem, model: EmbeddingModel | None) -> bool:
        """Whether ``item`` holds a vector of ``model`` computed from its present text."""
        held = self._folder.vectors.held.get(item.id)
        if held is None or model is None or model not in held:
            return False
        return held[model][1] == self._hash(item)

    def _lacking(self, model: EmbeddingModel) -> list[str]:
        """Ids of the records (any status) without a vector of ``model`` for their text."""
        return [i for i, item in self._folder.items.items() if not self._has_vector(item, model)]

    # ----------------------------------------------------------------- the capability

    def configure_ann(self, settings: AnnSettings) -> None:
        self._folder.vectors.index.configure_ann(settings)

    async def vector_state(self) -> VectorState:
        return await self._run(lambda: self._folder.vectors.state)

    async def vector_search(
        self, model: EmbeddingModel, query: Matrix, filter: MemoryFilter, limit: int
    ) -> list[tuple[MemoryItem, float]]:
        def search() -> list[tuple[MemoryItem, float]]:
            log = self._folder.vectors
            check_model(model, log.state, writing=False)
            now = now_from(self._clock)
            items = self._folder.items

            def matching(ids: list[str]) -> list[MemoryItem]:
                found = (items.get(item_id) for item_id in ids)
                return [
                    clone(item)
                    for item in found
                    if item is not None
                    and self._has_vector(item, model)
                    and matches_filter(item, filter, now)
                ]

            return ranked_filtered(log.index, query, limit, matching, lambda item: item.id)

        return await self._run(search)

    async def begin_reindex(self, model: EmbeddingModel) -> None:
        def begin() -> None:
            log = self._folder.vectors
            if log.state.active not in (None, model) and log.state.target != model:
                log.set_state(VectorState(log.state.active, model))

        await self._run(begin, writes=True)

    async def missing_vectors(
        self, model: EmbeddingModel, after: str | None, limit: int
    ) -> list[MemoryItem]:
        def missing() -> list[MemoryItem]:
            lacking = sorted(i for i in self._lacking(model) if after is None or i > after)
            return [clone(self._folder.items[item_id]) for item_id in lacking[:limit]]

        return await self._run(missing)

    async def count_missing_vectors(self, model: EmbeddingModel) -> int:
        return await self._run(lambda: len(self._lacking(model)))

    async def put_vectors(self, ids: Sequence[str], vectors: Vectors) -> int:
        def put() -> int:
            check_model(vectors.model, self._folder.vectors.state, writing=True)
            items = self._folder.items
            present = [index for index, item_id in enumerate(ids) if item_id in items]
            kept = vectors.select(present)
            chosen = [items[ids[index]] for index in present]
            return self._store_vectors(kept, chosen, skip_changed=True)

        return await self._run(put, writes=True)

    async def finish_reindex(self, model: EmbeddingModel) -> None:
        def finish() -> None:
            if self._lacking(model):
                raise conflict(
                    "some records still lack a vector of the new model; run reindex again"
                )
            self._folder.vectors.keep_only(VectorState(model), self._folder.items.keys())

        await self._run(finish, writes=True)
