"""Checkpoint stores: where the runtime keeps a run's envelope and its finished tasks.

One port (:class:`CheckpointStore`) and the in-process backend (tests, and a runtime given no
store). The driver-backed ones are adapters: ``SqliteCheckpointStore`` (the embedded default) in
:mod:`ditto.adapters.sqlite`, ``RedisCheckpointStore`` in :mod:`ditto.adapters.redis`.
"""

from __future__ import annotations

from ditto.runtime.checkpoints.inprocess import InProcessCheckpointStore
from ditto.runtime.checkpoints.port import (
    CheckpointError,
    CheckpointInfo,
    CheckpointStore,
    Lease,
    StoredCheckpoint,
)
from ditto.runtime.checkpoints.prune import PruneResult, prune_checkpoints

__all__ = (
    "CheckpointError",
    "CheckpointInfo",
    "CheckpointStore",
    "InProcessCheckpointStore",
    "Lease",
    "PruneResult",
    "StoredCheckpoint",
    "prune_checkpoints",
)
