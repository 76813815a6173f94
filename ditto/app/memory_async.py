"""``AsyncMemory``: the three-line API as coroutines (``Memory`` runs them synchronously)."""

from __future__ import annotations

import asyncio
import builtins
import os
from collections.abc import Iterable, Mapping
from contextlib import AsyncExitStack
from typing import TYPE_CHECKING, Any

from msgspec import UNSET, UnsetType

from ditto.app.memory_setup import (
    EmbedderChoice,
    OwnerProcess,
    closed_error,
    embedder_factory,
    memory_content,
    metadata_dict,
    min_score_option,
    not_found,
    record_ref,
    store_factory,
    tags_list,
)
from ditto.errors import InvalidInputError

if TYPE_CHECKING:
    from types import TracebackType

    from ditto.runtime import Ditto
    from workers.memory import HistoryEntry, MemoryItem, ReviewOutcome, SearchHit
    from workers.memory.model.outcomes import MissExplanation
    from workers.memory.ports import MemoryStore
    from workers.memory.retrieval.embeddings import Embedder

__all__ = ("AsyncMemory",)


class AsyncMemory:
    """Agent memory on one store, as coroutines.

    Every method is one or two ``MEMORY.*`` node invocations (``history`` reads the store's
    history log, which no node serves). A record is named by its id (a UUIDv7 string, the
    ``id`` of what ``add`` returns) or by its key: ``get``, ``update``, ``forget`` and
    ``history`` look the argument up as an id first, then as a key, both in the namespace
    (``MEMORY.GET`` answers ids first), so an id never reaches a record of another namespace.
    ``review`` lists what the write policy held back for a person; ``accept`` and ``reject``
    take an id (the principal, if any, is the reviewer history names).

    Args:
        location: A SQLite file (or ``sqlite:PATH``), ``markdown:FOLDER``, a
            ``postgresql://`` URL (needs the ``postgres`` extra: ``pip install
            'ditto-runtime[postgres]'``) or a ``mysql://`` URL (the ``mysql`` extra). The file
            is created if missing; its folder (or the Markdown folder) only with
            ``create=True``.
        create: Create the SQLite file's folder, or the Markdown folder, if it is missing.
        embedder: ``"none"`` (keyword search), ``"hashing"``, ``"minilm"`` (needs the
            ``embeddings`` extra and ``ditto models install``), ``"e5-small"`` (multilingual;
            ``ditto models install e5-small``) or any :class:`Embedder`.
        namespace: The namespace calls use unless they name another.
        principal: Who the calls act for (audit).

    Raises:
        MemoryStoreError: ``STORE_UNAVAILABLE``: the folder is missing (without ``create``),
            or a PostgreSQL URL without the ``postgres`` extra; ``EMBEDDER_UNAVAILABLE``:
            ``"minilm"`` or ``"e5-small"`` is not installed.
        ConfigError: ``INVALID_CONFIG``: an embedder name that is not one of the four.
        InvalidInputError: ``INVALID_INPUT``: a location of another scheme (``redis://``), not
            a path or a string, or an empty namespace or principal.

    The store opens on the first call; ``close()`` (or leaving ``async with``) closes it. It
    belongs to the process that made it: in a forked child every call raises
    ``OPENED_IN_PARENT`` (open a new one in the child).
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
        if not isinstance(location, str | os.PathLike):
            raise InvalidInputError(
                f"Memory's location must be a path or a URL string, not {type(location).__name__}"
            )
        if not isinstance(namespace, str) or not namespace:
            raise InvalidInputError("Memory's namespace must be a non-empty string")
        if principal is not None and (not isinstance(principal, str) or not principal):
            raise InvalidInputError("Memory's principal must be a non-empty string or None")
        self.location = os.fspath(location)
        self.namespace = namespace
        self.principal = principal
        self._new_store = store_factory(self.location, create=create)
        self._new_embedder = embedder_factory(embedder)
        self._owner = OwnerProcess("this Memory")
        self._stack: AsyncExitStack | None = None
        self._store: MemoryStore | None = None
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
        record under that key (an upsert); without one, each call adds a record (keep its
        ``id`` to name it later)."""
        draft: dict[str, Any] = {
            "content": memory_content(content, "add"),
            "category": category,
            "tags": tags_list(tags),
            "metadata": metadata_dict(metadata),
            "namespace": self.namespace if namespace is None else namespace,
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
        filter: dict[str, Any] = {"namespace": self.namespace if namespace is None else namespace}
        if category is not None:
            filter["category"] = category
        request: dict[str, Any] = {"query": query, "limit": limit, "filter": filter}
        if min_score is not None:
            request["options"] = {"min_score": min_score_option(min_score)}
        hits: builtins.list[SearchHit] = (await self._call("MEMORY.SEARCH", request)).hits
        return hits

    async def why(
        self, query: str, id_or_key: str, *, limit: int = 5, namespace: str | None = None
    ) -> MissExplanation:
        """Why :meth:`search` for ``query`` (with ``limit``) does not return this record — by
        id, else by key: the stage that kept it out (``namespace``, ``archived``, ``expired``,
        ``superseded``, ``contested``, ``quarantined``, ``filter``, ``not_a_candidate``,
        ``below_min_score``, ``limit`` with the rank it had), or ``returned`` with its rank."""
        filter = {"namespace": self.namespace if namespace is None else namespace}
        target = {"id": record_ref(id_or_key, "why")}
        request = {"query": query, "limit": limit, "filter": filter, "explain_miss": target}
        miss: MissExplanation | None = (await self._call("MEMORY.SEARCH", request)).miss
        if miss is not None and miss.stage == "not_found":
            request["explain_miss"] = {"key": id_or_key}
            miss = (await self._call("MEMORY.SEARCH", request)).miss
        assert miss is not None  # the worker answers every explain_miss
        return miss

    async def get(self, id_or_key: str, *, namespace: str | None = None) -> MemoryItem | None:
        """The record with this id, else the one under this key; ``None`` when neither
        (archived records are left out)."""
        return await self._find(id_or_key, namespace, archived=False)

    async def get_all(
        self,
        *,
        category: str | None = None,
        tags: Iterable[str] = (),
        limit: int = 100,
        namespace: str | None = None,
    ) -> builtins.list[MemoryItem]:
        """Records, oldest first (at most ``limit``, 1 to 10,000), optionally only those of
        ``category`` carrying every tag of ``tags``. Also called :meth:`list`."""
        filter: dict[str, Any] = {"namespace": self.namespace if namespace is None else namespace}
        if category is not None:
            filter["category"] = category
        wanted = tags_list(tags)
        if wanted:
            filter["tags_all"] = wanted
        items: builtins.list[MemoryItem] = (
            await self._call("MEMORY.QUERY", {"filter": filter, "limit": limit})
        ).items
        return items

    list = get_all

    async def update(
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
        """Change what is given of the record with this id (else under this key), archived
        or not; the record keeps its id and key, its version goes up by one. ``ttl`` renews
        its expiry (seconds from now), and revives a record that has expired.

        Raises:
            NodeFailedError: ``NOT_FOUND`` (no such record), ``CONFLICT`` (``expected_version``
                is stale), ``INVALID_INPUT`` (nothing to change).
        """
        found = await self._find(id_or_key, namespace, archived=True, expired=ttl is not None)
        if found is None:  # never the record of another namespace with this id
            raise not_found("MEMORY.UPDATE", id_or_key, namespace or self.namespace)
        patch: dict[str, Any] = {"id": found.id}
        given: dict[str, Any] = {
            "category": category,
            "tags": None if tags is None else tags_list(tags),
            "metadata": None if metadata is None else metadata_dict(metadata),
            "pinned": pinned,
            "archived": archived,
            "ttl": ttl,
            "expected_version": expected_version,
        }
        patch.update((name, value) for name, value in given.items() if value is not None)
        if content is not UNSET:
            patch["content"] = memory_content(content, "update")
        if summary is not UNSET:
            patch["summary"] = summary
        item: MemoryItem = (await self._call("MEMORY.UPDATE", {"updates": [patch]})).items[0]
        return item

    async def forget(self, id_or_key: str, *, namespace: str | None = None) -> bool:
        """Delete the record with this id (else under this key); ``False`` when there was
        none. Also called :meth:`delete`."""
        found = await self._find(id_or_key, namespace, archived=True)
        if found is None:
            return False
        output = await self._call("MEMORY.DELETE", {"ids": [found.id]})
        return bool(output.deleted)

    delete = forget

    async def review(
        self, *, limit: int = 100, namespace: str | None = None
    ) -> builtins.list[MemoryItem]:
        """Records waiting for a person, oldest first (at most ``limit``, 1 to 10,000):
        ``contested`` ones (a lower-trust claim kept beside the record it contradicts, named
        by its ``contests``) and ``quarantined`` ones (the safety stage held them). Reads
        leave both out until a person accepts or rejects them (:meth:`accept`,
        :meth:`reject`)."""
        pending = ["contested", "quarantined"]
        filter = {
            "namespace": self.namespace if namespace is None else namespace,
            "status": pending,
            "include": pending,
            "archived": "include",
        }
        items: builtins.list[MemoryItem] = (
            await self._call("MEMORY.QUERY", {"filter": filter, "limit": limit})
        ).items
        return items

    async def accept(
        self, id: str, *, expected_version: int | None = None, namespace: str | None = None
    ) -> MemoryItem:
        """Accept a contested or quarantined record (by id: its key names the record that
        holds it): it becomes active and takes its key, and the record that held the key is
        kept ``superseded`` (history and ``as_of`` reads still have it). Returns the record
        as it now stands.

        Raises:
            NodeFailedError: ``NOT_FOUND`` (no such record in the namespace), ``CONFLICT``
                (not contested or quarantined, expired, or ``expected_version`` is stale).
        """
        return (await self._decide(id, "accept", expected_version, namespace)).record

    async def reject(
        self, id: str, *, expected_version: int | None = None, namespace: str | None = None
    ) -> MemoryItem:
        """Reject a contested or quarantined record: it is deleted, and its history keeps it
        under a ``reject`` entry. Returns the record as it stood when rejected.

        Raises:
            NodeFailedError: ``NOT_FOUND`` (no such record in the namespace), ``CONFLICT``
                (not contested or quarantined, or ``expected_version`` is stale).
        """
        return (await self._decide(id, "reject", expected_version, namespace)).record

    async def _decide(
        self, id: str, decision: str, expected_version: int | None, namespace: str | None
    ) -> ReviewOutcome:
        made = {"id": id, "decision": decision, "expected_version": expected_version}
        request = {
            "decisions": [made],
            "namespace": self.namespace if namespace is None else namespace,
        }
        outcome: ReviewOutcome = (await self._call("MEMORY.REVIEW", request)).items[0]
        return outcome

    async def history(
        self, id_or_key: str, *, namespace: str | None = None
    ) -> builtins.list[HistoryEntry]:
        """Every change of the record, oldest first, each with the record as it stood. A
        deleted record's history is still there, by its id or by its key (a key held by
        several records over time, one after another, gives all of their histories).

        Raises:
            MemoryStoreError: ``UNSUPPORTED``: the store keeps no history.
        """
        from workers.memory.ports import HistoryLog, require

        found = await self._find(id_or_key, namespace, archived=True)
        assert self._store is not None  # opened by the call above
        log = require(self._store, HistoryLog)
        space = self.namespace if namespace is None else namespace
        if found is not None:
            entries = await log.history(found.id)
        else:  # gone: an id of a deleted record, or the key it had
            entries = await log.history(id_or_key) or await log.key_history(space, id_or_key)
        return [entry for entry in entries if entry.record.namespace == space]

    async def close(self) -> None:
        """Close the runtime and the store (idempotent). In a forked child it lets go of the
        parent's store without touching it."""
        self._closed = True
        stack, self._stack, self._runtime, self._store = self._stack, None, None, None
        if stack is not None and not self._owner.forked:
            await stack.aclose()

    @property
    def runtime(self) -> Ditto | None:
        """The runtime underneath (``None`` until the first call): for graphs and tools."""
        return self._runtime

    # ----------------------------------------------------------------- plumbing

    async def _find(
        self, ref: str, namespace: str | None, *, archived: bool, expired: bool = False
    ) -> MemoryItem | None:
        space = self.namespace if namespace is None else namespace
        request: dict[str, Any] = {"ids": [ref], "keys": [ref], "namespace": space}
        request["include_archived"] = archived
        if expired:
            request["include"] = ["expired"]
        items: builtins.list[MemoryItem] = (await self._call("MEMORY.GET", request)).items
        return next((item for item in items if item.namespace == space), None)

    async def _call(self, node: str, payload: dict[str, Any]) -> Any:
        runtime = await self._open()
        result = await runtime.invoke(node, payload, principal=self.principal)
        return result.unwrap()

    async def _open(self) -> Ditto:
        self._owner.check()
        if self._runtime is not None:
            return self._runtime
        async with self._opening:
            if self._closed:
                raise closed_error()
            if self._runtime is None:
                from ditto.runtime import create_ditto
                from workers.memory import create_memory_worker

                stack = AsyncExitStack()
                try:
                    store = await stack.enter_async_context(self._new_store())
                    worker = create_memory_worker(store, embedder=self._new_embedder())
                    self._runtime = await stack.enter_async_context(
                        create_ditto(workers=[worker], config=None)
                    )
                except BaseException:
                    await stack.aclose()
                    raise
                self._stack, self._store = stack, store
            return self._runtime
