"""What a ``MemoryFilter`` means, as plain Python: the reference semantics that SQL stores
translate, and the check the worker applies to every search hit."""

from __future__ import annotations

from collections.abc import Collection
from datetime import datetime

from workers.memory.model.contracts import Hidden, MemoryFilter, MemoryItem
from workers.memory.model.records import to_micros

__all__ = ("is_current", "is_visible", "matches_filter")


def is_visible(item: MemoryItem, principal: str) -> bool:
    """Whether ``principal`` may see ``item``: it is shared, or the principal owns it."""
    return item.visibility == "shared" or item.owner == principal


def is_current(
    item: MemoryItem, include: Collection[Hidden], now: datetime, as_of: datetime | None = None
) -> bool:
    """Whether a read sees ``item`` by its status and validity (see ``MemoryFilter.include``
    and ``as_of``): an active, unexpired record at ``now``; or, ``as_of`` a moment, one that was
    valid then, superseded or not. Contested and quarantined records only when included, and
    expired ones only with ``expired``."""
    status = item.status
    if status != "active" and status not in include and (as_of is None or status != "superseded"):
        return False
    moment = now if as_of is None else as_of
    if "expired" not in include and item.expires_at is not None and item.expires_at <= moment:
        return False
    if as_of is None:
        return True
    valid_from = item.created_at if item.valid_from is None else item.valid_from
    return valid_from <= as_of and (item.valid_to is None or item.valid_to > as_of)


def matches_filter(item: MemoryItem, filter: MemoryFilter, now: datetime) -> bool:
    """Whether ``item`` passes every condition of ``filter`` at ``now`` (expiry is judged
    then); the reference semantics that the SQL stores translate."""
    if not is_current(item, filter.include, now, filter.as_of):
        return False
    if filter.status is not None and item.status not in filter.status:
        return False
    if filter.expires_before is not None and (
        item.expires_at is None or item.expires_at >= filter.expires_before
    ):
        return False
    if filter.namespace is not None and item.namespace != filter.namespace:
        return False
    if filter.category is not None and item.category != filter.category:
        return False
    if filter.key is not None and item.key != filter.key:
        return False
    if filter.key_prefix is not None and (
        item.key is None or not item.key.startswith(filter.key_prefix)
    ):
        return False
    if filter.tags_any is not None and not set(filter.tags_any) & set(item.tags):
        return False
    if filter.tags_all is not None and not set(filter.tags_all) <= set(item.tags):
        return False
    if filter.source is not None and item.source != filter.source:
        return False
    if filter.archived == "exclude" and item.archived_at is not None:
        return False
    if filter.archived == "only" and item.archived_at is None:
        return False
    if filter.pinned is not None and item.pinned is not filter.pinned:
        return False
    if filter.owner is not None and item.owner != filter.owner:
        return False
    if filter.visible_to is not None and not is_visible(item, filter.visible_to):
        return False
    if filter.inactive_before is not None:
        idle = to_micros(filter.inactive_before)
        if to_micros(item.updated_at) >= idle or (
            item.last_used_at is not None and to_micros(item.last_used_at) >= idle
        ):
            return False
    if filter.metadata is not None:
        for name, expected in filter.metadata.items():
            if name not in item.metadata or not _json_equal(item.metadata[name], expected):
                return False
    # Time bounds compare exact microseconds, as the stores do; most filters have none.
    for bound, moment, after in (
        (filter.created_after, item.created_at, True),
        (filter.created_before, item.created_at, False),
        (filter.updated_after, item.updated_at, True),
        (filter.updated_before, item.updated_at, False),
    ):
        if bound is not None:
            value, limit = to_micros(moment), to_micros(bound)
            if not (value > limit if after else value < limit):
                return False
    return True


def _json_equal(stored: object, expected: object) -> bool:
    # JSON kinds first: true is not 1, and "1" is not 1; numbers compare by value (1 == 1.0).
    if isinstance(expected, bool) or isinstance(stored, bool):
        return isinstance(expected, bool) and isinstance(stored, bool) and stored is expected
    if isinstance(expected, int | float):
        return isinstance(stored, int | float) and stored == expected
    return type(stored) is type(expected) and stored == expected
