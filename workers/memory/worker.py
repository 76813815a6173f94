"""``create_memory_worker``: the six MEMORY nodes over a ``MemoryStore`` and an optional
``MemorySearchProvider``.

The worker owns the contract: it validates what the runtime could not (duplicate keys in a batch,
empty patches, JSON that cannot round-trip), resolves limits and cursors, checks every store and
provider output, and maps failures to stable codes. Stores only store.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

import msgspec

from ditto.contracts.jsonvalue import check_json
from ditto.errors import DittoError, InvalidInputError
from ditto.runtime.context import NodeContext
from ditto.runtime.worker import WorkerDefinition, define_worker
from workers.memory.access import HIDDEN, AccessControl, AccessGuard, AccessPolicy
from workers.memory.contracts import (
    DEFAULT_NAMESPACE,
    DeleteInput,
    DeleteOutput,
    GetInput,
    GetOutput,
    MemoryDraft,
    MemoryFilter,
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
from workers.memory.errors import (
    MemoryErrorCode,
    MemoryStoreError,
    forbidden,
    not_found,
)
from workers.memory.filters import matches_filter
from workers.memory.ports import MemorySearchProvider, MemoryStore
from workers.memory.records import Clock, apply_patch, changes_text, now_from, order_key, utc_now
from workers.memory.retention import PeriodicHygiene, RetentionPolicy
from workers.memory.search.hybrid import SearchEngine, SearchSettings
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


class _BackendOutputError(DittoError):
    default_code = MemoryErrorCode.INVALID_BACKEND_OUTPUT


def _off_contract(what: str) -> _BackendOutputError:
    return _BackendOutputError(f"the memory backend returned an invalid result: {what}")


async def _backend(operation: Awaitable[T]) -> T:
    """Await a store or provider call, keeping coded errors and hiding everything else."""
    try:
        return await operation
    except DittoError:
        raise
    except Exception:
        logger.exception("memory backend operation failed")
        raise DittoError(
            "memory backend operation failed", code=MemoryErrorCode.MEMORY_BACKEND_ERROR
        ) from None


def _check_items(items: object, what: str, *, unique: bool = True) -> list[MemoryItem]:
    if not isinstance(items, list) or not all(isinstance(item, MemoryItem) for item in items):
        raise _off_contract(f"{what} must be a list of MemoryItem")
    ids = [item.id for item in items]
    if unique and len(set(ids)) != len(ids):
        raise _off_contract(f"{what} repeats a record")
    return items


_encoder = msgspec.json.Encoder()


def _check_text(
    request: msgspec.Struct, without_content: Callable[[], msgspec.Struct] | None = None
) -> None:
    """Refuse what some stores cannot keep, the same way for every store: lone surrogates and
    values that are not JSON anywhere, and NUL characters outside content (keys, names, tags,
    metadata and filters are database text, which in PostgreSQL cannot hold NUL).

    One encode of the whole input finds surrogates and non-JSON values at C speed; the slower
    field-by-field NUL walk runs only when the encoded input contains an escaped NUL at all.

    Args:
        request: The node input.
        without_content: Builds the same input with its free-text fields (content, query)
            blanked; called only when a NUL is present somewhere.

    Raises:
        MemoryStoreError: ``INVALID_INPUT`` naming the field.
    """
    try:
        encoded = _encoder.encode(request)
    except (TypeError, ValueError, RecursionError, OverflowError):
        raise MemoryStoreError(
            "the input holds text that is not valid Unicode or values that are not JSON"
        ) from None
    if b"\\u0000" not in encoded:
        return
    checked = request if without_content is None else without_content()
    stack: list[tuple[str, Any]] = [("", msgspec.to_builtins(checked))]
    while stack:
        path, value = stack.pop()
        if isinstance(value, str):
            if "\x00" in value:
                raise MemoryStoreError(f"{path or 'input'} must not contain NUL characters")
        elif isinstance(value, dict):
            for key, child in value.items():
                if "\x00" in str(key):
                    raise MemoryStoreError(f"{path or 'input'} has a key with a NUL character")
                stack.append((f"{path}.{key}" if path else str(key), child))
        elif isinstance(value, list):
            stack.extend((f"{path}[{index}]", child) for index, child in enumerate(value))


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
        track_usage: bool,
        clock: Clock,
        access: AccessControl,
        embedder: Embedder | None,
    ) -> None:
        self.store = store
        self.search_provider = search
        self.query_limit = query_limit
        self.search_limit = search_limit
        self.track_usage = track_usage
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

    def _visible_filter(self, filter: MemoryFilter, principal: str | None) -> MemoryFilter:
        """``filter`` narrowed to what the caller may see (enforcing), inside the store and so
        before the limit."""
        if not self.access.enforcing:
            return filter
        if filter.visible_to not in (None, principal):
            raise forbidden("visible_to can only name the calling principal")
        return msgspec.structs.replace(filter, visible_to=principal)

    async def _checked_reads(
        self, ctx: NodeContext, items: list[MemoryItem], principal: str | None
    ) -> list[MemoryItem]:
        """Apply (enforce) or report (observe) access control to records a read returns, and
        audit what is returned."""
        if self.access.checks:
            hidden = self.access.hidden(items, principal)
            if hidden:
                await self.access.refuse(ctx, hidden, HIDDEN, read=True)
                if self.access.enforcing:
                    refused = set(hidden)
                    items = [item for item in items if item.id not in refused]
        await self.access.record(ctx, [item.id for item in items])
        return items

    async def get(self, request: GetInput, ctx: NodeContext) -> GetOutput:
        self._start_hygiene()
        _check_text(request)
        principal = self.access.principal(ctx)
        ids = list(dict.fromkeys(request.ids))
        keys = list(dict.fromkeys(request.keys))
        if not ids and not keys:
            return GetOutput([])
        found = _check_items(
            # A record asked for by id and by key may come back twice; it is returned once.
            await _backend(self.store.get(ids, keys, request.namespace)),
            "GET output",
            unique=False,
        )
        by_id = {item.id: item for item in found}
        by_key = {
            item.key: item
            for item in found
            if item.key is not None and item.namespace == request.namespace
        }
        ordered: dict[str, MemoryItem] = {}
        for item in [by_id.get(item_id) for item_id in ids] + [by_key.get(key) for key in keys]:
            if item is not None and (request.include_archived or item.archived_at is None):
                ordered.setdefault(item.id, item)
        return GetOutput(await self._checked_reads(ctx, list(ordered.values()), principal))

    async def query(self, request: QueryInput, ctx: NodeContext) -> QueryOutput:
        self._start_hygiene()
        _check_text(request)
        principal = self.access.principal(ctx)
        filter = self._visible_filter(request.filter, principal)
        limit = request.limit or self.query_limit
        # Open first: a store that keeps its cursor key loads it when it opens.
        await _backend(self.store.open())
        secret = self.store.cursor_secret
        after = (
            decode_cursor(secret, filter, request.order_by, request.cursor)
            if request.cursor is not None
            else None
        )
        items = _check_items(
            await _backend(self.store.query(filter, request.order_by, limit + 1, after)),
            "QUERY output",
        )
        if len(items) > limit + 1:
            raise _off_contract("QUERY returned more records than asked for")
        page = items[:limit]
        next_cursor = None
        if len(items) > limit:
            last = page[-1]
            position = (order_key(last, request.order_by.field), last.id)
            next_cursor = encode_cursor(secret, filter, request.order_by, position)
        return QueryOutput(await self._checked_reads(ctx, page, principal), next_cursor)

    async def search(self, request: SearchInput, ctx: NodeContext) -> SearchOutput:
        self._start_hygiene()
        _check_text(request, lambda: msgspec.structs.replace(request, query=None))
        principal = self.access.principal(ctx)
        limit = request.limit or self.search_limit
        request = msgspec.structs.replace(
            request, limit=limit, filter=self._visible_filter(request.filter, principal)
        )
        hits = await _backend(self.search_provider.search(request, ctx))
        if not isinstance(hits, list) or not all(isinstance(hit, SearchHit) for hit in hits):
            raise _off_contract("SEARCH output must be a list of SearchHit")
        if len(hits) > limit:
            raise _off_contract("SEARCH returned more hits than the limit")
        _check_items([hit.memory for hit in hits], "SEARCH output")
        for hit in hits:
            if hit.score is not None and not math.isfinite(hit.score):
                raise _off_contract("SEARCH returned a non-finite score")
            if not matches_filter(hit.memory, request.filter):
                raise _off_contract("SEARCH returned a record outside the filter")
        returned = await self._checked_reads(ctx, [hit.memory for hit in hits], principal)
        if len(returned) < len(hits):  # never when enforcing: the store filtered already
            kept = {item.id for item in returned}
            hits = [hit for hit in hits if hit.memory.id in kept]
        if self.track_usage and hits:
            await _backend(
                self.store.record_usage([hit.memory.id for hit in hits], now_from(self.clock))
            )
        return SearchOutput(hits)

    async def write(self, request: WriteInput, ctx: NodeContext) -> WriteOutput:
        self._start_hygiene()
        _check_text(
            request,
            lambda: WriteInput(
                [msgspec.structs.replace(draft, content=None) for draft in request.memories]
            ),
        )
        seen: set[tuple[str, str]] = set()
        for position, draft in enumerate(request.memories):
            check_json(draft.content, f"memories[{position}].content")
            check_json(draft.metadata, f"memories[{position}].metadata")
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
        drafts = request.memories
        if self.access.checks:
            drafts = await self._stamped(ctx, drafts)
        options = self._write_options(ctx, await self._vectors(drafts))
        writing = self.store.write(drafts, request.mode, **options)
        items = _check_items(await self._stored(ctx, writing, []), "WRITE output")
        if len(items) != len(request.memories) or any(
            (item.namespace, item.key) != (draft.namespace, draft.key)
            for item, draft in zip(items, request.memories, strict=True)
        ):
            raise _off_contract("WRITE must return one record per draft, in order")
        await self.access.record(ctx, [item.id for item in items])
        return WriteOutput(items)

    async def _stamped(self, ctx: NodeContext, drafts: list[MemoryDraft]) -> list[MemoryDraft]:
        """Drafts with the caller as owner and the default visibility for new records; a
        draft naming another owner, or landing on another principal's private record, is
        refused."""
        principal = self.access.principal(ctx)
        foreign = [d.owner for d in drafts if d.owner is not None and d.owner != principal]
        if foreign:
            await self.access.refuse(ctx, [], "a draft names another principal as its owner")
        by_namespace: dict[str, list[str]] = {}
        for draft in drafts:
            if draft.key is not None:
                by_namespace.setdefault(draft.namespace, []).append(draft.key)
        existing: dict[tuple[str, str | None], MemoryItem] = {}
        for namespace, keys in by_namespace.items():
            stored = await _backend(self.store.get([], keys, namespace))
            existing.update(((item.namespace, item.key), item) for item in stored)
        rules = AccessGuard(principal)
        await self.access.screen(
            ctx,
            [
                (held.id, rules.write_refusal(held, draft))
                for draft in drafts
                if (held := existing.get((draft.namespace, draft.key))) is not None
            ],
        )
        default = self.access.policy.default_visibility
        return [
            msgspec.structs.replace(
                draft,
                owner=draft.owner or principal,
                visibility=draft.visibility
                or (None if (draft.namespace, draft.key) in existing else default),
            )
            for draft in drafts
        ]

    async def update(self, request: UpdateInput, ctx: NodeContext) -> UpdateOutput:
        self._start_hygiene()
        _check_text(
            request,
            lambda: UpdateInput(
                [msgspec.structs.replace(patch, content=None) for patch in request.updates]
            ),
        )
        ids = [patch.id for patch in request.updates]
        if len(set(ids)) != len(ids):
            raise MemoryStoreError("an id appears twice in one UPDATE")
        for position, patch in enumerate(request.updates):
            if all(getattr(patch, name) is msgspec.UNSET for name in _PATCH_FIELDS):
                raise MemoryStoreError(
                    f"updates[{position}]: nothing to change (give content, summary, metadata, "
                    "tags, category, pinned, visibility or archived)"
                )
            if patch.content is not msgspec.UNSET:
                check_json(patch.content, f"updates[{position}].content")
            if patch.metadata is not msgspec.UNSET:
                check_json(patch.metadata, f"updates[{position}].metadata")
        if not ids:
            return UpdateOutput([])
        if self.access.checks:
            rules = AccessGuard(self.access.principal(ctx))
            found = await _backend(self.store.get(ids, [], DEFAULT_NAMESPACE))
            stored = {item.id: item for item in found}
            await self.access.screen(
                ctx,
                [
                    (patch.id, rules.update_refusal(stored[patch.id], patch))
                    for patch in request.updates
                    if patch.id in stored
                ],
            )
        vectors = None
        if self.embedder is not None and any(map(changes_text, request.updates)):
            vectors = await self._vectors(await self._patched(request.updates))
        updating = self.store.update(request.updates, **self._write_options(ctx, vectors))
        items = _check_items(await self._stored(ctx, updating, ids), "UPDATE output")
        if [item.id for item in items] != ids:
            raise _off_contract("UPDATE must return each requested record once, in order")
        await self.access.record(ctx, ids)
        return UpdateOutput(items)

    def _write_options(self, ctx: NodeContext, vectors: Vectors | None) -> dict[str, Any]:
        """The optional arguments of a store write: only those in use, so a store written
        before vectors and guards existed keeps working where it needs neither."""
        options: dict[str, Any] = {}
        if vectors is not None:
            options["vectors"] = vectors
        if self.access.enforcing:
            # Checked again inside the write's transaction: nothing slips in between.
            options["guard"] = AccessGuard(ctx.principal)
        return options

    async def _stored(self, ctx: NodeContext, writing: Awaitable[T], ids: list[str]) -> T:
        """Await a store write; a refusal from inside its transaction is audited too."""
        try:
            return await _backend(writing)
        except MemoryStoreError as exc:
            if exc.code == MemoryErrorCode.FORBIDDEN:
                await self.access.record(ctx, ids, "deny", exc.message)
            raise

    async def _patched(self, patches: list[MemoryPatch]) -> list[MemoryItem]:
        """The records as the patches will leave them (to embed their new text first)."""
        ids = [patch.id for patch in patches]
        stored = {
            item.id: item for item in await _backend(self.store.get(ids, [], DEFAULT_NAMESPACE))
        }
        missing = [item_id for item_id in ids if item_id not in stored]
        if missing:
            raise not_found(f"no record with id {missing[0]!r}")
        now = now_from(self.clock)
        return [apply_patch(stored[patch.id], patch, now) for patch in patches]

    async def delete(self, request: DeleteInput, ctx: NodeContext) -> DeleteOutput:
        self._start_hygiene()
        _check_text(request)
        ids = list(dict.fromkeys(request.ids))
        if not ids:
            return DeleteOutput([])
        if self.access.checks:
            rules = AccessGuard(self.access.principal(ctx))
            found = await _backend(self.store.get(ids, [], DEFAULT_NAMESPACE))
            await self.access.screen(ctx, [(item.id, rules.delete_refusal(item)) for item in found])
        deleting = self.store.delete(ids, **self._write_options(ctx, None))
        deleted = await self._stored(ctx, deleting, ids)
        requested = set(ids)
        if (
            not isinstance(deleted, list)
            or not all(isinstance(item_id, str) and item_id in requested for item_id in deleted)
            or len(set(deleted)) != len(deleted)
        ):
            raise _off_contract("DELETE must return unique ids from the request")
        await self.access.record(ctx, deleted)
        return DeleteOutput(deleted)


def create_memory_worker(
    store: MemoryStore,
    search: MemorySearchProvider | None = None,
    *,
    query_limit: int = 100,
    search_limit: int = 10,
    track_usage: bool = True,
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
        track_usage: Count each SEARCH hit as a use (``usage_count``, ``last_used_at``).
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
            without a retention policy, or ``audit`` on a store without an audit log.
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
    if audit and type(store).append_audit is MemoryStore.append_audit:
        raise InvalidInputError(
            f"audit needs a store with an audit log; {type(store).__name__} has none"
        )
    if embedder is not None:
        model_of(embedder)  # a clear error now, not at the first write
        if not store.can_store_vectors:
            raise InvalidInputError(
                f"{type(store).__name__} keeps no vectors: it cannot take an embedder"
            )
    control = AccessControl(access or AccessPolicy(), store, audit=audit, clock=clock)
    nodes = _MemoryNodes(
        store,
        search or SearchEngine(store, embedder, search_settings),
        _check_limit("query_limit", query_limit),
        _check_limit("search_limit", search_limit),
        track_usage,
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
            "MEMORY.GET": nodes.get,
            "MEMORY.QUERY": nodes.query,
            "MEMORY.SEARCH": nodes.search,
            "MEMORY.WRITE": nodes.write,
            "MEMORY.UPDATE": nodes.update,
            "MEMORY.DELETE": nodes.delete,
        },
        concurrency=concurrency,
        dispose=None if hygiene is None else hygiene.stop,
    )
