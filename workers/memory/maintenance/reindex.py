"""``reindex``: move a store's vectors to another embedding model.

Vectors of the new model are written beside the old ones, page by page, so search keeps
working on the old model meanwhile and an interrupted run resumes where it stopped (records that
already have a vector of the new model are skipped). When every record has one, the new model
becomes the store's and the old vectors are dropped. Records written meanwhile must use the new
model's embedder (the store accepts both until the switch). A record longer than the embedder's
window is embedded in chunks, as a write embeds it (:mod:`~workers.memory.retrieval.chunking`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ditto.errors import ErrorCode
from workers.memory.model.errors import MemoryStoreError
from workers.memory.ports import MemoryStore, VectorStore
from workers.memory.retrieval.chunking import embed_records
from workers.memory.retrieval.embeddings.base import Embedder, EmbeddingModel, model_of
from workers.memory.retrieval.vectors import vector_text

__all__ = ("ReindexReport", "reindex")

Progress = Callable[[int, int], None]
"""``progress(done, total)``: records embedded so far, and how many needed it at the start."""


@dataclass(frozen=True, slots=True)
class ReindexReport:
    model: EmbeddingModel
    embedded: int
    """Records embedded by this run (0 when the store already was on the model)."""


async def reindex(
    store: MemoryStore,
    embedder: Embedder,
    *,
    batch_size: int = 256,
    progress: Progress | None = None,
) -> ReindexReport:
    """Embed every record with ``embedder`` and make its model the store's.

    Raises:
        MemoryStoreError: ``UNSUPPORTED`` for a store without vectors; ``EMBEDDING_FAILED``
            when the embedder fails (what was stored so far is kept: run it again to resume).
    """
    if not isinstance(store, VectorStore):
        raise MemoryStoreError(
            f"{type(store).__name__} keeps no vectors", code=ErrorCode.UNSUPPORTED
        )
    model = model_of(embedder)
    await store.begin_reindex(model)
    total = await store.count_missing_vectors(model)
    done = 0
    if progress is not None:
        progress(done, total)
    after: str | None = None
    while True:
        page = await store.missing_vectors(model, after, batch_size)
        if not page:
            break
        vectors = await embed_records(embedder, model, [vector_text(item) for item in page])
        # A record edited meanwhile is skipped here and embedded on the next run.
        await store.put_vectors([item.id for item in page], vectors)
        done += len(page)
        after = page[-1].id
        if progress is not None:
            progress(done, max(total, done))
    await store.finish_reindex(model)
    return ReindexReport(model, done)
