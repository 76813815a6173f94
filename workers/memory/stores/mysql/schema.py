"""The MySQL memory schema: versioned migrations, applied once under a named server lock.

MySQL commits DDL implicitly, so a migration is not one transaction: each step is idempotent
in effect (the version row moves after its last statement) and two processes starting at once
serialise on ``GET_LOCK``.
"""

from __future__ import annotations

import secrets

from ditto.errors import ErrorCode
from workers.memory.model.errors import MemoryStoreError
from workers.memory.stores.mysql.vectors import VECTOR_STEPS
from workers.memory.stores.sql_driver import SqlDriver, convert

__all__ = ("MIGRATIONS", "migrate")

_COLLATIONS = ("utf8mb4_nopad_bin", "utf8mb4_0900_bin", "utf8mb4_bin")
"""Exact, case- and accent-sensitive text comparison; a NO PAD collation first, so ``'a'``
and ``'a '`` are different keys (MariaDB, then MySQL 8; plain ``utf8mb4_bin`` pads)."""


async def migrate(driver: SqlDriver) -> bytes:
    """Apply the versioned migrations the database lacks.

    Returns:
        The store's cursor key.

    Raises:
        MemoryStoreError: ``STORE_CORRUPT`` when the schema was written by a newer Ditto.
    """
    style = driver.placeholder
    async with driver.transaction() as bound:
        # A session lock, held across the implicit commits of the DDL below.
        await bound.rows("SELECT GET_LOCK(CONCAT(DATABASE(), '.ditto_migrate'), 60)")
        try:
            names = await bound.rows(
                convert(
                    "SELECT COLLATION_NAME FROM information_schema.COLLATIONS "
                    "WHERE COLLATION_NAME IN (?, ?, ?)",
                    style,
                ),
                _COLLATIONS,
            )
            known = {row[0] for row in names}
            collation = next(name for name in (*_COLLATIONS, "utf8mb4_bin") if name in known)
            table = f"ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE={collation}"
            # Asked first, not CREATE ... IF NOT EXISTS or INSERT IGNORE below: both leave a
            # server warning that asyncmy logs on every open (the migrate lock is held).
            exists = await bound.rows(
                "SELECT 1 FROM information_schema.TABLES "
                "WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'ditto_meta'"
            )
            if not exists:
                await bound.execute(
                    "CREATE TABLE ditto_meta (name VARCHAR(64) PRIMARY KEY, "
                    f"value VARBINARY(255) NOT NULL) {table}"
                )
            rows = await bound.rows("SELECT value FROM ditto_meta WHERE name = 'schema_version'")
            current = int(bytes(rows[0][0]).decode()) if rows else 0
            steps = MIGRATIONS(table)
            if current > len(steps):
                raise MemoryStoreError(
                    f"this memory schema has version {current}; this version of Ditto knows up "
                    f"to {len(steps)}. Upgrade Ditto to open it.",
                    code=ErrorCode.STORE_CORRUPT,
                )
            for number, statements in enumerate(steps[current:], start=current + 1):
                for statement in statements:
                    await bound.execute(statement)
                await bound.execute(
                    convert(
                        "INSERT INTO ditto_meta (name, value) VALUES ('schema_version', ?) "
                        "ON DUPLICATE KEY UPDATE value = VALUES(value)",
                        style,
                    ),
                    (str(number).encode(),),
                )
            await bound.execute(
                convert(
                    "INSERT INTO ditto_meta (name, value) VALUES ('cursor_secret', ?) "
                    "ON DUPLICATE KEY UPDATE name = name",
                    style,
                ),
                (secrets.token_bytes(32),),
            )
            secret = await bound.rows("SELECT value FROM ditto_meta WHERE name = 'cursor_secret'")
            return bytes(secret[0][0])
        finally:
            await bound.rows("SELECT RELEASE_LOCK(CONCAT(DATABASE(), '.ditto_migrate'))")


_KEY_HASH = "UNHEX(SHA2(CONCAT(`namespace`, CHAR(0), `key`), 256))"
"""A key's identity: ``(namespace, key)`` is too long for an index, its SHA-256 is not (the
stores compute the same bytes in Python: ``sql.key_hash``)."""


