"""The PostgreSQL memory schema: versioned migrations, applied once under an advisory lock."""

from __future__ import annotations

import hashlib
import secrets
from typing import TYPE_CHECKING

from ditto.errors import ErrorCode
from workers.memory.model.errors import MemoryStoreError
from workers.memory.stores.postgres.search_impacts import keyword_impacts_step
from workers.memory.stores.postgres.search_schema import keyword_statistics_step

if TYPE_CHECKING:
    from workers.memory.stores.postgres.pool import Connection

__all__ = ("MIGRATIONS", "lock_id", "migrate")


def lock_id(schema: str, namespace: str, key: str) -> int:
    """The advisory lock of ``(namespace, key)`` in ``schema`` (64 bits of a hash)."""
    digest = hashlib.blake2b(f"{schema}\0{namespace}\0{key}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


async def migrate(connection: Connection, schema: str, s: str) -> bytes:
    """Apply the versioned migrations the schema lacks, in one transaction under an advisory
    lock (two processes starting at once do not race).

    Args:
        connection: A connection outside any transaction.
        schema: The schema name; ``s`` is the same name quoted.

    Returns:
        The store's cursor key.

    Raises:
        MemoryStoreError: ``STORE_CORRUPT`` when the schema was written by a newer version of
            Ditto.
    """
    async with connection.transaction():
        await connection.execute("SELECT pg_advisory_xact_lock($1)", lock_id(schema, "", "migrate"))
        await connection.execute(f"CREATE SCHEMA IF NOT EXISTS {s}")
        await connection.execute(
            f"CREATE TABLE IF NOT EXISTS {s}.ditto_meta "
            "(name text PRIMARY KEY, value bytea NOT NULL)"
        )
        version_row = await connection.fetchval(
            f"SELECT value FROM {s}.ditto_meta WHERE name = 'schema_version'"
        )
        current = int(version_row.decode()) if version_row is not None else 0
        steps = MIGRATIONS(s)
        if current > len(steps):
            raise MemoryStoreError(
                f"this memory schema has version {current}; this version of Ditto knows up to "
                f"{len(steps)}. Upgrade Ditto to open it.",
                code=ErrorCode.STORE_CORRUPT,
            )
        for statements in steps[current:]:
            for statement in statements:
                await connection.execute(statement)
        if current == 0:
            await connection.execute(
                f"INSERT INTO {s}.ditto_meta (name, value) VALUES ('cursor_secret', $1) "
                "ON CONFLICT (name) DO NOTHING",
                secrets.token_bytes(32),
            )
        await connection.execute(
            f"INSERT INTO {s}.ditto_meta (name, value) VALUES ('schema_version', $1) "
            "ON CONFLICT (name) DO UPDATE SET value = excluded.value",
            str(len(steps)).encode(),
        )
        return bytes(
            await connection.fetchval(
                f"SELECT value FROM {s}.ditto_meta WHERE name = 'cursor_secret'"
            )
        )


def MIGRATIONS(s: str) -> tuple[tuple[str, ...], ...]:
    """Versioned schema steps for schema ``s`` (quoted). Content, tags and metadata are JSON
    text (exact round trips; ``jsonb`` would reorder keys and cannot hold ``\\u0000``);
    timestamps are integer microseconds, exactly as in SQLite, so order and cursors agree."""
    return (
        (
            f"""
            CREATE TABLE {s}.memories (
                id text COLLATE "C" PRIMARY KEY,
                namespace text NOT NULL,
                key text,
                content text NOT NULL,
                summary text,
                category text NOT NULL,
                tags text NOT NULL,
                metadata text NOT NULL,
                source text,
                created_at bigint NOT NULL,
                updated_at bigint NOT NULL,
                version integer NOT NULL,
                search_text text NOT NULL,
                tsv tsvector GENERATED ALWAYS AS (to_tsvector('english', search_text)) STORED
            )
            """,
            f"CREATE UNIQUE INDEX memories_namespace_key ON {s}.memories (namespace, key) "
            "WHERE key IS NOT NULL",
            f"CREATE INDEX memories_created ON {s}.memories (created_at, id)",
            f"CREATE INDEX memories_updated ON {s}.memories (updated_at, id)",
            # Usage counters change on every search; in their own table those updates never
            # rewrite a record, recompute its tsvector or grow the GIN index's pending list.
            f"""
            CREATE TABLE {s}.memory_usage (
                id text COLLATE "C" PRIMARY KEY REFERENCES {s}.memories (id) ON DELETE CASCADE,
                usage_count integer NOT NULL,
                last_used_at bigint NOT NULL
            )
            """,
            f"CREATE INDEX memory_usage_count ON {s}.memory_usage (usage_count, id)",
            f"CREATE INDEX memory_usage_last_used ON {s}.memory_usage (last_used_at, id)",
            f"CREATE INDEX memories_namespace_created ON {s}.memories (namespace, created_at, id)",
            f"CREATE INDEX memories_tsv ON {s}.memories USING gin (tsv)",
        ),
        (
            # Every change of a record, oldest first per record; it outlives the record.
            f"""
            CREATE TABLE {s}.memory_history (
                seq bigserial PRIMARY KEY,
                id text COLLATE "C" NOT NULL,
                version integer NOT NULL,
                change text NOT NULL,
                at bigint NOT NULL,
                record text NOT NULL
            )
            """,
            f"CREATE INDEX memory_history_id ON {s}.memory_history (id, seq)",
        ),
        (
            # Governance: pinning, archiving (retention), ownership and visibility (access).
            f"ALTER TABLE {s}.memories ADD COLUMN pinned boolean NOT NULL DEFAULT false, "
            "ADD COLUMN archived_at bigint, ADD COLUMN owner text, "
            "ADD COLUMN visibility text NOT NULL DEFAULT 'shared'",
            # Append-only: rows are only ever inserted, and deleted by the audit retention rule.
            f"""
            CREATE TABLE {s}.memory_audit (
                seq bigserial PRIMARY KEY,
                at bigint NOT NULL,
                principal text,
                node text NOT NULL,
                ids text NOT NULL,
                decision text NOT NULL,
                detail text
            )
            """,
            f"CREATE INDEX memory_audit_at ON {s}.memory_audit (at)",
        ),
        _vector_steps(s),
        (
            # The audit log names record keys and categories too, and records failed calls.
            f"ALTER TABLE {s}.memory_audit ADD COLUMN keys text NOT NULL DEFAULT '[]', "
            "ADD COLUMN categories text NOT NULL DEFAULT '[]'",
        ),
        (
            # Provenance and validity (the write policy). Only an active record holds its
            # key: superseded, contested and quarantined ones share it with the holder.
            f"ALTER TABLE {s}.memories ADD COLUMN trust text, ADD COLUMN principal text, "
            "ADD COLUMN status text NOT NULL DEFAULT 'active', ADD COLUMN valid_from bigint, "
            "ADD COLUMN valid_to bigint, ADD COLUMN expires_at bigint, "
            "ADD COLUMN supersedes text, ADD COLUMN contests text",
            f"DROP INDEX {s}.memories_namespace_key",
            f"CREATE UNIQUE INDEX memories_namespace_key ON {s}.memories (namespace, key) "
            "WHERE key IS NOT NULL AND status = 'active'",
            f"CREATE INDEX memories_expires ON {s}.memories (expires_at) "
            "WHERE expires_at IS NOT NULL",
        ),
        (
            # The sources that stated a record's fact again (the dedupe stage), a JSON list.
            f"ALTER TABLE {s}.memories ADD COLUMN sources text NOT NULL DEFAULT '[]'",
            # Who decided a review (accept, reject): a person, named on the history entries.
            f"ALTER TABLE {s}.memory_history ADD COLUMN reviewer text",
        ),
        keyword_statistics_step(s),
        keyword_impacts_step(s),
    )


def _vector_steps(s: str) -> tuple[str, ...]:
    """Schema step 4 (vectors, see ``vectors``) for schema ``s`` (quoted)."""
    return (
        f"""
        CREATE TABLE {s}.memory_vectors (
            id text COLLATE "C" NOT NULL,
            model text NOT NULL,
            dimension integer NOT NULL,
            vector bytea NOT NULL,
            text_hash text NOT NULL,
            gen bigint NOT NULL,
            PRIMARY KEY (id, model, dimension)
        )
        """,
        f"CREATE INDEX memory_vectors_gen ON {s}.memory_vectors (gen)",
        f"CREATE TABLE {s}.memory_vector_tombstones (gen bigint NOT NULL, id text NOT NULL)",
        f"CREATE INDEX memory_vector_tombstones_gen ON {s}.memory_vector_tombstones (gen)",
        f"""
        CREATE TABLE {s}.memory_vector_state (
            singleton integer PRIMARY KEY CHECK (singleton = 1),
            model text,
            dimension integer,
            target_model text,
            target_dimension integer,
            generation bigint NOT NULL
        )
        """,
        f"INSERT INTO {s}.memory_vector_state (singleton, generation) VALUES (1, 0)",
    )
