"""Checkpoint stores: where the runtime keeps a run's envelope and its finished tasks.

One port (:class:`CheckpointStore`), three backends: :class:`InProcessCheckpointStore` (tests),
:class:`SqliteCheckpointStore` (the embedded default) and :class:`RedisCheckpointStore`. The two
driver-backed ones load on first use, so importing this package imports neither ``sqlite3`` nor
``redis``.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

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

_LAZY = {
    "RedisCheckpointStore": "ditto.runtime.checkpoints.redis",
    "SqliteCheckpointStore": "ditto.runtime.checkpoints.sqlite",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(module), name)
    globals()[name] = value
    return value
