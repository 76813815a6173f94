"""SQLite adapters: :class:`SqliteCheckpointStore` (the embedded default checkpoint store) and
:mod:`~ditto.adapters.sqlite.writer`, the one writer thread with group commit that every SQLite
store of the project uses."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ditto.lazy import lazy_attributes

if TYPE_CHECKING:
    from ditto.adapters.sqlite.checkpoints import SqliteCheckpointStore

__all__ = ("SqliteCheckpointStore",)

__getattr__ = lazy_attributes(
    __name__, globals(), {"SqliteCheckpointStore": "ditto.adapters.sqlite.checkpoints"}
)
