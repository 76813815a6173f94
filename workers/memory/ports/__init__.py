"""The MEMORY worker's ports: one core store, one protocol per optional capability.

=================  =========================================================  ==================
port               what it adds                                               used by
=================  =========================================================  ==================
``MemoryStore``    get, query, write, update, delete (with guards)            every node,
                                                                              retention, export
``UsageTracking``  usage counters                                             SEARCH, retention
``KeywordSearch``  the store's own BM25 ranking                               SEARCH (keyword)
``VectorStore``    vectors with records, exact cosine ranking, reindex        SEARCH (vector)
``HistoryLog``     every change of every record                               ``memory history``
``AuditLog``       append-only access decisions, audit retention              ``audit=True``
``RecordImport``   records stored exactly as exported                         ``memory import``
``ChangeFeed``     which records changed since a point, a few columns each    the dedupe stage
=================  =========================================================  ==================

Retention needs nothing beyond the core: it archives and purges through ``update`` and
``delete`` with a guard that re-checks each record inside the store's transaction (and trims
the audit log where the store has one). :func:`capabilities` says what a store offers.
"""

from workers.memory.ports.audit import AuditEvent, AuditLog
from workers.memory.ports.capabilities import CAPABILITIES, capabilities, require
from workers.memory.ports.changes import ChangedRecord, ChangeFeed
from workers.memory.ports.history import HistoryLog, RecordImport
from workers.memory.ports.search import KeywordSearch, MemorySearchProvider
from workers.memory.ports.store import MemoryStore, QueryPosition, UsageTracking
from workers.memory.ports.vectors import VectorStore

__all__ = (
    "CAPABILITIES",
    "AuditEvent",
    "AuditLog",
    "ChangeFeed",
    "ChangedRecord",
    "HistoryLog",
    "KeywordSearch",
    "MemorySearchProvider",
    "MemoryStore",
    "QueryPosition",
    "RecordImport",
    "UsageTracking",
    "VectorStore",
    "capabilities",
    "require",
)
