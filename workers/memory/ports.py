"""The two ports of the MEMORY worker: ``MemoryStore`` (records) and ``MemorySearchProvider``
(recall and ranking)."""

from __future__ import annotations

import secrets
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from types import TracebackType
from typing import TYPE_CHECKING, Literal, Protocol, Self, runtime_checkable

from workers.memory.contracts import (
    AuditEntry,
    HistoryEntry,
    MemoryDraft,
    MemoryFilter,
    MemoryItem,
    MemoryPatch,
    OrderBy,
    SearchHit,
    SearchInput,
    WriteMode,
)
from workers.memory.embeddings.base import EmbeddingModel, Matrix
from workers.memory.errors import MemoryErrorCode, MemoryStoreError, SearchUnavailableError
from workers.memory.records import WriteGuard, to_micros
from workers.memory.vectors import Vectors, VectorState

if TYPE_CHECKING:
    from ditto.runtime.context import NodeContext

__all__ = ("AuditEvent", "MemorySearchProvider", "MemoryStore", "QueryPosition")

QueryPosition = tuple[int, str]
"""Where a QUERY page continues: the last record's order key (see ``records.order_key``) and id."""


@dataclass(frozen=True, slots=True)
class AuditEvent:
    """An audit entry before the store numbers it (see :class:`AuditEntry`)."""

    at: datetime
    principal: str | None
    node: str
    ids: Sequence[str]
    decision: Literal["allow", "deny", "would-deny"]
    detail: str | None = field(default=None)


def _unsupported(what: str) -> MemoryStoreError:
    return MemoryStoreError(what, code=MemoryErrorCode.UNSUPPORTED)


