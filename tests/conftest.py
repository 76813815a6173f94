"""Shared fixtures: the anyio backend and the service fixtures from ``tests/services.py``."""

from __future__ import annotations

import pytest

from tests.services import (
    mysql_space,
    mysql_url,
    postgres_space,
    postgres_url,
    redis_space,
    redis_url,
)

__all__ = (
    "mysql_space",
    "mysql_url",
    "postgres_space",
    "postgres_url",
    "redis_space",
    "redis_url",
)


@pytest.fixture
def anyio_backend() -> str:
    # asyncpg and redis.asyncio are asyncio-only, and so is the runtime's scheduler.
    return "asyncio"
