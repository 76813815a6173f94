"""The PostgreSQL memory store (the ``postgres`` extra: asyncpg)."""

from workers.memory.stores.postgres.store import PoolRecipe, PostgresMemoryStore

__all__ = ("PoolRecipe", "PostgresMemoryStore")
