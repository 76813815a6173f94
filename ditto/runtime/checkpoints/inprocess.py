"""``InProcessCheckpointStore``: checkpoints in dictionaries, for tests and throwaway runs.

Nothing survives the process. Everything it hands out is immutable (``str``, ``bytes``,
tuples, frozen structs), and everything it keeps is its own copy, so neither side can change
the other's data.

Leases expire on the store's ``clock`` (the one that stamps ``updated_at``), so a test can
expire one by moving its clock instead of sleeping. Every call runs without awaiting anything,
so each is atomic on the event loop: the lease check and the write it fences cannot interleave
with another call.
"""

from __future__ import annotations

import builtins
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from ditto.runtime.checkpoints.leases import (
    busy,
    checked_fence,
    checked_holder,
    checked_lease,
    checked_ttl,
    lease_lost,
)
from ditto.runtime.checkpoints.port import (
    CheckpointInfo,
    Lease,
    StoredCheckpoint,
    checked_bytes,
    checked_id,
    checked_limit,
    checked_records,
    checked_scope,
    closed,
    not_found,
)

__all__ = ("InProcessCheckpointStore",)


@dataclass(slots=True)
class _Entry:
    scope: str
    envelope: bytes
    updated_at: float
    records: builtins.list[tuple[str, bytes]] = field(default_factory=builtins.list)


class InProcessCheckpointStore:
    """A :class:`~ditto.runtime.checkpoints.port.CheckpointStore` in memory.

    Args:
        clock: Unix seconds for ``updated_at`` (default :func:`time.time`).
    """

    def __init__(self, *, clock: Callable[[], float] = time.time) -> None:
        self._clock = clock
        self._entries: dict[str, _Entry] = {}
        self._leases: dict[str, Lease] = {}
        self._last_token = 0
        self._closed = False

    async def save(
        self, checkpoint_id: str, scope: str, envelope: bytes, *, fence: Lease | None = None
    ) -> None:
        checkpoint_id = checked_id(checkpoint_id)
        scope = checked_scope(scope)
        envelope = checked_bytes(envelope, "an envelope")
        token = checked_fence(checkpoint_id, fence)
        self._check_open()
        self._check_fence(checkpoint_id, token)
        entry = self._entries.get(checkpoint_id)
        now = float(self._clock())
        if entry is None:
            self._entries[checkpoint_id] = _Entry(scope, envelope, now)
        else:
            entry.scope, entry.envelope, entry.updated_at = scope, envelope, now

    async def append(
        self,
        checkpoint_id: str,
        records: Sequence[tuple[str, bytes]],
        *,
        fence: Lease | None = None,
    ) -> None:
        checkpoint_id = checked_id(checkpoint_id)
        copied = checked_records(records)
        token = checked_fence(checkpoint_id, fence)
        self._check_open()
        self._check_fence(checkpoint_id, token)
        entry = self._entries.get(checkpoint_id)
        if entry is None:
            raise not_found()
        if copied:
            entry.records.extend(copied)
            entry.updated_at = float(self._clock())

    async def load(self, checkpoint_id: str) -> StoredCheckpoint | None:
        checkpoint_id = checked_id(checkpoint_id)
        self._check_open()
        entry = self._entries.get(checkpoint_id)
        if entry is None:
            return None
        return StoredCheckpoint(
            checkpoint_id, entry.scope, entry.envelope, tuple(entry.records), entry.updated_at
        )

    async def list(
        self, *, scope: str | None = None, limit: int = 100
    ) -> builtins.list[CheckpointInfo]:
        if scope is not None:
            scope = checked_scope(scope)
        limit = checked_limit(limit)
        self._check_open()
        infos = [
            CheckpointInfo(checkpoint_id, entry.scope, entry.updated_at, len(entry.records))
            for checkpoint_id, entry in self._entries.items()
            if scope is None or entry.scope == scope
        ]
        infos.sort(key=lambda info: (info.updated_at, info.id), reverse=True)
        return infos[:limit]

    async def delete(self, checkpoint_id: str, *, fence: Lease | None = None) -> bool:
        checkpoint_id = checked_id(checkpoint_id)
        token = checked_fence(checkpoint_id, fence)
        self._check_open()
        if token is None:
            now = float(self._clock())
            live = self._live(checkpoint_id, now)
            if live is not None:
                raise busy(live.holder, live.expires_at - now)
        else:
            self._check_fence(checkpoint_id, token)
        self._leases.pop(checkpoint_id, None)  # released with a fence; else expired
        return self._entries.pop(checkpoint_id, None) is not None

    # ----------------------------------------------------------------- leases

    async def acquire(self, checkpoint_id: str, holder: str, ttl: float) -> Lease:
        checkpoint_id = checked_id(checkpoint_id)
        holder = checked_holder(holder)
        ttl = checked_ttl(ttl)
        self._check_open()
        now = float(self._clock())
        held = self._leases.get(checkpoint_id)
        if held is not None and held.expires_at > now:
            raise busy(held.holder, held.expires_at - now)
        self._last_token += 1
        lease = self._leases[checkpoint_id] = Lease(
            checkpoint_id, holder, self._last_token, now + ttl
        )
        return lease

    async def renew(self, lease: Lease, ttl: float) -> Lease:
        lease = checked_lease(lease)
        ttl = checked_ttl(ttl)
        self._check_open()
        self._check_fence(lease.checkpoint_id, lease.token)
        held = self._leases[lease.checkpoint_id]
        renewed = self._leases[lease.checkpoint_id] = Lease(
            held.checkpoint_id, held.holder, held.token, float(self._clock()) + ttl
        )
        return renewed

    async def release(self, lease: Lease) -> None:
        lease = checked_lease(lease)
        self._check_open()
        held = self._leases.get(lease.checkpoint_id)
        if held is not None and held.token == lease.token:
            del self._leases[lease.checkpoint_id]

    def _live(self, checkpoint_id: str, now: float) -> Lease | None:
        held = self._leases.get(checkpoint_id)
        if held is None or held.expires_at <= now:
            return None
        return held

    def _check_fence(self, checkpoint_id: str, token: int | None) -> None:
        if token is None:
            return
        live = self._live(checkpoint_id, float(self._clock()))
        if live is None or live.token != token:
            raise lease_lost()

    # ----------------------------------------------------------------- lifecycle

    async def aclose(self) -> None:
        self._closed = True
        self._entries.clear()
        self._leases.clear()

    def _check_open(self) -> None:
        if self._closed:
            raise closed()