def MIGRATIONS(table: str) -> tuple[tuple[str, ...], ...]:
    """Versioned schema steps; ``table`` is the options every table is created with.

    Content, tags and metadata are JSON text (exact round trips); timestamps are integer
    microseconds, exactly as in SQLite and PostgreSQL, so order and cursors agree. Only an
    active record holds its key (``active_key`` is unique, NULL otherwise): superseded,
    contested and quarantined records share it with the holder.
    """
    return (
        (
            f"""
            CREATE TABLE memories (
                `id` VARCHAR(255) NOT NULL PRIMARY KEY,
                `namespace` VARCHAR(256) NOT NULL,
                `key` VARCHAR(1024) NULL,
                `content` LONGTEXT NOT NULL,
                `summary` LONGTEXT NULL,
                `category` VARCHAR(256) NOT NULL,
                `tags` LONGTEXT NOT NULL,
                `metadata` LONGTEXT NOT NULL,
                `source` VARCHAR(1024) NULL,
                `created_at` BIGINT NOT NULL,
                `updated_at` BIGINT NOT NULL,
                `version` INT NOT NULL,
                `pinned` BOOLEAN NOT NULL DEFAULT FALSE,
                `archived_at` BIGINT NULL,
                `owner` VARCHAR(1024) NULL,
                `visibility` VARCHAR(32) NOT NULL DEFAULT 'shared',
                `trust` VARCHAR(64) NULL,
                `principal` VARCHAR(1024) NULL,
                `status` VARCHAR(32) NOT NULL DEFAULT 'active',
                `valid_from` BIGINT NULL,
                `valid_to` BIGINT NULL,
                `expires_at` BIGINT NULL,
                `supersedes` VARCHAR(255) NULL,
                `contests` VARCHAR(255) NULL,
                `search_terms` LONGTEXT NOT NULL,
                `search_length` INT NOT NULL,
                `key_hash` BINARY(32) AS ({_KEY_HASH}) STORED,
                `active_key` BINARY(32) AS (IF(`status` = 'active', {_KEY_HASH}, NULL)) STORED,
                UNIQUE KEY memories_active_key (`active_key`),
                KEY memories_key (`key_hash`),
                KEY memories_created (`created_at`, `id`),
                KEY memories_updated (`updated_at`, `id`),
                KEY memories_namespace_created (`namespace`, `created_at`, `id`),
                KEY memories_expires (`expires_at`),
                FULLTEXT KEY memories_terms (`search_terms`)
            ) {table}
            """,
            # Usage counters change on every search; in their own table those updates never
            # rewrite a record or touch its FULLTEXT entry.
            f"""
            CREATE TABLE memory_usage (
                `id` VARCHAR(255) NOT NULL PRIMARY KEY,
                `usage_count` INT NOT NULL,
                `last_used_at` BIGINT NOT NULL,
                KEY memory_usage_count (`usage_count`, `id`),
                KEY memory_usage_last_used (`last_used_at`, `id`),
                CONSTRAINT memory_usage_record FOREIGN KEY (`id`) REFERENCES memories (`id`)
                    ON DELETE CASCADE
            ) {table}
            """,
            # Every change of a record, oldest first per record; it outlives the record.
            f"""
            CREATE TABLE memory_history (
                `seq` BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
                `id` VARCHAR(255) NOT NULL,
                `version` INT NOT NULL,
                `change` VARCHAR(32) NOT NULL,
                `at` BIGINT NOT NULL,
                `record` LONGTEXT NOT NULL,
                KEY memory_history_id (`id`, `seq`)
            ) {table}
            """,
            # Append-only: rows are only ever inserted, and deleted by the audit retention rule.
            f"""
            CREATE TABLE memory_audit (
                `seq` BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
                `at` BIGINT NOT NULL,
                `principal` VARCHAR(1024) NULL,
                `node` VARCHAR(64) NOT NULL,
                `ids` LONGTEXT NOT NULL,
                `decision` VARCHAR(64) NOT NULL,
                `detail` LONGTEXT NULL,
                `keys` LONGTEXT NOT NULL,
                `categories` LONGTEXT NOT NULL,
                KEY memory_audit_at (`at`)
            ) {table}
            """,
            # One row per key ever written, locked FOR UPDATE by its writers: concurrent
            # writers of one key serialise here instead of failing on the unique index.
            f"CREATE TABLE memory_key_locks (`key_hash` BINARY(32) NOT NULL PRIMARY KEY) {table}",
        ),
        VECTOR_STEPS(table),
        (
            # The sources that stated a record's fact again (the dedupe stage), a JSON list.
            "ALTER TABLE memories ADD COLUMN `sources` LONGTEXT NOT NULL DEFAULT '[]'",
            # Who decided a review (accept, reject): a person, named on the history entries.
            "ALTER TABLE memory_history ADD COLUMN `reviewer` VARCHAR(1024) NULL",
        ),
    )
