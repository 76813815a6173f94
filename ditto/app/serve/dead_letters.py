"""``ditto worker dead-letters``: what the workers under the configured prefix dead-lettered,
on the Redis of ``DITTO_RUNTIME_REMOTE_REDIS_URL`` (as ``ditto worker list`` finds it).

Each function opens a client, does one thing and closes it; Redis failures are
``TRANSPORT_UNAVAILABLE`` (the driver's text never shown: it can carry credentials).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:
    import redis.asyncio as aioredis

    from ditto.adapters.redis.dead_letters import DeadLetter, ReplayOutcome
    from ditto.app.config.settings import Settings

__all__ = ("list_dead_letters", "purge", "replay", "show")

T = TypeVar("T")


async def _on_redis(settings: Settings, work: Callable[[aioredis.Redis, str], Awaitable[T]]) -> T:
    from ditto.adapters.redis.streams import transport_errors
    from ditto.app.serve.worker import redis_client

    client = redis_client(settings, 2)
    try:
        with transport_errors():
            return await work(client, settings.runtime.remote.prefix)
    finally:
        await client.aclose()
        await client.connection_pool.disconnect()


async def list_dead_letters(settings: Settings, limit: int) -> tuple[list[DeadLetter], int]:
    """The newest ``limit`` dead letters, newest first, and how many there are."""
    from ditto.adapters.redis.dead_letters import read_dead_letters

    return await _on_redis(
        settings, lambda client, prefix: read_dead_letters(client, prefix, limit=limit)
    )


async def show(settings: Settings, letter_id: str) -> DeadLetter | None:
    """One dead letter (``None``: no such id)."""
    from ditto.adapters.redis.dead_letters import read_dead_letter

    return await _on_redis(
        settings, lambda client, prefix: read_dead_letter(client, prefix, letter_id)
    )


async def replay(settings: Settings, letter_id: str) -> tuple[ReplayOutcome, DeadLetter | None]:
    """Put a dead call back on its stream if its deadline has not passed."""
    from ditto.adapters.redis.dead_letters import replay_dead_letter

    return await _on_redis(
        settings, lambda client, prefix: replay_dead_letter(client, prefix, letter_id)
    )


async def purge(settings: Settings, older_than: float | None) -> int:
    """Delete the dead letters (older than ``older_than`` seconds); how many."""
    from ditto.adapters.redis.dead_letters import purge_dead_letters

    return await _on_redis(
        settings, lambda client, prefix: purge_dead_letters(client, prefix, older_than=older_than)
    )
