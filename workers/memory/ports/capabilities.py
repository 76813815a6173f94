"""Which optional capabilities a store offers, by name, and asking for one."""

from __future__ import annotations

from typing import TypeVar

from ditto.errors import ErrorCode
from workers.memory.model.errors import MemoryStoreError
from workers.memory.ports.audit import AuditLog
from workers.memory.ports.changes import ChangeFeed
from workers.memory.ports.history import HistoryLog, RecordImport
from workers.memory.ports.search import KeywordSearch
from workers.memory.ports.store import MemoryStore, UsageTracking
from workers.memory.ports.vectors import VectorStore

__all__ = ("CAPABILITIES", "capabilities", "require")

P = TypeVar("P")

CAPABILITIES: dict[str, type] = {
    "usage": UsageTracking,
    "keyword search": KeywordSearch,
    "vectors": VectorStore,
    "history": HistoryLog,
    "audit log": AuditLog,
    "import": RecordImport,
    "change feed": ChangeFeed,
}
"""Each optional capability by the name the CLI and the README use."""


def capabilities(store: MemoryStore) -> list[str]:
    """The names of the capabilities ``store`` offers, in the order of :data:`CAPABILITIES`."""
    return [name for name, port in CAPABILITIES.items() if isinstance(store, port)]


def require(store: MemoryStore, port: type[P]) -> P:
    """``store`` as ``port``.

    Raises:
        MemoryStoreError: ``UNSUPPORTED`` when the store lacks the capability.
    """
    if not isinstance(store, port):
        name = next((name for name, known in CAPABILITIES.items() if known is port), port.__name__)
        raise MemoryStoreError(
            f"{type(store).__name__} has no {name} capability", code=ErrorCode.UNSUPPORTED
        )
    return store
