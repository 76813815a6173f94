"""``Memory`` and ``AsyncMemory``: agent memory in three lines.

    from ditto import Memory

    m = Memory("memory.sqlite")
    m.add("I prefer 4-space indentation", key="indent")
    print(m.search("coding preferences")[0].memory.content)

Both are thin layers over a runtime with the MEMORY worker on a SQLite file (or a PostgreSQL
URL): every call is a ``runtime.invoke``, so validation, access control, audit and usage
tracking are the same as for any other caller. ``AsyncMemory`` has the same methods as
coroutines; ``Memory`` runs them on an event loop of its own, in a background thread, so it
works from plain scripts and notebooks alike. Close either with ``close()`` or a ``with`` block.
"""

from __future__ import annotations

import asyncio
import builtins
import importlib
import os
import threading
import weakref
from collections.abc import Coroutine, Iterable, Mapping
from contextlib import AsyncExitStack
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from ditto.errors import InvalidInputError

if TYPE_CHECKING:
    from types import TracebackType

    from ditto.runtime import Ditto
    from workers.memory import MemoryItem, SearchHit
    from workers.memory.retrieval.embeddings import Embedder

__all__ = ("AsyncMemory", "Memory")

T = TypeVar("T")
EmbedderChoice = Literal["none", "hashing", "minilm"]


class AsyncMemory:
    """Agent memory on one store, as coroutines.

    Args:
        location: A SQLite file (created if missing) or a ``postgresql://`` URL (needs the
            ``postgres`` extra).
        embedder: ``"none"`` (keyword search), ``"hashing"``, ``"minilm"`` (needs the
            ``embeddings`` extra and ``ditto models install``) or any :class:`Embedder`.
        namespace: The namespace calls use unless they name another.
        principal: Who the calls act for (access control and audit).

    The store opens on the first call; ``close()`` (or leaving ``async with``) closes it.
    """

    def __init__(
        self,
        location: str | os.PathLike[str] = "memory.sqlite",
        *,
        embedder: EmbedderChoice | Embedder = "none",
        namespace: str = "default",
        principal: str | None = None,
    ) -> None:
        self.location = os.fspath(location)
        if not self.location:
            raise InvalidInputError("Memory needs a SQLite file path or a PostgreSQL URL")
        self.namespace = namespace
        self.principal = principal
        self._embedder = embedder
        self._stack: AsyncExitStack | None = None
        self._runtime: Ditto | None = None
        self._opening = asyncio.Lock()
        self._closed = False

    async def __aenter__(self) -> AsyncMemory:
        await self._open()
        return self

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        await self.close()

    # ----------------------------------------------------------------- the API

    async def add(
        self,
        content: Any,
        *,
        key: str | None = None,
        category: str = "core",
        tags: Iterable[str] = (),
        metadata: Mapping[str, Any] | None = None,
        namespace: str | None = None,
    ) -> MemoryItem:
        """Remember ``content`` (any JSON value). With a ``key``, adding again replaces the
        record under that key (an upsert); without one, each call adds a record."""
        draft: dict[str, Any] = {
            "content": content,
            "category": category,
            "tags": list(tags),
            "metadata": dict(metadata or {}),
            "namespace": namespace or self.namespace,
        }
        if key is not None:
            draft["key"] = key
        mode = "upsert" if key is not None else "create"
        output = await self._call("MEMORY.WRITE", {"memories": [draft], "mode": mode})
        item: MemoryItem = output.items[0]
        return item

    async def search(
        self,
        query: str,
        *,
        limit: int = 5,
        category: str | None = None,
        min_score: float | None = None,
        namespace: str | None = None,
    ) -> builtins.list[SearchHit]:
        """The records best matching ``query``, best first (keyword, or hybrid with an
        embedder); scores are in [0, 1]."""
        filter: dict[str, Any] = {"namespace": namespace or self.namespace}
        if category is not None:
            filter["category"] = category
        request: dict[str, Any] = {"query": query, "limit": limit, "filter": filter}
        if min_score is not None:
            request["options"] = {"min_score": min_score}
        hits: builtins.list[SearchHit] = (await self._call("MEMORY.SEARCH", request)).hits
        return hits

    async def get(self, key: str, *, namespace: str | None = None) -> MemoryItem | None:
        """The record under ``key``, or ``None``."""
        output = await self._call(
            "MEMORY.GET", {"keys": [key], "namespace": namespace or self.namespace}
        )
        return output.items[0] if output.items else None

    async def forget(self, key: str, *, namespace: str | None = None) -> bool:
        """Delete the record under ``key``; ``False`` when there was none."""
        output = await self._call(
            "MEMORY.DELETE", {"keys": [key], "namespace": namespace or self.namespace}
        )
        return bool(output.deleted)

    async def list(
        self,
        *,
        category: str | None = None,
        limit: int = 100,
        namespace: str | None = None,
    ) -> builtins.list[MemoryItem]:
        """Records, oldest first (at most ``limit``)."""
        filter: dict[str, Any] = {"namespace": namespace or self.namespace}
        if category is not None:
            filter["category"] = category
        items: builtins.list[MemoryItem] = (
            await self._call("MEMORY.QUERY", {"filter": filter, "limit": limit})
        ).items
        return items

    async def close(self) -> None:
        """Close the runtime and the store (idempotent)."""
        self._closed = True
        stack, self._stack, self._runtime = self._stack, None, None
        if stack is not None:
            await stack.aclose()

    @property
    def runtime(self) -> Ditto | None:
        """The runtime underneath (``None`` until the first call): for graphs and tools."""
        return self._runtime

    # ----------------------------------------------------------------- plumbing

    async def _call(self, node: str, payload: dict[str, Any]) -> Any:
        runtime = await self._open()
        result = await runtime.invoke(node, payload, principal=self.principal)
        return result.unwrap()

    async def _open(self) -> Ditto:
        if self._runtime is not None:
            return self._runtime
        async with self._opening:
            if self._closed:
                raise InvalidInputError("this Memory is closed")
            if self._runtime is None:
                from ditto.runtime import create_ditto
                from workers.memory import create_memory_worker

                stack = AsyncExitStack()
                try:
                    store = await stack.enter_async_context(self._store())
                    worker = create_memory_worker(store, embedder=self._build_embedder())
                    self._runtime = await stack.enter_async_context(
                        create_ditto(workers=[worker], config=None)
                    )
                except BaseException:
                    await stack.aclose()
                    raise
                self._stack = stack
            return self._runtime

    def _store(self) -> Any:
        if self.location.startswith(("postgresql://", "postgres://")):
            from workers.memory.stores.postgres import PostgresMemoryStore

            return PostgresMemoryStore.from_url(self.location)
        from workers.memory import SqliteMemoryStore

        return SqliteMemoryStore(self.location)

    def _build_embedder(self) -> Embedder | None:
        from workers.memory.retrieval.embeddings import HashingEmbedder, MiniLMEmbedder

        choice = self._embedder
        if choice == "none":
            return None
        if choice == "hashing":
            return HashingEmbedder()
        if choice == "minilm":
            return MiniLMEmbedder()
        if isinstance(choice, str):
            raise InvalidInputError("embedder must be none, hashing, minilm or an Embedder")
        return choice


