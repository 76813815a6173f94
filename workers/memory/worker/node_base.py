"""What every MEMORY node handler shares: the store, the search provider, the limits, usage
tracking, access control, hygiene, and embedding records for the store."""

from __future__ import annotations

from collections.abc import Sequence

from workers.memory.maintenance.retention import PeriodicHygiene
from workers.memory.model.contracts import MemoryDraft, MemoryItem
from workers.memory.model.records import Clock
from workers.memory.policy.config import WritePolicy
from workers.memory.ports import MemorySearchProvider, MemoryStore, UsageTracking
from workers.memory.retrieval.chunking import embed_records
from workers.memory.retrieval.embeddings.base import Embedder, model_of
from workers.memory.retrieval.vectors import Vectors, vector_text
from workers.memory.worker.access import AccessControl
from workers.memory.worker.renewal import Renewal
from workers.memory.worker.write_policy import WritePipeline

__all__ = ("NodeBase",)


class NodeBase:
    """The state of the MEMORY nodes (``create_memory_worker`` builds it)."""

    def __init__(
        self,
        store: MemoryStore,
        search: MemorySearchProvider,
        query_limit: int,
        search_limit: int,
        usage: UsageTracking | None,
        clock: Clock,
        access: AccessControl,
        embedder: Embedder | None,
        policy: WritePolicy | None = None,
    ) -> None:
        self.store = store
        self.search_provider = search
        self.query_limit = query_limit
        self.search_limit = search_limit
        self.usage = usage
        self.clock = clock
        self.access = access
        self.hygiene: PeriodicHygiene | None = None
        self.embedder = embedder
        self.model = None if embedder is None else model_of(embedder)
        self.pipeline = WritePipeline(policy or WritePolicy(), store)
        self.renewal = (
            Renewal(store, policy.category_ttl_s)
            if policy is not None and policy.renew_on_read and policy.category_ttl_s
            else None
        )

    def _start_hygiene(self) -> None:
        # The first call is the first place with a running event loop to run it on.
        if self.hygiene is not None:
            self.hygiene.ensure_started()

    async def _vectors(self, records: Sequence[MemoryDraft | MemoryItem]) -> Vectors | None:
        """The embeddings of ``records``, one per chunk of a long text (``None`` without an
        embedder)."""
        if self.embedder is None or self.model is None:
            return None
        # The store checks each hash against the text it stores: a record changed by someone
        # else while this one was embedding is a CONFLICT, never a vector of the wrong text.
        return await embed_records(
            self.embedder, self.model, [vector_text(record) for record in records]
        )
