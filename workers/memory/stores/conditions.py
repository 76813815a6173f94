"""SQL conditions the SQL stores share, written once against a placeholder function (``?`` for
SQLite, ``$n`` for PostgreSQL): which records a read sees by status and validity."""

from __future__ import annotations

from collections.abc import Callable, Collection
from datetime import datetime
from typing import Any

from workers.memory.model.contracts import Hidden, MemoryFilter
from workers.memory.model.records import to_micros

__all__ = ("current_conditions",)


def current_conditions(
    filter: MemoryFilter, now: datetime, mark: Callable[[Any], str]
) -> list[str]:
    """:func:`~workers.memory.model.filters.is_current` as SQL conditions over the alias ``m``,
    and the filter's ``expires_before``.

    Args:
        filter: The read's filter (``include``, ``as_of``, ``expires_before``).
        now: When expiry is judged (unless ``as_of`` is given).
        mark: Binds a value and returns its placeholder.

    Returns:
        Conditions to join with ``AND`` (none when the read includes everything).
    """
    include: Collection[Hidden] = filter.include
    as_of = filter.as_of
    parts: list[str] = []
    if filter.expires_before is not None:
        parts.append(f"m.expires_at < {mark(to_micros(filter.expires_before))}")
    statuses = ["active", *(kind for kind in include if kind != "expired")]
    if as_of is not None and "superseded" not in statuses:
        statuses.append("superseded")  # it was the truth during its validity
    if len(set(statuses)) < 4:
        parts.append(f"m.status IN ({', '.join(mark(status) for status in statuses)})")
    moment = to_micros(now if as_of is None else as_of)
    if "expired" not in include:
        parts.append(f"(m.expires_at IS NULL OR m.expires_at > {mark(moment)})")
    if as_of is not None:
        parts.append(
            f"coalesce(m.valid_from, m.created_at) <= {mark(moment)} "
            f"AND (m.valid_to IS NULL OR m.valid_to > {mark(moment)})"
        )
    return parts
