"""The MEMORY worker: durable agent memory behind six nodes.

``MEMORY.GET``, ``QUERY``, ``SEARCH``, ``WRITE``, ``UPDATE`` and ``DELETE`` over a pluggable
:class:`MemoryStore` (``SqliteMemoryStore`` embedded by default, ``InProcessMemoryStore`` for
tests) and an optional :class:`MemorySearchProvider`.
"""

from workers.memory.contracts import (
    DeleteInput,
    DeleteOutput,
    GetInput,
    GetOutput,
    HistoryEntry,
    MemoryDraft,
    MemoryFilter,
    MemoryItem,
    MemoryPatch,
    OrderBy,
    QueryInput,
    QueryOutput,
    SearchHit,
    SearchInput,
    SearchOutput,
    UpdateInput,
    UpdateOutput,
    WriteInput,
    WriteOutput,
)
from workers.memory.errors import MemoryErrorCode, MemoryStoreError
from workers.memory.ports import MemorySearchProvider, MemoryStore
from workers.memory.stores.inprocess import InProcessMemoryStore
from workers.memory.stores.sqlite import SqliteMemoryStore
from workers.memory.worker import create_memory_worker

__all__ = (
    "DeleteInput",
    "DeleteOutput",
    "GetInput",
    "GetOutput",
    "HistoryEntry",
    "InProcessMemoryStore",
    "MemoryDraft",
    "MemoryErrorCode",
    "MemoryFilter",
    "MemoryItem",
    "MemoryPatch",
    "MemorySearchProvider",
    "MemoryStore",
    "MemoryStoreError",
    "OrderBy",
    "QueryInput",
    "QueryOutput",
    "SearchHit",
    "SearchInput",
    "SearchOutput",
    "SqliteMemoryStore",
    "UpdateInput",
    "UpdateOutput",
    "WriteInput",
    "WriteOutput",
    "create_memory_worker",
)
