"""``MemoryStoreProvider``: a memory store as a RETRIEVAL target, read-only.

It searches the store with the MEMORY worker's own pipeline (:mod:`.pipeline`) and sees exactly
what a MEMORY.SEARCH would: the same filter semantics (validity, supersession, quarantine,
archive and expiry hide records unless the filter includes them), and the same access policy —
under ``enforce`` every call needs a principal and sees only shared records and its own,
filtered inside the store before the limit. It never writes: no usage counters, no audit
entries, no renewal (those belong to the MEMORY worker, which keeps them when it delegates its
search here).

Each candidate carries the complete record as its ``content`` (so the MEMORY bridge can hand it
back as a ``SearchHit``), the record's id as its ``id`` and ``source.ref``.
"""

from __future__ import annotations

from ditto.errors import ErrorCode
from ditto.runtime.context import NodeContext
from workers.memory.model.filters import is_visible
from workers.memory.model.records import Clock, now_from, utc_now
from workers.memory.ports import MemoryStore
from workers.memory.retrieval.embeddings.base import Embedder
from workers.memory.retrieval.hybrid import SearchEngine, SearchSettings
from workers.memory.worker.access import AccessControl, AccessPolicy
from workers.retrieval.contracts import CandidateSource, RetrievalCandidate
from workers.retrieval.errors import RetrievalError
from workers.retrieval.ports import ProviderRequest, ProviderResult
from workers.retrieval.providers.pipeline import engine_strategies, run_engine, scoped_filter

__all__ = ("MemoryStoreProvider",)


class MemoryStoreProvider:
    """Searches ``store`` as the MEMORY worker would (see the module).

    Args:
        store: Any :class:`MemoryStore`; the keyword strategies need its ``KeywordSearch``
            capability, ``vector`` and ``hybrid`` its ``VectorStore`` and ``embedder``. The
            application owns it: opened on first use, never closed here.
        embedder: The model the store's vectors were computed with (``EMBEDDING_MISMATCH``
            otherwise).
        settings: The pipeline's defaults (fusion, weights, ``min_score``, rerank).
        access: The access policy of the MEMORY worker over the same store: give the same
            one, or this target shows what that worker would hide.
        clock: Judges expiry.
        owns_store: Close ``store`` in :meth:`aclose` (a worker process that opened it for
            this target alone).
    """

    kind = "memory"

    def __init__(
        self,
        store: MemoryStore,
        embedder: Embedder | None = None,
        *,
        settings: SearchSettings | None = None,
        access: AccessPolicy | None = None,
        clock: Clock = utc_now,
        owns_store: bool = False,
    ) -> None:
        self.store = store
        self._owns_store = owns_store
        self._engine = SearchEngine(store, embedder, settings)
        self._access = AccessControl(access or AccessPolicy(), store, audit=False, clock=clock)
        self._clock = clock
        self.strategies = engine_strategies(store, self._engine)

    async def open(self) -> None:
        await self.store.open()

    async def aclose(self) -> None:
        """Close the store if it was handed over (``owns_store``); the application's stays
        open."""
        if self._owns_store:
            await self.store.aclose()

    async def search(self, request: ProviderRequest, ctx: NodeContext) -> ProviderResult:
        principal = self._access.principal(ctx)
        filter = self._access.visible_filter(scoped_filter(request), principal)
        now = now_from(self._clock)  # before the search: what it saw unexpired still is
        hits, missing = await run_engine(self._engine, request, filter, ctx, now)
        if self._access.enforcing and principal is not None:
            for hit in hits:
                if not is_visible(hit.memory, principal):  # the store filtered already
                    raise RetrievalError(
                        "the memory search returned a record the caller may not see",
                        code=ErrorCode.INVALID_BACKEND_OUTPUT,
                    )
        candidates = [
            RetrievalCandidate(
                content=hit.memory,
                id=hit.memory.id,
                score=hit.score,
                source=CandidateSource(request.target, hit.memory.id),
                metadata=None if hit.explain is None else {"explain": hit.explain},
            )
            for hit in hits
        ]
        return ProviderResult(candidates, None if missing is None else {"vector_missing": missing})
