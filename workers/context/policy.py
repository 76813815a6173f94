"""The context policy: limits every operation enforces, and how requests may only tighten them."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Literal

from ditto.errors import ErrorCode, InvalidInputError
from workers.context.canonical import js_json, json_string, utf8_size
from workers.context.contracts import ContextItem
from workers.context.errors import ContextError

__all__ = ("ContextPolicy", "inline_bytes", "is_referenced")

_MAX = 1_000_000


def _check_range(name: str, value: int | None, *, optional: bool = False) -> None:
    if value is None and optional:
        return
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= _MAX:
        raise InvalidInputError(f"policy {name} must be an integer from 1 to {_MAX}")


@dataclass(frozen=True, slots=True)
class ContextPolicy:
    """Limits of the CONTEXT worker (``workers.context.policy`` in ``ditto.yaml``).

    Raises:
        InvalidInputError: A value out of range (checked at construction).
    """

    max_inline_bytes: int = 65_536
    """Most UTF-8 bytes of an item's inline content, unless the item carries a reference."""
    max_items: int = 256
    """Most items LOAD and UPDATE may leave (and the COMPRESS/SELECT ceiling)."""
    max_tokens: int | None = None
    """Token ceiling for SELECT and COMPRESS budgets; ``None``: only what requests ask."""
    duplicate: Literal["replace", "keep-first", "reject"] = "replace"
    """What an id already present does: replace in place, keep the first, or fail."""
    missing_removal: Literal["ignore", "reject"] = "ignore"
    """What removing an absent id does."""

    def __post_init__(self) -> None:
        _check_range("max_inline_bytes", self.max_inline_bytes)
        _check_range("max_items", self.max_items)
        _check_range("max_tokens", self.max_tokens, optional=True)
        if self.duplicate not in ("replace", "keep-first", "reject"):
            raise InvalidInputError("policy duplicate must be replace, keep-first or reject")
        if self.missing_removal not in ("ignore", "reject"):
            raise InvalidInputError("policy missing_removal must be ignore or reject")

    def item_cap(self, requested: int | None) -> int:
        """Items a request may keep: its own budget, never above the policy's."""
        return self.max_items if requested is None else min(requested, self.max_items)

    def token_cap(self, requested: int | None) -> float:
        """Tokens a request may keep (``inf`` when neither sets a budget)."""
        if self.max_tokens is None:
            return math.inf if requested is None else requested
        return self.max_tokens if requested is None else min(requested, self.max_tokens)

    def check_inline(self, item: ContextItem) -> ContextItem:
        """Raises:
        ContextError: ``INLINE_LIMIT_EXCEEDED`` for oversized inline content."""
        content = item.content
        if type(content) is str and 6 * len(content) + 2 <= self.max_inline_bytes:
            # No character takes more than 6 bytes in JSON (a \uXXXX escape), so short text
            # is within the limit without measuring it exactly.
            return item
        if inline_bytes(content) > self.max_inline_bytes and not is_referenced(item):
            raise ContextError(
                ErrorCode.INLINE_LIMIT_EXCEEDED,
                f"item {item.id!r} has more than {self.max_inline_bytes} bytes of inline "
                "content; store it elsewhere and give a reference",
            )
        return item


def inline_bytes(content: Any) -> int:
    """UTF-8 size of ``content`` as compact JSON (insertion order)."""
    if type(content) is str:  # the common case, without the general walk
        return utf8_size(json_string(content))
    return utf8_size(js_json(content, sort_keys=False))


def is_referenced(item: ContextItem) -> bool:
    """Items that point at their content elsewhere are exempt from the inline limit."""
    if item.source is not None:
        return True
    return isinstance(item.content, list) and any(
        isinstance(part, dict) and part.get("type") == "reference" for part in item.content
    )
