"""``Memory``: :class:`~ditto.app.memory_async.AsyncMemory`'s methods, synchronously.

Each method repeats its coroutine's keyword arguments, typed (no ``**options``), so a type
checker catches ``m.add("x", kye="k")``.
"""

from __future__ import annotations

import asyncio
import builtins
import importlib
import os
import threading
import weakref
from collections.abc import Coroutine, Iterable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from msgspec import UNSET, UnsetType

from ditto.app.memory_async import AsyncMemory
from ditto.app.memory_setup import EmbedderChoice, OwnerProcess, closed_error

if TYPE_CHECKING:
    from types import TracebackType

    from workers.memory import HistoryEntry, MemoryItem, SearchHit
    from workers.memory.model.outcomes import MissExplanation
    from workers.memory.retrieval.embeddings import Embedder

__all__ = ("Memory",)

T = TypeVar("T")


class Memory:
    """Agent memory on one store, synchronously: :class:`AsyncMemory`'s methods, run on an
    event loop in a background thread this object owns (so it also works where a loop is
    already running, as in a notebook). Same arguments, checks and errors as
    :class:`AsyncMemory`: ``Memory("/typo/dir/m.sqlite")`` fails ``STORE_UNAVAILABLE`` at once
    (``create=True`` makes the folder), an unknown embedder ``INVALID_CONFIG``.

    **Processes.** A ``Memory`` belongs to the process that opened it: its thread and its
    store's threads and connections do not survive a fork. In a forked child (gunicorn
    ``--preload``, a ``multiprocessing`` fork) every call raises ``OPENED_IN_PARENT`` at once,
    and ``close()`` does nothing; open a new ``Memory`` in the child (gunicorn: in
    ``post_fork``, or on first use in the worker).
    """

    def __init__(
        self,
        location: str | os.PathLike[str] = "memory.sqlite",
        *,
        create: bool = False,
        embedder: EmbedderChoice | Embedder = "none",
        namespace: str = "default",
        principal: str | None = None,
    ) -> None:
        self._async = AsyncMemory(
            location, create=create, embedder=embedder, namespace=namespace, principal=principal
        )
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, name="ditto-memory", daemon=True
        )
        self._thread.start()
        # Closes the store even if the program never calls close(): on garbage collection or
        # at interpreter exit (pending usage counters are written, the file is left tidy).
        self._finalizer = weakref.finalize(self, _shutdown, self._async, self._loop, self._thread)
        # A forked child has neither the loop's thread nor the store's: closing there would
        # wait for them forever, so the child lets go of them instead.
        self._owner = OwnerProcess("this Memory", on_fork=self._finalizer.detach)
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

    def add(
        self,
        content: Any,
        *,
        key: str | None = None,
        category: str = "core",
        tags: Iterable[str] = (),
        metadata: Mapping[str, Any] | None = None,
        namespace: str | None = None,
    ) -> MemoryItem:
        """See :meth:`AsyncMemory.add`."""
        return self._run(
            self._async.add(
                content,
                key=key,
                category=category,
                tags=tags,
                metadata=metadata,
                namespace=namespace,
            )
        )

    def search(
        self,
        query: str,
        *,
        limit: int = 5,
        category: str | None = None,
        min_score: float | None = None,
        namespace: str | None = None,
    ) -> builtins.list[SearchHit]:
        """See :meth:`AsyncMemory.search`."""
        return self._run(
            self._async.search(
                query, limit=limit, category=category, min_score=min_score, namespace=namespace
            )
        )

    def why(
        self, query: str, id_or_key: str, *, limit: int = 5, namespace: str | None = None
    ) -> MissExplanation:
        """See :meth:`AsyncMemory.why`."""
        return self._run(self._async.why(query, id_or_key, limit=limit, namespace=namespace))

    def get(self, id_or_key: str, *, namespace: str | None = None) -> MemoryItem | None:
        """See :meth:`AsyncMemory.get`."""
        return self._run(self._async.get(id_or_key, namespace=namespace))

    def get_all(
        self,
        *,
        category: str | None = None,
        tags: Iterable[str] = (),
        limit: int = 100,
        namespace: str | None = None,
    ) -> builtins.list[MemoryItem]:
        """See :meth:`AsyncMemory.get_all` (also called :meth:`list`)."""
        return self._run(
            self._async.get_all(category=category, tags=tags, limit=limit, namespace=namespace)
        )

    list = get_all

    def update(
        self,
        id_or_key: str,
        content: Any = UNSET,
        *,
        summary: str | UnsetType | None = UNSET,
        category: str | None = None,
        tags: Iterable[str] | None = None,
        metadata: Mapping[str, Any] | None = None,
        pinned: bool | None = None,
        archived: bool | None = None,
        ttl: int | None = None,
        expected_version: int | None = None,
        namespace: str | None = None,
    ) -> MemoryItem:
        """See :meth:`AsyncMemory.update`."""
        return self._run(
            self._async.update(
                id_or_key,
                content,
                summary=summary,
                category=category,
                tags=tags,
                metadata=metadata,
                pinned=pinned,
                archived=archived,
                ttl=ttl,
                expected_version=expected_version,
                namespace=namespace,
            )
        )

    def forget(self, id_or_key: str, *, namespace: str | None = None) -> bool:
        """See :meth:`AsyncMemory.forget` (also called :meth:`delete`)."""
        return self._run(self._async.forget(id_or_key, namespace=namespace))

    delete = forget

    def review(
        self, *, limit: int = 100, namespace: str | None = None
    ) -> builtins.list[MemoryItem]:
        """See :meth:`AsyncMemory.review`."""
        return self._run(self._async.review(limit=limit, namespace=namespace))

    def accept(
        self, id: str, *, expected_version: int | None = None, namespace: str | None = None
    ) -> MemoryItem:
        """See :meth:`AsyncMemory.accept`."""
        return self._run(
            self._async.accept(id, expected_version=expected_version, namespace=namespace)
        )

    def reject(
        self, id: str, *, expected_version: int | None = None, namespace: str | None = None
    ) -> MemoryItem:
        """See :meth:`AsyncMemory.reject`."""
        return self._run(
            self._async.reject(id, expected_version=expected_version, namespace=namespace)
        )

    def history(
        self, id_or_key: str, *, namespace: str | None = None
    ) -> builtins.list[HistoryEntry]:
        """See :meth:`AsyncMemory.history`."""
        return self._run(self._async.history(id_or_key, namespace=namespace))

    def close(self) -> None:
        """Close the store and stop the background loop (idempotent; nothing in a forked
        child, whose copy of the store is the parent's)."""
        self._finalizer()

    def _run(self, call: Coroutine[Any, Any, T]) -> T:
        try:
            # In a forked child the loop's thread is gone: the call would wait forever.
            self._owner.check()
            if not self._finalizer.alive:
                raise closed_error()
        except BaseException:
            call.close()
            raise
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