class MemoryStore(ABC):
    """Durable memory records. The worker validates inputs and outputs; a store guarantees:

    * **get** returns the records with the given ids, and those with the given keys in
      ``namespace``; missing ones are left out; order does not matter.
    * **query** returns at most ``limit`` records matching ``filter``, sorted by
      ``order.field`` (``last_used_at`` of a never-used record sorts as -1) then ``id``, in
      ``order.direction``, strictly after ``after`` when given. Pages never skip or repeat a
      record under concurrent inserts.
    * **write** stores the whole batch in one transaction, following
      :func:`workers.memory.records.plan_writes`; ``CONFLICT`` rolls back everything.
    * **update** applies every patch with :func:`workers.memory.records.apply_patch` in one
      transaction; a missing id is ``NOT_FOUND`` and a stale ``expected_version`` is ``CONFLICT``,
      and either leaves every record unchanged.
    * **delete** removes the given ids and returns those it really deleted.
    * A ``guard`` (access control, retention) is consulted inside the write's transaction on
      the records as stored there — by :func:`~workers.memory.records.plan_writes` and
      :func:`~workers.memory.records.apply_patch`, and per record before a delete — so no
      concurrent change slips between its check and the write.
    * **vectors** (stores that keep them) are stored with the records in the same
      transaction; a store holding vectors refuses text changes without them and vectors of
      another model (``EMBEDDING_MISMATCH``).
    * **search** (optional) ranks records for ``input`` with ``input.filter`` applied before
      ``input.limit``; the default raises ``SEARCH_UNAVAILABLE``.
    * **record_usage** adds one use to each id (``usage_count += 1``, ``last_used_at = at``);
      it may complete after it returns (stores that defer it order it before later writes, and
      :meth:`flush` waits for it).

    Raise :class:`~workers.memory.errors.MemoryStoreError` with a stable code for expected
    failures; anything else becomes ``MEMORY_BACKEND_ERROR`` with a fixed message.
    """

    def __init__(self) -> None:
        self.cursor_secret: bytes = secrets.token_bytes(32)
        """Key that signs QUERY cursors. Stores that persist records persist it too, so a
        cursor stays valid across processes and restarts."""

    async def __aenter__(self) -> Self:
        await self.open()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def open(self) -> None:  # noqa: B027 - optional hook, a no-op for in-memory stores
        """Acquire resources (connections, migrations). Idempotent; operations open lazily."""

    @abstractmethod
    async def get(
        self, ids: Sequence[str], keys: Sequence[str], namespace: str
    ) -> list[MemoryItem]: ...

    @abstractmethod
    async def query(
        self, filter: MemoryFilter, order: OrderBy, limit: int, after: QueryPosition | None
    ) -> list[MemoryItem]: ...

    @abstractmethod
    async def write(
        self,
        drafts: Sequence[MemoryDraft],
        mode: WriteMode,
        vectors: Vectors | None = None,
        guard: WriteGuard | None = None,
    ) -> list[MemoryItem]: ...

    @abstractmethod
    async def update(
        self,
        patches: Sequence[MemoryPatch],
        vectors: Vectors | None = None,
        guard: WriteGuard | None = None,
    ) -> list[MemoryItem]: ...

    @abstractmethod
    async def delete(self, ids: Sequence[str], guard: WriteGuard | None = None) -> list[str]: ...

    async def pages(
        self, filter: MemoryFilter, size: int = 1000
    ) -> AsyncIterator[list[MemoryItem]]:
        """Every record matching ``filter``, oldest first, ``size`` at a time: :meth:`query`
        with keyset pagination, so memory stays flat however many there are."""
        order = OrderBy()
        after: QueryPosition | None = None
        while True:
            page = await self.query(filter, order, size, after)
            if page:
                yield page
            if len(page) < size:
                return
            after = (to_micros(page[-1].created_at), page[-1].id)

    async def count(self, filter: MemoryFilter) -> int:
        """How many records match ``filter``. The default pages through :meth:`query`; stores
        override it with a real count."""
        return sum([len(page) async for page in self.pages(filter)])

    async def health(self) -> dict[str, object]:
        """Index health for ``ditto memory stats`` (what a store can check cheaply); the
        default knows nothing."""
        return {}

    # ----------------------------------------------------------------- vectors (optional)

    @property
    def can_store_vectors(self) -> bool:
        """True when the store keeps vectors (implements :meth:`vector_search`)."""
        return type(self).vector_search is not MemoryStore.vector_search

    async def vector_state(self) -> VectorState:
        """The model of the store's vectors (and of a reindex in progress)."""
        return VectorState()

    async def vector_search(
        self, model: EmbeddingModel, query: Matrix, filter: MemoryFilter, limit: int
    ) -> list[tuple[MemoryItem, float]]:
        """The ``limit`` records most similar to the unit vector ``query`` (cosine, best first,
        ties by id) among those matching ``filter`` — the filter applies before the limit.
        ``EMBEDDING_MISMATCH`` when ``model`` is not the store's; ``[]`` before any vector."""
        raise _unsupported("this memory store keeps no vectors")

    async def begin_reindex(self, model: EmbeddingModel) -> None:
        """Start moving the store to ``model`` (resumable: calling it again continues)."""
        raise _unsupported("this memory store keeps no vectors")

    async def missing_vectors(
        self, model: EmbeddingModel, after: str | None, limit: int
    ) -> list[MemoryItem]:
        """Up to ``limit`` records (archived ones included) without a vector of ``model``, by
        id, after id ``after``."""
        raise _unsupported("this memory store keeps no vectors")

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

    async def put_vectors(self, ids: Sequence[str], vectors: Vectors) -> int:
        """Store vectors (of the active model or the reindex target) for existing records, row
        ``i`` for ``ids[i]``; ids that no longer exist, and records whose text changed since
        (``vectors.hashes``), are skipped. Returns how many were stored."""
        raise _unsupported("this memory store keeps no vectors")

    async def finish_reindex(self, model: EmbeddingModel) -> None:
        """Make ``model`` active and drop every other model's vectors.

        Raises ``CONFLICT`` while some record still lacks a vector of ``model``."""
        raise _unsupported("this memory store keeps no vectors")

    @property
    def can_search(self) -> bool:
        """True when the store implements :meth:`search`."""
        return type(self).search is not MemoryStore.search

    async def search(self, input: SearchInput, ctx: NodeContext | None = None) -> list[SearchHit]:
        """Rank records for ``input``. Stores without search keep this default."""
        raise SearchUnavailableError()

    async def history(self, id: str) -> list[HistoryEntry]:
        """Every change of record ``id``, oldest first: ``create``, ``upsert`` and ``update``
        with the record as it stood after the change, ``delete`` with its last state. The
        history outlives the record. A replayed write (nothing changed) and usage counters add
        nothing. Stores without history keep this default, which raises ``UNSUPPORTED``."""
        raise _unsupported("this memory store keeps no history")

    async def restore(self, items: Sequence[MemoryItem]) -> int:
        """Store records exactly as given (ids, timestamps, versions and usage included), in one
        transaction: an import. A record with the same id is replaced, so importing the same
        records twice changes nothing the second time; a different record already holding one
        of the keys is ``CONFLICT`` and nothing is stored. No history is written (it describes
        changes, and an import restores a state). Returns how many records were stored.
        Stores that cannot import keep this default, which raises ``UNSUPPORTED``."""
        raise _unsupported("this memory store cannot import")

    async def restore_history(self, entries: Sequence[HistoryEntry]) -> int:
        """Append imported history entries in order, skipping any the store already holds (same
        id, version and change), so importing a file twice adds nothing. Returns how many were
        added. Stores without history keep this default, which raises ``UNSUPPORTED``."""
        raise _unsupported("this memory store keeps no history")

    async def append_audit(self, events: Sequence[AuditEvent]) -> None:
        """Append access decisions to the audit log (append-only, in order). Stores without an
        audit log keep this default, which raises ``UNSUPPORTED``."""
        raise _unsupported("this memory store keeps no audit log")

    async def audit_log(
        self, *, after: int = 0, limit: int = 100, principal: str | None = None
    ) -> list[AuditEntry]:
        """Audit entries with ``seq > after`` (oldest first, at most ``limit``), only those of
        ``principal`` when given. Pending entries are stored first, so a read sees every
        decision made before it."""
        raise _unsupported("this memory store keeps no audit log")

    async def purge_audit(self, before: datetime, *, dry_run: bool = False) -> int:
        """Delete audit entries older than ``before`` (the audit retention rule); how many were
        (or, with ``dry_run``, would be) deleted."""
        raise _unsupported("this memory store keeps no audit log")

    async def record_usage(self, ids: Sequence[str], at: datetime) -> None:  # noqa: B027
        """Count one use of each record; the default does not track usage."""

    async def flush(self) -> None:  # noqa: B027
        """Wait until deferred work (usage counters) is stored."""

    async def aclose(self) -> None:  # noqa: B027
        """Release resources. The application owns the store: the worker never closes it."""


@runtime_checkable
class MemorySearchProvider(Protocol):
    """A recall and ranking strategy for MEMORY.SEARCH.

    A provider receives the validated input (``limit`` already resolved) and the node context,
    and returns hits made of complete records that came from the store: it re-ranks, it never
    invents records. It raises ``MemoryStoreError(code=INVALID_INPUT)`` for strategies or
    options it does not support.
    """

    async def search(self, input: SearchInput, ctx: NodeContext) -> list[SearchHit]: ...
