"""How a PostgreSQL store that owns its connections builds them."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, TypeAlias

import asyncpg

__all__ = ("Connection", "PoolRecipe")

Connection: TypeAlias = "asyncpg.Connection[Any] | asyncpg.pool.PoolConnectionProxy[Any]"
"""What a store method is handed: a connection, or the pool's proxy of one."""


@dataclass(frozen=True, slots=True)
class PoolRecipe:
    """How :meth:`PostgresMemoryStore.from_url` builds the pool the store then owns."""

    url: str = field(repr=False)  # never printed: it may carry a password
    size: int = 10
    statement_timeout_ms: int = 30_000

    async def create(self) -> asyncpg.Pool:
        return await asyncpg.create_pool(
            self.url,
            min_size=1,
            max_size=self.size,
            server_settings={"statement_timeout": str(self.statement_timeout_ms)},
        )
