"""The SQLite memory store: the embedded default (one file, no server)."""

from workers.memory.stores.sqlite.store import SqliteMemoryStore

__all__ = ("SqliteMemoryStore",)
