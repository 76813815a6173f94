"""The MEMORY worker: durable agent memory behind six nodes.

``MEMORY.GET``, ``QUERY``, ``SEARCH``, ``WRITE``, ``UPDATE`` and ``DELETE`` over a pluggable
:class:`MemoryStore` (``SqliteMemoryStore`` embedded by default, ``InProcessMemoryStore`` for
tests) and an optional :class:`MemorySearchProvider`.
"""

from workers.memory.access import AccessPolicy
from workers.memory.contracts import (
    AuditEntry,
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
from workers.memory.ports import AuditEvent, MemorySearchProvider, MemoryStore
from workers.memory.retention import HygieneReport, RetentionPolicy, RetentionRule, run_hygiene
from workers.memory.stores.inprocess import InProcessMemoryStore
from workers.memory.stores.sqlite import SqliteMemoryStore
from workers.memory.worker import create_memory_worker

__all__ = (
    "AccessPolicy",
    "AuditEntry",
    "AuditEvent",
    "DeleteInput",
    "DeleteOutput",
    "GetInput",
    "GetOutput",
    "HistoryEntry",
    "HygieneReport",
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
    "RetentionPolicy",
    "RetentionRule",
    "SearchHit",
    "SearchInput",
    "SearchOutput",
    "SqliteMemoryStore",
    "UpdateInput",
    "UpdateOutput",
    "WriteInput",
    "WriteOutput",
    "create_memory_worker",
    "run_hygiene",
)
