"""``create_memory_worker``: the six MEMORY nodes over a ``MemoryStore`` and an optional
``MemorySearchProvider``.

The worker owns the contract: it validates what the runtime could not (duplicate keys in a batch,
empty patches, JSON that cannot round-trip), resolves limits and cursors, checks every store and
provider output, and maps failures to stable codes. Stores only store.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from typing import TypeVar

import msgspec

from ditto.errors import InvalidInputError
from ditto.runtime.context import NodeContext
from ditto.runtime.worker import WorkerDefinition, define_worker
from workers.memory.access import AccessControl, AccessPolicy
from workers.memory.boundary import backend_boundary, check_items, off_contract
from workers.memory.contracts import (
    DEFAULT_NAMESPACE,
    MAX_QUERY_CHARS,
    DeleteInput,
    DeleteOutput,
    GetInput,
    GetOutput,
    MemoryDraft,
    MemoryItem,
    MemoryPatch,
    QueryInput,
    QueryOutput,
    SearchHit,
    SearchInput,
    SearchOutput,
    UpdateInput,
    UpdateOutput,
    WriteInput,
    WriteOutput,
)
from workers.memory.cursor import decode_cursor, encode_cursor
from workers.memory.embeddings.base import Embedder, embed_texts, model_of
from workers.memory.errors import MemoryStoreError
from workers.memory.filters import matches_filter
from workers.memory.ports import MemorySearchProvider, MemoryStore, UsageTracking, VectorStore
from workers.memory.records import (
    Clock,
    changes_text,
    namespaced,
    now_from,
    order_key,
    plan_updates,
    utc_now,
)
from workers.memory.retention import PeriodicHygiene, RetentionPolicy
from workers.memory.search.hybrid import SearchEngine, SearchSettings
from workers.memory.validation import check_input
from workers.memory.vectors import Vectors, hash_text, vector_text

__all__ = ("MAX_LIMIT", "create_memory_worker")

logger = logging.getLogger("ditto.workers.memory")

MAX_LIMIT = 10_000
T = TypeVar("T")

_PATCH_FIELDS = (
    "content",
    "summary",
    "metadata",
    "tags",
    "category",
    "pinned",
    "visibility",
    "archived",
)


def _check_limit(name: str, value: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_LIMIT:
        raise InvalidInputError(f"{name} must be an integer from 1 to {MAX_LIMIT}")
    return value


class _MemoryNodes:
    def __init__(
        self,
        store: MemoryStore,
        search: MemorySearchProvider,
        query_limit: int,
        search_limit: int,
        usage: UsageTracking | None,
        clock: Clock,
        access: AccessControl,
        embedder: Embedder | None,
    ) -> None:
        self.store = store
        self.search_provider = search
        self.query_limit = query_limit
        self.search_limit = search_limit
        self.usage = usage
        self.clock = clock
        self.access = access
        self.hygiene: PeriodicHygiene | None = None
        self.embedder = embedder
        self.model = None if embedder is None else model_of(embedder)

    def _start_hygiene(self) -> None:
        # The first call is the first place with a running event loop to run it on.
        if self.hygiene is not None:
            self.hygiene.ensure_started()

    async def _vectors(self, records: Sequence[MemoryDraft | MemoryItem]) -> Vectors | None:
        """The embeddings of ``records`` (``None`` without an embedder)."""
        if self.embedder is None or self.model is None:
            return None
        texts = [vector_text(record) for record in records]
        matrix = await embed_texts(self.embedder, texts)
        # The store checks each hash against the text it stores: a record changed by someone
        # else while this one was embedding is a CONFLICT, never a vector of the wrong text.
        return Vectors(self.model, matrix, tuple(map(hash_text, texts)))

    async def get(self, request: GetInput, ctx: NodeContext) -> GetOutput:
        self._start_hygiene()
        check_input(request)
        principal = self.access.principal(ctx)
        ids = list(dict.fromkeys(request.ids))
        keys = list(dict.fromkeys(request.keys))
        if not ids and not keys:
            return GetOutput([])
        found = check_items(
            # A record asked for by id and by key may come back twice; it is returned once.
            await self.store.get(ids, keys, request.namespace),
            "GET output",
            unique=False,
        )
        by_id = {item.id: item for item in found}
        chosen = [by_id.get(item_id) for item_id in ids]
        if keys:
            by_key = {
                item.key: item
                for item in found
                if item.key is not None and item.namespace == request.namespace
            }
            chosen += [by_key.get(key) for key in keys]
        ordered: dict[str, MemoryItem] = {}
        for item in chosen:
            if item is not None and (request.include_archived or item.archived_at is None):
                ordered.setdefault(item.id, item)
        items = list(ordered.values())
        if not self.access.silent:
            items = await self.access.reads(ctx, items, principal)
        return GetOutput(items)

    async def query(self, request: QueryInput, ctx: NodeContext) -> QueryOutput:
        self._start_hygiene()
        check_input(request)
        principal = self.access.principal(ctx)
        filter = self.access.visible_filter(request.filter, principal)
        limit = request.limit or self.query_limit
        # Open first: a store that keeps its cursor key loads it when it opens.
        await self.store.open()
        secret = self.store.cursor_secret
        after = (
            decode_cursor(secret, filter, request.order_by, request.cursor)
            if request.cursor is not None
            else None
        )
        items = check_items(
            await self.store.query(filter, request.order_by, limit + 1, after), "QUERY output"
        )
        if len(items) > limit + 1:
            raise off_contract("QUERY returned more records than asked for")
        page = items[:limit]
        next_cursor = None
        if len(items) > limit:
            last = page[-1]
            position = (order_key(last, request.order_by.field), last.id)
            next_cursor = encode_cursor(secret, filter, request.order_by, position)
        return QueryOutput(await self.access.reads(ctx, page, principal), next_cursor)

    async def search(self, request: SearchInput, ctx: NodeContext) -> SearchOutput:
        self._start_hygiene()
        if isinstance(request.query, str) and len(request.query) > MAX_QUERY_CHARS:
            raise MemoryStoreError(f"query is longer than {MAX_QUERY_CHARS} characters")
        check_input(request)
        principal = self.access.principal(ctx)
        limit = request.limit or self.search_limit
        request = msgspec.structs.replace(
            request, limit=limit, filter=self.access.visible_filter(request.filter, principal)
        )
        found = await self.search_provider.search(request, ctx)
        output = found if isinstance(found, SearchOutput) else SearchOutput(found)
        hits = output.hits
        if not isinstance(hits, list) or not all(isinstance(hit, SearchHit) for hit in hits):
            raise off_contract("SEARCH output must be a list of SearchHit")
        if len(hits) > limit:
            raise off_contract("SEARCH returned more hits than the limit")
        check_items([hit.memory for hit in hits], "SEARCH output")
        for hit in hits:
            if hit.score is not None and not math.isfinite(hit.score):
                raise off_contract("SEARCH returned a non-finite score")
            if not matches_filter(hit.memory, request.filter):
                raise off_contract("SEARCH returned a record outside the filter")
        returned = await self.access.reads(ctx, [hit.memory for hit in hits], principal)
        if len(returned) < len(hits):  # never when enforcing: the store filtered already
            kept = {item.id for item in returned}
            hits = [hit for hit in hits if hit.memory.id in kept]
        if self.usage is not None and hits:
            await self.usage.record_usage([hit.memory.id for hit in hits], now_from(self.clock))
        missing = output.vector_missing
        if missing is not None and (isinstance(missing, bool) or not isinstance(missing, int)):
            raise off_contract("SEARCH vector_missing must be an integer")
        return SearchOutput(hits, missing)

    async def write(self, request: WriteInput, ctx: NodeContext) -> WriteOutput:
        self._start_hygiene()
        check_input(request)
        memories = [namespaced(position, draft) for position, draft in enumerate(request.memories)]
        request = msgspec.structs.replace(request, memories=memories)
        seen: set[tuple[str, str]] = set()
        for position, draft in enumerate(request.memories):
            if draft.key is None:
                if request.mode == "upsert":
                    raise MemoryStoreError(f"memories[{position}]: upsert needs a key")
                continue
            if (draft.namespace, draft.key) in seen:
                raise MemoryStoreError(
                    f"memories[{position}]: key {draft.key!r} appears twice in one batch"
                )
            seen.add((draft.namespace, draft.key))
        if not request.memories:
            return WriteOutput([])
        drafts = await self.access.stamp(ctx, request.memories)
        vectors = await self._vectors(drafts)
        writing = self.store.write(drafts, request.mode, vectors, self.access.guard(ctx))
        items = check_items(await self.access.audited(ctx, writing, []), "WRITE output")
        if len(items) != len(request.memories) or any(
            (item.namespace, item.key) != (draft.namespace, draft.key)
            for item, draft in zip(items, request.memories, strict=True)
        ):
            raise off_contract("WRITE must return one record per draft, in order")
        await self.access.record_items(ctx, items)
        return WriteOutput(items)

    async def update(self, request: UpdateInput, ctx: NodeContext) -> UpdateOutput:
        self._start_hygiene()
        check_input(request)
        ids = [patch.id for patch in request.updates]
        if len(set(ids)) != len(ids):
            raise MemoryStoreError("an id appears twice in one UPDATE")
        for position, patch in enumerate(request.updates):
            if all(getattr(patch, name) is msgspec.UNSET for name in _PATCH_FIELDS):
                raise MemoryStoreError(
                    f"updates[{position}]: nothing to change (give content, summary, metadata, "
                    "tags, category, pinned, visibility or archived)"
                )
        if not ids:
            return UpdateOutput([])
        await self.access.screen_updates(ctx, request.updates)
        vectors = None
        if self.embedder is not None and any(map(changes_text, request.updates)):
            vectors = await self._vectors(await self._patched(request.updates))
        updating = self.store.update(request.updates, vectors, self.access.guard(ctx))
        items = check_items(await self.access.audited(ctx, updating, ids), "UPDATE output")
        if [item.id for item in items] != ids:
            raise off_contract("UPDATE must return each requested record once, in order")
        await self.access.record_items(ctx, items)
        return UpdateOutput(items)

    async def _patched(self, patches: list[MemoryPatch]) -> list[MemoryItem]:
        """The records as the patches will leave them (to embed their new text first)."""
        found = await self.store.get([patch.id for patch in patches], [], DEFAULT_NAMESPACE)
        steps = plan_updates(patches, {item.id: item for item in found}, now_from(self.clock))
        return [step.item for step in steps]

    async def delete(self, request: DeleteInput, ctx: NodeContext) -> DeleteOutput:
        self._start_hygiene()
        check_input(request)
        ids = list(dict.fromkeys(request.ids))
        if request.keys:
            ids = list(dict.fromkeys([*ids, *await self._ids_of(ctx, request)]))
        if not ids:
            return DeleteOutput([])
        await self.access.screen_deletes(ctx, ids)
        deleting = self.store.delete(ids, self.access.guard(ctx))
        deleted = await self.access.audited(ctx, deleting, ids)
        requested = set(ids)
        if (
            not isinstance(deleted, list)
            or not all(isinstance(item_id, str) and item_id in requested for item_id in deleted)
            or len(set(deleted)) != len(deleted)
        ):
            raise off_contract("DELETE must return unique ids from the request")
        await self.access.record(ctx, deleted)
        return DeleteOutput(deleted)

    async def _ids_of(self, ctx: NodeContext, request: DeleteInput) -> list[str]:
        """The ids of the records holding ``request.keys`` in its namespace that the caller may
        see: forgetting by key never reveals that someone else's record holds the key."""
        keys = list(dict.fromkeys(request.keys))
        found = check_items(
            await self.store.get([], keys, request.namespace), "GET output", unique=False
        )
        principal = self.access.principal(ctx)
        return [
            item.id
            for item in found
            if item.namespace == request.namespace
            and item.key in keys
            and self.access.may_see(item, principal)
        ]


