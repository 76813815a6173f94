"""The SQLite memory schema and its versioned migrations (``PRAGMA user_version``)."""

from __future__ import annotations

import secrets
import sqlite3

from ditto.errors import ErrorCode
from workers.memory.model.errors import MemoryStoreError

__all__ = ("SCHEMA_VERSION", "migrate", "read_cursor_secret")

_V1 = (
    # Timestamps are integer microseconds since the epoch (UTC): exact, indexable, comparable.
    # JSON columns hold msgspec-encoded JSON text. `seq` is the FTS rowid.
    """
    CREATE TABLE memories (
        seq INTEGER PRIMARY KEY,
        id TEXT NOT NULL UNIQUE,
        namespace TEXT NOT NULL,
        key TEXT,
        content TEXT NOT NULL,
        summary TEXT,
        category TEXT NOT NULL,
        tags TEXT NOT NULL,
        metadata TEXT NOT NULL,
        source TEXT,
        created_at INTEGER NOT NULL,
        updated_at INTEGER NOT NULL,
        version INTEGER NOT NULL,
        usage_count INTEGER NOT NULL DEFAULT 0,
        last_used_at INTEGER
    ) STRICT
    """,
    "CREATE UNIQUE INDEX memories_namespace_key ON memories(namespace, key) WHERE key IS NOT NULL",
    "CREATE INDEX memories_created ON memories(created_at, id)",
    "CREATE INDEX memories_updated ON memories(updated_at, id)",
    "CREATE INDEX memories_usage ON memories(usage_count, id)",
    "CREATE INDEX memories_last_used ON memories(coalesce(last_used_at, -1), id)",
    "CREATE INDEX memories_namespace_created ON memories(namespace, created_at, id)",
    "CREATE VIRTUAL TABLE memory_fts USING fts5(key, summary, body, tokenize='porter unicode61')",
    "CREATE VIRTUAL TABLE memory_fts_vocab USING fts5vocab(memory_fts, 'row')",
    "CREATE TABLE ditto_meta (name TEXT PRIMARY KEY, value BLOB NOT NULL) STRICT",
)

_V2 = (
    # Every change of a record, oldest first per record; it outlives the record.
    """
    CREATE TABLE memory_history (
        seq INTEGER PRIMARY KEY,
        id TEXT NOT NULL,
        version INTEGER NOT NULL,
        change TEXT NOT NULL,
        at INTEGER NOT NULL,
        record TEXT NOT NULL
    ) STRICT
    """,
    "CREATE INDEX memory_history_id ON memory_history(id, seq)",
)

_V3 = (
    # Governance: pinning, archiving (retention), ownership and visibility (access control).
    "ALTER TABLE memories ADD COLUMN pinned INTEGER NOT NULL DEFAULT 0",
    "ALTER TABLE memories ADD COLUMN archived_at INTEGER",
    "ALTER TABLE memories ADD COLUMN owner TEXT",
    "ALTER TABLE memories ADD COLUMN visibility TEXT NOT NULL DEFAULT 'shared'",
    # Append-only: rows are only ever inserted, and deleted by the audit retention rule.
    """
    CREATE TABLE memory_audit (
        seq INTEGER PRIMARY KEY,
        at INTEGER NOT NULL,
        principal TEXT,
        node TEXT NOT NULL,
        ids TEXT NOT NULL,
        decision TEXT NOT NULL,
        detail TEXT
    ) STRICT
    """,
    "CREATE INDEX memory_audit_at ON memory_audit(at)",
)

_V4 = (
    # Vectors per record and model: the active model's, and a reindex's target's beside them
    # (see workers.memory.retrieval.vectors). `gen` numbers every change under the write lock, so a
    # process's cached index reads only what is newer than itself.
    """
    CREATE TABLE memory_vectors (
        id TEXT NOT NULL,
        model TEXT NOT NULL,
        dimension INTEGER NOT NULL,
        vector BLOB NOT NULL,
        text_hash TEXT NOT NULL,
        gen INTEGER NOT NULL,
        PRIMARY KEY (id, model, dimension)
    ) STRICT
    """,
    "CREATE INDEX memory_vectors_gen ON memory_vectors(gen)",
    "CREATE TABLE memory_vector_tombstones (gen INTEGER NOT NULL, id TEXT NOT NULL) STRICT",
    "CREATE INDEX memory_vector_tombstones_gen ON memory_vector_tombstones(gen)",
    """
    CREATE TABLE memory_vector_state (
        singleton INTEGER PRIMARY KEY CHECK (singleton = 1),
        model TEXT,
        dimension INTEGER,
        target_model TEXT,
        target_dimension INTEGER,
        generation INTEGER NOT NULL
    ) STRICT
    """,
    "INSERT INTO memory_vector_state (singleton, generation) VALUES (1, 0)",
)

