"""The one place that turns :class:`~ditto.config.Settings` into stores, workers and a runtime.

The runtime core never imports a worker; applications that want "what ``ditto.yaml`` says" call
:func:`open_runtime` instead of wiring stores by hand::

    async with open_runtime() as runtime:
        await runtime.invoke("MEMORY.WRITE", {"memories": [{"content": "hello"}]})
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from ditto.config import Settings, load_config
from ditto.runtime.runtime import Ditto, create_ditto
from ditto.runtime.worker import WorkerDefinition

if TYPE_CHECKING:
    from workers.memory.ports import MemoryStore

__all__ = ("build_memory_store", "open_runtime")


def build_memory_store(settings: Settings) -> MemoryStore:
    """The memory store ``settings`` describe (not opened yet)."""
    from workers.memory import InProcessMemoryStore, SqliteMemoryStore

    memory = settings.workers.memory
    if memory.backend == "inprocess":
        return InProcessMemoryStore()
    return SqliteMemoryStore(Path(memory.sqlite_path))


@asynccontextmanager
async def open_runtime(
    settings: Settings | None = None, *, workers: Iterable[WorkerDefinition] = ()
) -> AsyncIterator[Ditto]:
    """A runtime with the configured MEMORY worker (plus ``workers``), closed on exit.

    The store is opened first and closed last, after the runtime has drained.

    Args:
        settings: Configuration; default :func:`~ditto.config.load_config` (``ditto.yaml`` and
            the environment).
        workers: More worker definitions to register.
    """
    from workers.memory import create_memory_worker

    settings = settings if settings is not None else load_config()
    memory = settings.workers.memory
    async with AsyncExitStack() as stack:
        store = await stack.enter_async_context(build_memory_store(settings))
        worker = create_memory_worker(
            store,
            query_limit=memory.query_limit,
            search_limit=memory.search_limit,
            track_usage=memory.track_usage,
        )
        runtime = await stack.enter_async_context(
            create_ditto(config=settings, workers=[worker, *workers])
        )
        yield runtime
