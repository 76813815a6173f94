"""Why a search did not return a record: the stage that kept it out, in the order a search
applies them — the record itself (there, visible to the caller), its status and validity, the
request's filter, then the ranking (not a candidate at all, under ``min_score``, or past the
``limit``, with the rank it had)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime

import msgspec

from workers.memory.model.contracts import (
    DEFAULT_NAMESPACE,
    MAX_BATCH,
    MemoryItem,
    MissExplanation,
    MissTarget,
    SearchHit,
    SearchInput,
)
from workers.memory.model.errors import MemoryStoreError
from workers.memory.model.filters import is_current, is_visible, matches_filter
from workers.memory.model.outcomes import MissStage
from workers.memory.ports import MemoryStore

__all__ = ("explain_miss",)

Search = Callable[[SearchInput], Awaitable[Sequence[SearchHit]]]
"""Runs the request's search (its provider, its strategy) and returns the hits."""


async def explain_miss(
    request: SearchInput,
    target: MissTarget,
    hits: Sequence[SearchHit],
    store: MemoryStore,
    search: Search,
    now: datetime,
    principal: str | None,
) -> MissExplanation:
    """The stage that kept ``target`` out of ``request``'s ``hits``.

    Args:
        request: The search as it ran (its filter already narrowed to what the caller sees).
        target: The record asked about.
        hits: What the search returned.
        store: Where the record is looked up.
        search: Runs a search like ``request`` with another limit or options.
        now: When the search ran (expiry is judged then).
        principal: The caller under access control (``None``: access control off): a record
            it may not see is ``not_found``, never named.
    """
    namespace = request.filter.namespace or DEFAULT_NAMESPACE
    found = await store.get(
        [] if target.id is None else [target.id],
        [] if target.key is None else [target.key],
        namespace,
    )
    found.sort(key=lambda item: item.status != "active")  # a key names its active record first
    if principal is not None:
        found = [item for item in found if is_visible(item, principal)]
    if not found:
        return MissExplanation("not_found", "no record with that id or key (that you may see)")
    item = found[0]
    rank, hit = _placed(hits, item)
    if hit is not None:
        return _at("returned", f"it was returned, at rank {rank}", item, rank, hit.score)
    refused = _refused_by_record(request, item, now)
    if refused is not None:
        return refused
    rank, hit = _placed(await search(msgspec.structs.replace(request, limit=MAX_BATCH)), item)
    if hit is not None:
        why = f"it ranked {rank}, past the limit of {request.limit}"
        return _at("limit", why, item, rank, hit.score)
    try:  # without a floor (the request's or the worker's default min_score)
        unfloored = await search(
            msgspec.structs.replace(
                request, limit=MAX_BATCH, options={**request.options, "min_score": None}
            )
        )
    except MemoryStoreError:  # a provider that takes no min_score applies none
        unfloored = []
    rank, hit = _placed(unfloored, item)
    if hit is not None:
        why = f"it scored {hit.score or 0.0:.4f}, under the search's min_score"
        return _at("below_min_score", why, item, rank, hit.score)
    return _at(
        "not_a_candidate",
        "the query found no match in it (no query word in its text, nor a near enough vector)",
        item,
    )


def _placed(hits: Sequence[SearchHit], item: MemoryItem) -> tuple[int, SearchHit | None]:
    """Where ``item`` ranks among ``hits`` (from 1), and its hit; ``(0, None)`` when absent."""
    for rank, hit in enumerate(hits, start=1):
        if hit.memory.id == item.id:
            return rank, hit
    return 0, None


def _refused_by_record(
    request: SearchInput, item: MemoryItem, now: datetime
) -> MissExplanation | None:
    """The stage that left ``item`` out before any ranking, if one did."""
    wanted = request.filter
    if wanted.namespace is not None and item.namespace != wanted.namespace:
        return _at("namespace", f"it is in namespace {item.namespace!r}", item)
    if wanted.archived == "exclude" and item.archived_at is not None:
        return _at("archived", "it was archived by retention (include archived to see it)", item)
    if not is_current(item, wanted.include, now, wanted.as_of):
        if item.status != "active" and item.status not in wanted.include:
            status = item.status
            why = {
                "superseded": "a later record superseded it (include superseded, or read as_of)",
                "contested": "it contradicts a more trusted record (include contested)",
                "quarantined": "it is held for review (include quarantined)",
            }[status]
            return _at(status, why, item)
        return _at("expired", "it expired (include expired to see it)", item)
    if not matches_filter(item, wanted, now):
        return _at("filter", "the request's filter leaves it out", item)
    return None


def _at(
    stage: MissStage,
    reason: str,
    item: MemoryItem,
    rank: int | None = None,
    score: float | None = None,
) -> MissExplanation:
    return MissExplanation(stage, reason, item.id, rank, score)
