"""``InProcessCheckpointStore``: checkpoints in dictionaries, for tests and throwaway runs.

Nothing survives the process. Everything it hands out is immutable (``str``, ``bytes``,
tuples, frozen structs), and everything it keeps is its own copy, so neither side can change
the other's data.
"""

from __future__ import annotations

import builtins
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from ditto.runtime.checkpoints.port import (
    CheckpointInfo,
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
        self._closed = False

    async def save(self, checkpoint_id: str, scope: str, envelope: bytes) -> None:
        checkpoint_id = checked_id(checkpoint_id)
        scope = checked_scope(scope)
        envelope = checked_bytes(envelope, "an envelope")
        self._check_open()
        entry = self._entries.get(checkpoint_id)
        now = float(self._clock())
        if entry is None:
            self._entries[checkpoint_id] = _Entry(scope, envelope, now)
        else:
            entry.scope, entry.envelope, entry.updated_at = scope, envelope, now

    async def append(self, checkpoint_id: str, records: Sequence[tuple[str, bytes]]) -> None:
        checkpoint_id = checked_id(checkpoint_id)
        copied = checked_records(records)
        self._check_open()
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

    async def delete(self, checkpoint_id: str) -> bool:
        checkpoint_id = checked_id(checkpoint_id)
        self._check_open()
        return self._entries.pop(checkpoint_id, None) is not None

    async def aclose(self) -> None:
        self._closed = True
        self._entries.clear()

    def _check_open(self) -> None:
        if self._closed:
            raise closed()
