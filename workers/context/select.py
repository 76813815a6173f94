"""The default SELECT strategy: deterministic scoring, no I/O (the reference's formula).

``score = protected + memory + priority*100 + relevance*10 + overlap*1000 + index/max(1, n)``,
added in that order so floats match the reference bit for bit. ``protected`` (1,000,000) is
for ``infer`` only: ``protected``, ``current_goal`` or ``role == "system"``. ``memory`` is for
``memory`` only: +500 ``memory_candidate``, +100 ``reusable``, +50 ``stable``. ``overlap`` is the
share of query terms found in the item. For ``memory``, private and ineligible items are dropped.
Ranking is not a safety policy: a small token budget can still leave a protected item out.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from operator import attrgetter
from typing import Any

from workers.context.canonical import js_json
from workers.context.contracts import ContextItem, Purpose

__all__ = ("default_select", "number", "text_content", "truthy")

_TERM = re.compile(r"[\w-]+")
_METADATA = attrgetter("metadata")


def truthy(metadata: dict[str, Any] | None, key: str) -> bool:
    """``metadata[key] is True`` (JSON ``true`` only, never ``1`` or ``"true"``)."""
    return metadata is not None and metadata.get(key) is True


def number(metadata: dict[str, Any] | None, key: str) -> float:
    """``metadata[key]`` when it is a finite number (booleans are not numbers), else 0."""
    value = None if metadata is None else metadata.get(key)
    if isinstance(value, bool) or not isinstance(value, int | float):
        return 0
    try:
        return float(value) if math.isfinite(value) else 0
    except OverflowError:  # an integer past the float range is no usable number either
        return 0


def text_content(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(
            part["text"]
            if isinstance(part, dict)
            and part.get("type") == "text"
            and isinstance(part.get("text"), str)
            else js_json(part, sort_keys=True)
            for part in content
        )
    return js_json(content, sort_keys=True)


def _terms(content: Any) -> set[str]:
    return set(_TERM.findall(text_content(content).lower()))


def default_select(purpose: Purpose, query: Any, items: Sequence[ContextItem]) -> list[ContextItem]:
    """Every eligible item, best first (the node applies the limit and token budget)."""
    query_terms = _terms("" if query is None else query)
    if not query_terms and not any(map(_METADATA, items)):
        # Only the position term is left (index / n), so later items simply rank first.
        return list(reversed(items))
    count = max(1, len(items))
    ranked: list[tuple[float, int, str, ContextItem]] = []
    for index, item in enumerate(items):
        metadata = item.metadata
        if purpose == "memory" and (
            truthy(metadata, "private")
            or (metadata is not None and metadata.get("memory_eligible") is False)
        ):
            continue
        score = 0.0
        if purpose == "infer" and (
            truthy(metadata, "protected")
            or truthy(metadata, "current_goal")
            or (metadata is not None and metadata.get("role") == "system")
        ):
            score = 1_000_000
        if purpose == "memory":
            score += (
                (500 if truthy(metadata, "memory_candidate") else 0)
                + (100 if truthy(metadata, "reusable") else 0)
                + (50 if truthy(metadata, "stable") else 0)
            )
        score += number(metadata, "priority") * 100
        score += number(metadata, "relevance") * 10
        if query_terms:
            score += len(query_terms & _terms(item.content)) / len(query_terms) * 1000
        score += index / count
        ranked.append((score, index, item.id, item))
    ranked.sort(key=lambda row: (-row[0], row[1], row[2]))
    return [row[3] for row in ranked]
