"""COMPRESS: the deterministic algorithm and the checks every compressor's output must pass.

Protected items (``protected``, ``safety``, ``current_goal``, ``pending`` or ``role ==
"system"``) are never dropped, and items sharing a ``call_id`` (a tool call and its result) are
kept or dropped together. The deterministic algorithm drops whole unprotected groups, lowest
keep score first (low priority and relevance, ``retrievable``, older), until both budgets hold,
and keeps the survivors in their original order. Nothing is summarised.
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import msgspec

from ditto.errors import ErrorCode
from workers.context.contracts import Context, ContextItem
from workers.context.errors import ContextError
from workers.context.policy import ContextPolicy
from workers.context.select import number, truthy

__all__ = ("deterministic_compress", "is_protected", "validate_compressed")

Tokens = Callable[[ContextItem], Awaitable[int]]


def is_protected(item: ContextItem) -> bool:
    metadata = item.metadata
    return any(
        truthy(metadata, key) for key in ("protected", "safety", "current_goal", "pending")
    ) or (metadata is not None and metadata.get("role") == "system")


def group_key(item: ContextItem) -> str:
    call_id = None if item.metadata is None else item.metadata.get("call_id")
    return f"call:{call_id}" if isinstance(call_id, str) and call_id else f"item:{item.id}"


@dataclass
class _Group:
    key: str
    first_index: int
    members: list[ContextItem] = field(default_factory=list)
    protected: bool = False
    tokens: int = 0

    def keep_score(self, count: int) -> float:
        return max(
            number(member.metadata, "priority") * 100
            + number(member.metadata, "relevance") * 10
            + (-10 if truthy(member.metadata, "retrievable") else 0)
            + (self.first_index + position) / max(1, count)
            for position, member in enumerate(self.members)
        )


def _groups(items: Sequence[ContextItem]) -> dict[str, _Group]:
    groups: dict[str, _Group] = {}
    for index, item in enumerate(items):
        key = group_key(item)
        group = groups.get(key)
        if group is None:
            group = groups[key] = _Group(key, index)
        group.members.append(item)
        group.protected = group.protected or is_protected(item)
    return groups


async def deterministic_compress(
    items: Sequence[ContextItem], max_items: int, max_tokens: float, tokens: Tokens
) -> Context:
    groups = _groups(items)
    if math.isfinite(max_tokens):
        for group in groups.values():
            group.tokens = sum([await tokens(member) for member in group.members])
    protected = [group for group in groups.values() if group.protected]
    if (
        sum(len(group.members) for group in protected) > max_items
        or sum(group.tokens for group in protected) > max_tokens
    ):
        raise ContextError(
            ErrorCode.BUDGET_UNSATISFIABLE,
            "the protected items alone exceed the budget",
        )
    count = len(items)
    item_count = count
    token_count = sum(group.tokens for group in groups.values())
    removable = sorted(
        (group for group in groups.values() if not group.protected),
        key=lambda group: (group.keep_score(count), group.first_index, group.key),
    )
    dropped: set[str] = set()
    for group in removable:
        if item_count <= max_items and token_count <= max_tokens:
            break
        dropped.add(group.key)
        item_count -= len(group.members)
        token_count -= group.tokens
    return Context([item for item in items if group_key(item) not in dropped])


async def validate_compressed(
    original: Context,
    output: Any,
    max_items: int,
    max_tokens: float,
    tokens: Tokens,
    policy: ContextPolicy,
) -> Context:
    """``output`` checked against ``original`` and the budgets.

    Raises:
        ContextError: ``INVALID_PROVIDER_OUTPUT`` for a result that is not a context, repeats or
            invents ids, drops a protected item, splits a ``call_id`` group or breaks a budget;
            ``INLINE_LIMIT_EXCEEDED`` for oversized inline content.
    """

    def invalid(reason: str) -> ContextError:
        return ContextError(ErrorCode.INVALID_PROVIDER_OUTPUT, f"compressed context {reason}")

    try:
        context = msgspec.convert(
            msgspec.to_builtins(output) if isinstance(output, msgspec.Struct) else output, Context
        )
    except (msgspec.ValidationError, TypeError) as exc:
        raise invalid("is not a context") from exc
    ids = [item.id for item in context.items]
    if len(set(ids)) != len(ids):
        raise invalid("repeats an item id")
    known = {item.id for item in original.items}
    if not set(ids) <= known:
        raise invalid("introduced a new context item")
    kept = set(ids)
    if any(is_protected(item) and item.id not in kept for item in original.items):
        raise invalid("dropped a protected item")
    for group in _groups(original.items).values():
        present = [member.id in kept for member in group.members]
        if any(present) and not all(present):
            raise invalid(f"split the correlated group {group.key!r}")
    if len(ids) > max_items:
        raise invalid("is over the item budget")
    if (
        math.isfinite(max_tokens)
        and sum([await tokens(item) for item in context.items]) > max_tokens
    ):
        raise invalid("is over the token budget")
    for item in context.items:
        policy.check_inline(item)
    return msgspec.structs.replace(context, version=None)
