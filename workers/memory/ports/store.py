"""The core port: ``MemoryStore`` keeps records (get, query, write, update, delete, review).

Everything else a store may offer — keyword search, vectors, history, an audit log, import,
usage counters — is a capability of its own (the sibling modules of this package), which a
store declares by inheriting it. The worker asks ``isinstance(store, AuditLog)``; it never
guesses from which methods were overridden.
"""

from __future__ import annotations

import secrets
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Sequence
from datetime import datetime
from types import TracebackType
from typing import TYPE_CHECKING, Self

from workers.memory.model.contracts import (
    MemoryDraft,
    MemoryFilter,
    MemoryItem,
    MemoryPatch,
    OrderBy,
    WriteMode,
)
from workers.memory.model.planning import WriteGuard, WriteRules
from workers.memory.model.records import to_micros
from workers.memory.model.review_plan import ReviewGuard
from workers.memory.model.reviews import ReviewDecision

if TYPE_CHECKING:  # annotations only: importing the ports loads no numpy
    from workers.memory.retrieval.vectors import Vectors

__all__ = ("MemoryStore", "QueryPosition", "UsageTracking")

QueryPosition = tuple[int, str]
"""Where a QUERY page continues: the last record's order key (see ``records.order_key``) and id."""


class MemoryStore(ABC):
    """Durable memory records: the six operations every store implements.

    The worker validates inputs and outputs and makes the access decisions; a store stores.
    Expected failures are :class:`~workers.memory.model.errors.MemoryStoreError` with a stable code
    and a message safe to show; each backend translates its driver's errors at one boundary
    (``raise ... from exc``, so the log keeps the cause). Anything else a store raises becomes
    ``MEMORY_BACKEND_ERROR`` with a fixed message.

    Codes every operation may raise besides its own: ``STORE_UNAVAILABLE`` (unreachable, cannot
    be opened, I/O failed), ``STORE_TIMEOUT`` (busy or locked past the store's wait; retryable),
    ``STORE_CORRUPT`` (the file or schema is not a memory store), ``STORE_READ_ONLY`` (a write
    to a store that cannot be written).

    **Guards.** A ``guard`` (access control, retention) is consulted inside the write's
    transaction on the records as stored there — by
    :func:`~workers.memory.model.planning.plan_writes`,
    :func:`~workers.memory.model.patches.plan_updates` and per record before a delete — so no
    concurrent change slips between its check and the write. **Vectors**, for stores that are also a
    :class:`~workers.memory.ports.vectors.VectorStore`, are stored with the records in the same
    transaction; such a store refuses text changes without them and vectors of another model
    (``EMBEDDING_MISMATCH``). Stores that keep no vectors receive ``vectors=None``.
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
        """Acquire resources (connections, migrations). Idempotent; operations open lazily.

        Raises:
            MemoryStoreError: ``STORE_UNAVAILABLE``, ``STORE_CORRUPT`` or ``STORE_READ_ONLY``
                when the store cannot be opened as a memory store.
        """

    @abstractmethod
    async def get(
        self, ids: Sequence[str], keys: Sequence[str], namespace: str
    ) -> list[MemoryItem]:
        """The records with the given ids, and those with the given keys in ``namespace``.

        Args:
            ids: Record ids, looked up in every namespace.
            keys: Stable keys, looked up in ``namespace`` only.
            namespace: Where ``keys`` are looked up.

        Returns:
            The records found, archived ones included, in any order; missing ones are left out
            and a record asked for twice may come back twice.
        """

    @abstractmethod
    async def query(
        self, filter: MemoryFilter, order: OrderBy, limit: int, after: QueryPosition | None
    ) -> list[MemoryItem]:
        """At most ``limit`` records matching ``filter``, sorted by ``order.field`` then ``id``.

        Args:
            filter: Applied before the limit (``visible_to`` too).
            order: ``last_used_at`` of a never-used record sorts as -1.
            limit: Most records returned (the worker passes 1..10001).
            after: Only records strictly after this position in ``order``.

        Returns:
            One page. Pages never skip or repeat a record under concurrent inserts.
        """

    @abstractmethod
    async def write(
        self,
        drafts: Sequence[MemoryDraft],
        mode: WriteMode,
        vectors: Vectors | None = None,
        guard: WriteGuard | None = None,
        rules: WriteRules | None = None,
    ) -> list[MemoryItem]:
        """Store a batch in one transaction, as :func:`~workers.memory.model.planning.plan_writes`
        decides each draft (insert, replace by key, replay, supersede, or store beside the
        key's record as contested or quarantined).

        Args:
            drafts: Validated drafts; keys are unique within the batch.
            mode: ``create`` (a changed record under a stored key is a conflict) or ``upsert``.
            vectors: One row per draft (stores that keep vectors).
            guard: Checked inside the transaction for every draft that lands on a stored key.
            rules: The write policy's rules for the call, handed to ``plan_writes`` with every
                record stored under each key (any status); it records the decisions.

        Returns:
            One record per draft, in order, as stored.

        Raises:
            MemoryStoreError: ``CONFLICT`` (nothing is stored), ``EMBEDDING_MISMATCH``, or what
                ``guard`` raises (``FORBIDDEN``).
        """

    @abstractmethod
    async def update(
        self,
        patches: Sequence[MemoryPatch],
        vectors: Vectors | None = None,
        guard: WriteGuard | None = None,
    ) -> list[MemoryItem]:
        """Apply every patch in one transaction, as
        :func:`~workers.memory.model.patches.plan_updates` decides.

        Args:
            patches: Validated patches; ids are unique within the call.
            vectors: One row per patch, when a patch changes the embedded text.
            guard: Checked inside the transaction for every patched record.

        Returns:
            The records as updated, in the order of ``patches``.

        Raises:
            MemoryStoreError: ``NOT_FOUND`` for a missing id, ``CONFLICT`` for a stale
                ``expected_version``; either leaves every record unchanged.
        """

    @abstractmethod
    async def delete(self, ids: Sequence[str], guard: WriteGuard | None = None) -> list[str]:
        """Delete the records with ``ids`` in one transaction.

        Args:
            ids: Record ids (missing ones are ignored).
            guard: ``check_delete`` decides per record, before anything is deleted.

        Returns:
            The ids really deleted, in the order asked.

        Raises:
            MemoryStoreError: What ``guard`` raises (``FORBIDDEN``); nothing is deleted then.
        """

    @abstractmethod
    async def review(
        self,
        decisions: Sequence[ReviewDecision],
        reviewer: str | None = None,
        guard: ReviewGuard | None = None,
    ) -> list[MemoryItem]:
        """Apply a person's decisions on contested and quarantined records in one transaction,
        as :func:`~workers.memory.model.review_plan.plan_reviews` decides: an accepted record
        becomes active and takes its key (the key's former holder is kept ``superseded``; a
        keyless claim supersedes the record it contests, if that is still active), a
        rejected one is deleted with a ``reject`` history entry. A key never has two active
        records, not even inside the transaction: holders are retired before records are
        accepted.

        Args:
            decisions: Validated decisions; ids are unique within the call.
            reviewer: Who decides, recorded on the history entries.
            guard: Checked inside the transaction on every record the review changes.

        Returns:
            The records as the review leaves them, in the order of ``decisions`` (a rejected
            one as it stood when it was deleted).

        Raises:
            MemoryStoreError: ``NOT_FOUND`` for a missing id; ``CONFLICT`` for a record that
                is not contested or quarantined, a stale ``expected_version`` or an expired
                record to accept; ``INVALID_INPUT`` for two accepts of one key; what ``guard``
                raises (``FORBIDDEN``). Any of them leaves every record unchanged.
        """

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

    async def flush(self) -> None:  # noqa: B027 - nothing is deferred unless a store says so
        """Wait until deferred work (usage counters) is stored."""

    async def aclose(self) -> None:  # noqa: B027 - optional hook, a no-op for in-memory stores
        """Release resources. The application owns the store: the worker never closes it."""


class UsageTracking(ABC):
    """Capability: the store counts uses (``usage_count``, ``last_used_at``), which SEARCH
    records for its hits and retention reads as activity."""

    @abstractmethod
    async def record_usage(self, ids: Sequence[str], at: datetime) -> None:
        """Count one use of each record (``usage_count += 1``, ``last_used_at = at``).

        It may complete after it returns: a store that defers it applies it before its next
        write and on :meth:`MemoryStore.flush`. Ids of records deleted meanwhile are ignored.
        """