def create_memory_worker(
    store: MemoryStore,
    search: MemorySearchProvider | None = None,
    *,
    query_limit: int = 100,
    search_limit: int = 10,
    track_usage: bool | None = None,
    concurrency: int | None = None,
    clock: Clock = utc_now,
    access: AccessPolicy | None = None,
    audit: bool = False,
    retention: RetentionPolicy | None = None,
    hygiene_interval_s: float | None = None,
    embedder: Embedder | None = None,
    search_settings: SearchSettings | None = None,
) -> WorkerDefinition:
    """The MEMORY worker: ``MEMORY.GET``, ``QUERY``, ``SEARCH``, ``WRITE``, ``UPDATE``, ``DELETE``.

    Args:
        store: Where records live. The application owns it (opens and closes it); the worker
            never closes it.
        search: Recall/ranking for SEARCH; default the store's own search, else SEARCH fails
            with ``SEARCH_UNAVAILABLE``. CRUD always goes to ``store``.
        query_limit: QUERY page size when the request gives none (1..10000).
        search_limit: SEARCH hit count when the request gives none (1..10000).
        track_usage: Count each SEARCH hit as a use (``usage_count``, ``last_used_at``):
            ``None`` when the store has the ``UsageTracking`` capability, ``True`` always
            (refused for a store without it), ``False`` never.
        concurrency: Most calls one replica runs at once (``None``: unlimited).
        clock: Time of usage stamps, audit entries and retention.
        access: Access control (default: off); see :mod:`workers.memory.access`.
        audit: Append every read and write decision to the store's audit log.
        retention: Rules for :func:`~workers.memory.retention.run_hygiene`.
        hygiene_interval_s: Run hygiene with ``retention`` every this many seconds in the
            background (never two runs at once); ``None``: only when asked.
        embedder: Embeds every written record (in the write's transaction) and SEARCH queries,
            turning on the ``vector`` and ``hybrid`` strategies (``auto`` becomes hybrid).
        search_settings: Defaults of the hybrid strategy (fusion, weights, ``min_score``).

    Raises:
        InvalidInputError: A limit is not an integer from 1 to 10000, a hygiene interval
            without a retention policy, or a capability the store lacks (``audit`` without an
            audit log, ``embedder`` without vectors, ``track_usage=True`` without usage).
    """
    if not isinstance(store, MemoryStore):
        raise InvalidInputError("store must be a MemoryStore")
    if search is not None and not isinstance(search, MemorySearchProvider):
        raise InvalidInputError("search must have an async search(input, ctx) method")
    if hygiene_interval_s is not None and (
        retention is None
        or isinstance(hygiene_interval_s, bool)
        or not isinstance(hygiene_interval_s, int | float)
        or not 0 < hygiene_interval_s < math.inf
    ):
        raise InvalidInputError("hygiene_interval_s needs a retention policy and a positive number")
    if track_usage and not isinstance(store, UsageTracking):
        raise InvalidInputError(f"{type(store).__name__} keeps no usage counters")
    if embedder is not None:
        model_of(embedder)  # a clear error now, not at the first write
        if not isinstance(store, VectorStore):
            raise InvalidInputError(
                f"{type(store).__name__} keeps no vectors: it cannot take an embedder"
            )
    control = AccessControl(access or AccessPolicy(), store, audit=audit, clock=clock)
    nodes = _MemoryNodes(
        store,
        search or SearchEngine(store, embedder, search_settings),
        _check_limit("query_limit", query_limit),
        _check_limit("search_limit", search_limit),
        store if track_usage is not False and isinstance(store, UsageTracking) else None,
        clock,
        control,
        embedder,
    )
    hygiene = None
    if retention is not None and hygiene_interval_s is not None:
        hygiene = PeriodicHygiene(store, retention, float(hygiene_interval_s), clock)
        nodes.hygiene = hygiene
    return define_worker(
        "memory",
        {
            node_type: control.audit_failures(backend_boundary(handler))
            for node_type, handler in (
                ("MEMORY.GET", nodes.get),
                ("MEMORY.QUERY", nodes.query),
                ("MEMORY.SEARCH", nodes.search),
                ("MEMORY.WRITE", nodes.write),
                ("MEMORY.UPDATE", nodes.update),
                ("MEMORY.DELETE", nodes.delete),
            )
        },
        concurrency=concurrency,
        dispose=None if hygiene is None else hygiene.stop,
        # Outputs are built here from records the store returned, each checked by
        # boundary.check_items: re-validating pages of records would double a read's cost.
        trusted_outputs=True,
    )
