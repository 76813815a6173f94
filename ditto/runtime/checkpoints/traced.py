"""A checkpoint store whose every call is an OpenTelemetry span: what a traced runtime wraps
its store in (see :mod:`ditto.runtime.tracing`), so a run's trace shows each record it wrote
and how long the store took."""

from __future__ import annotations

import builtins
from collections.abc import Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from opentelemetry.trace import Span, Tracer

    from ditto.runtime.checkpoints.port import (
        CheckpointInfo,
        CheckpointStore,
        Lease,
        StoredCheckpoint,
    )

__all__ = ("TracedCheckpointStore", "traced")


def traced(store: CheckpointStore, tracer: Tracer | None) -> CheckpointStore:
    """``store``, traced when there is a ``tracer``."""
    return store if tracer is None else TracedCheckpointStore(store, tracer)


class TracedCheckpointStore:
    """``store``, each call in a span ``ditto.checkpoint.<operation>`` with the checkpoint id
    (and the record count of an append). Errors propagate unchanged, recorded on the span."""

    __slots__ = ("_store", "_tracer")

    def __init__(self, store: CheckpointStore, tracer: Tracer) -> None:
        self._store = store
        self._tracer = tracer

    @property
    def inner(self) -> CheckpointStore:
        """The store this one traces."""
        return self._store

    async def save(
        self, checkpoint_id: str, scope: str, envelope: bytes, *, fence: Lease | None = None
    ) -> None:
        with self._span("save", checkpoint_id):
            await self._store.save(checkpoint_id, scope, envelope, fence=fence)

    async def append(
        self,
        checkpoint_id: str,
        records: Sequence[tuple[str, bytes]],
        *,
        fence: Lease | None = None,
    ) -> None:
        with self._span("append", checkpoint_id) as span:
            span.set_attribute("ditto.records", len(records))
            await self._store.append(checkpoint_id, records, fence=fence)

    async def load(self, checkpoint_id: str) -> StoredCheckpoint | None:
        with self._span("load", checkpoint_id):
            return await self._store.load(checkpoint_id)

    async def list(
        self, *, scope: str | None = None, limit: int = 100
    ) -> builtins.list[CheckpointInfo]:
        with self._tracer.start_as_current_span("ditto.checkpoint.list"):
            return await self._store.list(scope=scope, limit=limit)

    async def delete(self, checkpoint_id: str, *, fence: Lease | None = None) -> bool:
        with self._span("delete", checkpoint_id):
            return await self._store.delete(checkpoint_id, fence=fence)

    async def acquire(self, checkpoint_id: str, holder: str, ttl: float) -> Lease:
        with self._span("acquire", checkpoint_id):
            return await self._store.acquire(checkpoint_id, holder, ttl)

    async def renew(self, lease: Lease, ttl: float) -> Lease:
        with self._span("renew", lease.checkpoint_id):
            return await self._store.renew(lease, ttl)

    async def release(self, lease: Lease) -> None:
        with self._span("release", lease.checkpoint_id):
            await self._store.release(lease)

    async def aclose(self) -> None:
        await self._store.aclose()

    def _span(self, operation: str, checkpoint_id: str) -> AbstractContextManager[Span]:
        return self._tracer.start_as_current_span(
            f"ditto.checkpoint.{operation}", attributes={"ditto.checkpoint_id": checkpoint_id}
        )
