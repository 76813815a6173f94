"""Checkpoint stores: where the runtime keeps a run's envelope and its finished tasks.

One port (:class:`CheckpointStore`), three backends: :class:`InProcessCheckpointStore` (tests),
:class:`SqliteCheckpointStore` (the embedded default) and :class:`RedisCheckpointStore`. The two
driver-backed ones load on first use, so importing this package imports neither ``sqlite3`` nor
``redis``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ditto.lazy import lazy_attributes
from ditto.runtime.checkpoints.inprocess import InProcessCheckpointStore
from ditto.runtime.checkpoints.port import (
    CheckpointError,
    CheckpointErrorCode,
    CheckpointInfo,
    CheckpointStore,
    StoredCheckpoint,
)

if TYPE_CHECKING:
    from ditto.runtime.checkpoints.redis import RedisCheckpointStore
    from ditto.runtime.checkpoints.sqlite import SqliteCheckpointStore

__all__ = (
    "CheckpointError",
    "CheckpointErrorCode",
    "CheckpointInfo",
    "CheckpointStore",
    "InProcessCheckpointStore",
    "RedisCheckpointStore",
    "SqliteCheckpointStore",
    "StoredCheckpoint",
)

__getattr__ = lazy_attributes(
    __name__,
    globals(),
    {
        "RedisCheckpointStore": "ditto.runtime.checkpoints.redis",
        "SqliteCheckpointStore": "ditto.runtime.checkpoints.sqlite",
    },
)