class Memory:
    """Agent memory on one store, synchronously: :class:`AsyncMemory`'s methods, run on an
    event loop in a background thread this object owns (so it also works where a loop is
    already running, as in a notebook). Same arguments as :class:`AsyncMemory`."""

    def __init__(
        self,
        location: str | os.PathLike[str] = "memory.sqlite",
        *,
        embedder: EmbedderChoice | Embedder = "none",
        namespace: str = "default",
        principal: str | None = None,
    ) -> None:
        self._async = AsyncMemory(
            location, embedder=embedder, namespace=namespace, principal=principal
        )
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, name="ditto-memory", daemon=True
        )
        self._thread.start()
        # Closes the store even if the program never calls close(): on garbage collection or
        # at interpreter exit (pending usage counters are written, the file is left tidy).
        self._finalizer = weakref.finalize(self, _shutdown, self._async, self._loop, self._thread)
        # At exit, concurrent.futures stops accepting work before atexit handlers (and so weakref
        # finalizers) run, and the store needs its threads to close. Its own hook is threading's
        # private "before exit" list; registered later, ours runs before it.
        importlib.import_module("concurrent.futures.thread")  # its hook first, so ours runs before
        before_exit = getattr(threading, "_register_atexit", None)
        if before_exit is not None:
            before_exit(self._finalizer)

    def __enter__(self) -> Memory:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.close()

    def add(self, content: Any, **options: Any) -> MemoryItem:
        """See :meth:`AsyncMemory.add`."""
        return self._run(self._async.add(content, **options))

    def search(self, query: str, **options: Any) -> builtins.list[SearchHit]:
        """See :meth:`AsyncMemory.search`."""
        return self._run(self._async.search(query, **options))

    def get(self, key: str, **options: Any) -> MemoryItem | None:
        """See :meth:`AsyncMemory.get`."""
        return self._run(self._async.get(key, **options))

    def forget(self, key: str, **options: Any) -> bool:
        """See :meth:`AsyncMemory.forget`."""
        return self._run(self._async.forget(key, **options))

    def list(self, **options: Any) -> builtins.list[MemoryItem]:
        """See :meth:`AsyncMemory.list`."""
        return self._run(self._async.list(**options))

    def close(self) -> None:
        """Close the store and stop the background loop (idempotent)."""
        self._finalizer()

    def _run(self, call: Coroutine[Any, Any, T]) -> T:
        if not self._finalizer.alive:
            call.close()
            raise InvalidInputError("this Memory is closed")
        return asyncio.run_coroutine_threadsafe(call, self._loop).result()


def _shutdown(
    memory: AsyncMemory, loop: asyncio.AbstractEventLoop, thread: threading.Thread
) -> None:
    try:
        asyncio.run_coroutine_threadsafe(memory.close(), loop).result()
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join()
        loop.close()