_V5 = (
    # The audit log names record keys and categories too, and records failed calls.
    "ALTER TABLE memory_audit ADD COLUMN keys TEXT NOT NULL DEFAULT '[]'",
    "ALTER TABLE memory_audit ADD COLUMN categories TEXT NOT NULL DEFAULT '[]'",
)

_V6 = (
    # Provenance and validity (the write policy). Only an active record holds its key:
    # superseded, contested and quarantined ones share it with the record that holds it.
    "ALTER TABLE memories ADD COLUMN trust TEXT",
    "ALTER TABLE memories ADD COLUMN principal TEXT",
    "ALTER TABLE memories ADD COLUMN status TEXT NOT NULL DEFAULT 'active'",
    "ALTER TABLE memories ADD COLUMN valid_from INTEGER",
    "ALTER TABLE memories ADD COLUMN valid_to INTEGER",
    "ALTER TABLE memories ADD COLUMN expires_at INTEGER",
    "ALTER TABLE memories ADD COLUMN supersedes TEXT",
    "ALTER TABLE memories ADD COLUMN contests TEXT",
    "DROP INDEX memories_namespace_key",
    "CREATE UNIQUE INDEX memories_namespace_key ON memories(namespace, key) "
    "WHERE key IS NOT NULL AND status = 'active'",
    "CREATE INDEX memories_expires ON memories(expires_at) WHERE expires_at IS NOT NULL",
)

_V7 = (
    # The sources that stated a record's fact again (the dedupe stage), as a JSON list.
    "ALTER TABLE memories ADD COLUMN sources TEXT NOT NULL DEFAULT '[]'",
    # Who decided a review (accept, reject): a person, named on the history entries.
    "ALTER TABLE memory_history ADD COLUMN reviewer TEXT",
)

_MIGRATIONS: tuple[tuple[str, ...], ...] = (_V1, _V2, _V3, _V4, _V5, _V6, _V7)
SCHEMA_VERSION = len(_MIGRATIONS)


def migrate(connection: sqlite3.Connection) -> None:
    """Bring the database to :data:`SCHEMA_VERSION`, all steps in one transaction.

    A store already at the current version is only read (no write lock), so a read-only file
    opens for reading.

    Raises:
        MemoryStoreError: ``STORE_CORRUPT``: the file was written by a newer version of Ditto.
    """
    if _version(connection) == SCHEMA_VERSION:
        return
    connection.execute("BEGIN IMMEDIATE")
    try:
        current = _version(connection)  # again, under the lock: another process may have won
        if current == SCHEMA_VERSION:
            connection.execute("COMMIT")
            return
        for statements in _MIGRATIONS[current:]:
            for statement in statements:
                connection.execute(statement)
        if current == 0:
            connection.execute(
                "INSERT INTO ditto_meta(name, value) VALUES ('cursor_secret', ?)",
                (secrets.token_bytes(32),),
            )
        connection.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        connection.execute("COMMIT")
    except BaseException:
        if connection.in_transaction:
            connection.execute("ROLLBACK")
        raise


def _version(connection: sqlite3.Connection) -> int:
    current = int(connection.execute("PRAGMA user_version").fetchone()[0])
    if current > SCHEMA_VERSION:
        raise MemoryStoreError(
            f"this memory database has schema version {current}; this version of Ditto "
            f"knows up to {SCHEMA_VERSION}. Upgrade Ditto to open it.",
            code=ErrorCode.STORE_CORRUPT,
        )
    return current


def read_cursor_secret(connection: sqlite3.Connection) -> bytes:
    row = connection.execute("SELECT value FROM ditto_meta WHERE name = 'cursor_secret'").fetchone()
    return bytes(row[0])
