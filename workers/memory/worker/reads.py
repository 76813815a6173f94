"""The MEMORY read nodes: ``GET``, ``QUERY`` and ``SEARCH``, each checking what the store or
the search provider returned."""

from __future__ import annotations

import math
from datetime import datetime

import msgspec

from ditto.runtime.context import NodeContext
from workers.memory.model.contracts import (
    MAX_QUERY_CHARS,
    GetInput,
    GetOutput,
    MemoryItem,
    QueryInput,
    QueryOutput,
    SearchHit,
    SearchInput,
    SearchOutput,
)
from workers.memory.model.cursor import decode_cursor, encode_cursor
from workers.memory.model.errors import MemoryStoreError
from workers.memory.model.filters import is_current, matches_filter
from workers.memory.model.records import now_from, order_key
from workers.memory.model.validation import check_input
from workers.memory.worker.boundary import check_items, off_contract
from workers.memory.worker.misses import explain_miss
from workers.memory.worker.node_base import NodeBase

__all__ = ("ReadNodes",)


class ReadNodes(NodeBase):
    """The handlers of ``MEMORY.GET``, ``MEMORY.QUERY`` and ``MEMORY.SEARCH``."""

    async def get(self, request: GetInput, ctx: NodeContext) -> GetOutput:
        self._start_hygiene()
        check_input(request)
        principal = self.access.principal(ctx)
        ids = list(dict.fromkeys(request.ids))
        keys = list(dict.fromkeys(request.keys))
        if not ids and not keys:
            return GetOutput([])
        now = now_from(self.clock)  # before the store reads: what it saw unexpired still is
        found = check_items(
            # A record asked for by id and by key may come back twice; it is returned once.
            await self.store.get(ids, keys, request.namespace),
            "GET output",
            unique=False,
        )
        by_id = {item.id: item for item in found}
        chosen = [by_id.get(item_id) for item_id in ids]
        if keys:
            # A key names its active record first, then the others sharing it.
            by_key: dict[str, list[MemoryItem]] = {}
            for record in sorted(found, key=lambda record: record.status != "active"):
                if record.key is not None and record.namespace == request.namespace:
                    by_key.setdefault(record.key, []).append(record)
            chosen += [record for key in keys for record in by_key.get(key, ())]
        ordered: dict[str, MemoryItem] = {}
        for chose in chosen:
            if (
                chose is not None
                and (request.include_archived or chose.archived_at is None)
                and is_current(chose, request.include, now, request.as_of)
            ):
                ordered.setdefault(chose.id, chose)
        items = list(ordered.values())
        if not self.access.silent:
            items = await self.access.reads(ctx, items, principal)
        if self.renewal is not None:
            items = await self.renewal.renew(items, now)
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
        target = request.explain_miss  # the worker's to answer: providers never see it
        request = msgspec.structs.replace(
            request,
            limit=limit,
            filter=self.access.visible_filter(request.filter, principal),
            explain_miss=None,
        )
        now = now_from(self.clock)  # before the search: what it saw unexpired still is
        hits, missing = await self._search(request, ctx, now)
        returned = await self.access.reads(ctx, [hit.memory for hit in hits], principal)
        if len(returned) < len(hits):  # never when enforcing: the store filtered already
            kept = {item.id for item in returned}
            hits = [hit for hit in hits if hit.memory.id in kept]
        if self.usage is not None and hits:
            await self.usage.record_usage([hit.memory.id for hit in hits], now_from(self.clock))
        if self.renewal is not None and hits:
            renewed = await self.renewal.renew([hit.memory for hit in hits], now)
            hits = [
                hit if item is hit.memory else msgspec.structs.replace(hit, memory=item)
                for hit, item in zip(hits, renewed, strict=True)
            ]
        miss = None
        if target is not None:

            async def again(wider: SearchInput) -> list[SearchHit]:
                return (await self._search(wider, ctx, now))[0]

            seer = principal if self.access.enforcing else None
            miss = await explain_miss(request, target, hits, self.store, again, now, seer)
        return SearchOutput(hits, missing, miss)

    async def _search(
        self, request: SearchInput, ctx: NodeContext, now: datetime
    ) -> tuple[list[SearchHit], int | None]:
        """The provider's hits for ``request``, checked against the contract and the filter,
        and its count of records without a vector."""
        limit = request.limit or self.search_limit
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
            if not matches_filter(hit.memory, request.filter, now):
                raise off_contract("SEARCH returned a record outside the filter")
        missing = output.vector_missing
        if missing is not None and (isinstance(missing, bool) or not isinstance(missing, int)):
            raise off_contract("SEARCH vector_missing must be an integer")
        return hits, missing
