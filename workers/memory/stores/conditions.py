"""SQL conditions the SQL stores share, written once against a placeholder function (``?`` for
SQLite, ``$n`` for PostgreSQL, ``%s`` for MySQL) and a column quoter: which records a read sees
by status and validity, and every part of a filter whose SQL is the same in each dialect. A
store adds the parts its dialect spells its own way (key prefixes, tags, metadata, usage)."""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from datetime import datetime
from typing import Any

from workers.memory.model.contracts import Hidden, MemoryFilter, OrderBy, OrderField
from workers.memory.model.records import to_micros

__all__ = ("common_conditions", "current_conditions", "keyset_order")


def current_conditions(
    filter: MemoryFilter, now: datetime, mark: Callable[[Any], str]
) -> list[str]:
    """:func:`~workers.memory.model.filters.is_current` as SQL conditions over the alias ``m``,
    and the filter's ``expires_before`` and ``status``.

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
    if filter.status is not None:
        parts.append(f"m.status IN ({', '.join(mark(status) for status in filter.status)})")
    moment = to_micros(now if as_of is None else as_of)
    if "expired" not in include:
        parts.append(f"(m.expires_at IS NULL OR m.expires_at > {mark(moment)})")
    if as_of is not None:
        parts.append(
            f"coalesce(m.valid_from, m.created_at) <= {mark(moment)} "
            f"AND (m.valid_to IS NULL OR m.valid_to > {mark(moment)})"
        )
    return parts


def _plain(name: str) -> str:
    return f"m.{name}"


def common_conditions(
    filter: MemoryFilter,
    now: datetime,
    mark: Callable[[Any], str],
    column: Callable[[str], str] = _plain,
) -> list[str]:
    """:func:`current_conditions`, then the filter's conditions that read alike in every SQL
    dialect: equality on namespace, category, key and source, archived, pinned, owner,
    visibility to a principal, and the creation and update bounds.

    Args:
        filter: The read's filter.
        now: When expiry is judged.
        mark: Binds a value and returns its placeholder (called in the conditions' order).
        column: A column's name over the alias ``m``, quoted as the dialect needs.
    """
    parts = current_conditions(filter, now, mark)
    for name, value in (
        ("namespace", filter.namespace),
        ("category", filter.category),
        ("key", filter.key),
        ("source", filter.source),
    ):
        if value is not None:
            parts.append(f"{column(name)} = {mark(value)}")
    if filter.archived == "exclude":
        parts.append(f"{column('archived_at')} IS NULL")
    elif filter.archived == "only":
        parts.append(f"{column('archived_at')} IS NOT NULL")
    if filter.pinned is not None:
        parts.append(f"{column('pinned')} = {mark(filter.pinned)}")
    if filter.owner is not None:
        parts.append(f"{column('owner')} = {mark(filter.owner)}")
    if filter.visible_to is not None:
        owner = column("owner")
        parts.append(f"({column('visibility')} = 'shared' OR {owner} = {mark(filter.visible_to)})")
    for name, bound, operator in (
        ("created_at", filter.created_after, ">"),
        ("created_at", filter.created_before, "<"),
        ("updated_at", filter.updated_after, ">"),
        ("updated_at", filter.updated_before, "<"),
    ):
        if bound is not None:
            parts.append(f"{column(name)} {operator} {mark(to_micros(bound))}")
    return parts


def keyset_order(order: OrderBy, expressions: Mapping[OrderField, str]) -> tuple[str, str, str]:
    """``(expression, direction, comparison)`` for keyset pagination on ``(expression, id)``,
    with the dialect's expression for each order field."""
    direction = "DESC" if order.direction == "desc" else "ASC"
    comparison = "<" if order.direction == "desc" else ">"
    return expressions[order.field], direction, comparison
