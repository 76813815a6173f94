"""The MEMORY worker: durable agent memory behind seven nodes.

``MEMORY.GET``, ``QUERY``, ``SEARCH``, ``WRITE``, ``UPDATE``, ``DELETE`` and ``REVIEW`` over a
pluggable :class:`MemoryStore` (``SqliteMemoryStore`` embedded by default,
``InProcessMemoryStore`` for tests) and an optional :class:`MemorySearchProvider`.

Each name is imported on first use, so importing the package (or one of its ports) loads no
store driver, numpy or the worker.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ditto.lazy import lazy_attributes

if TYPE_CHECKING:
    from workers.memory.maintenance.retention import (
        HygieneReport,
        RetentionPolicy,
        RetentionRule,
        run_hygiene,
    )
    from workers.memory.model.contracts import (
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
    from workers.memory.model.errors import (
        MemoryErrorCode,
        MemoryStoreError,
    )
    from workers.memory.model.reviews import (
        ReviewDecision,
        ReviewInput,
        ReviewOutcome,
        ReviewOutput,
    )
    from workers.memory.ports import (
        AuditEvent,
        MemorySearchProvider,
        MemoryStore,
    )
    from workers.memory.stores.inprocess import (
        InProcessMemoryStore,
    )
    from workers.memory.stores.markdown import (
        MarkdownMemoryStore,
    )
    from workers.memory.stores.sqlite import (
        SqliteMemoryStore,
    )
    from workers.memory.worker.access import (
        AccessPolicy,
    )
    from workers.memory.worker.nodes import (
        create_memory_worker,
    )

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
    "MarkdownMemoryStore",
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
    "ReviewDecision",
    "ReviewInput",
    "ReviewOutcome",
    "ReviewOutput",
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

__getattr__ = lazy_attributes(
    __name__,
    globals(),
    {
        "AccessPolicy": "workers.memory.worker.access",
        "AuditEntry": "workers.memory.model.contracts",
        "AuditEvent": "workers.memory.ports",
        "DeleteInput": "workers.memory.model.contracts",
        "DeleteOutput": "workers.memory.model.contracts",
        "GetInput": "workers.memory.model.contracts",
        "GetOutput": "workers.memory.model.contracts",
        "HistoryEntry": "workers.memory.model.contracts",
        "HygieneReport": "workers.memory.maintenance.retention",
        "InProcessMemoryStore": "workers.memory.stores.inprocess",
        "MarkdownMemoryStore": "workers.memory.stores.markdown",
        "MemoryDraft": "workers.memory.model.contracts",
        "MemoryErrorCode": "workers.memory.model.errors",
        "MemoryFilter": "workers.memory.model.contracts",
        "MemoryItem": "workers.memory.model.contracts",
        "MemoryPatch": "workers.memory.model.contracts",
        "MemorySearchProvider": "workers.memory.ports",
        "MemoryStore": "workers.memory.ports",
        "MemoryStoreError": "workers.memory.model.errors",
        "OrderBy": "workers.memory.model.contracts",
        "QueryInput": "workers.memory.model.contracts",
        "QueryOutput": "workers.memory.model.contracts",
        "RetentionPolicy": "workers.memory.maintenance.retention",
        "RetentionRule": "workers.memory.maintenance.retention",
        "ReviewDecision": "workers.memory.model.reviews",
        "ReviewInput": "workers.memory.model.reviews",
        "ReviewOutcome": "workers.memory.model.reviews",
        "ReviewOutput": "workers.memory.model.reviews",
        "SearchHit": "workers.memory.model.contracts",
        "SearchInput": "workers.memory.model.contracts",
        "SearchOutput": "workers.memory.model.contracts",
        "SqliteMemoryStore": "workers.memory.stores.sqlite",
        "UpdateInput": "workers.memory.model.contracts",
        "UpdateOutput": "workers.memory.model.contracts",
        "WriteInput": "workers.memory.model.contracts",
        "WriteOutput": "workers.memory.model.contracts",
        "create_memory_worker": "workers.memory.worker.nodes",
        "run_hygiene": "workers.memory.maintenance.retention",
    },
)
