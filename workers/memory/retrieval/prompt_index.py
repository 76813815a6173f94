"""``render_index``: the compact listing of memories an agent puts into its prompt."""

from __future__ import annotations

from workers.memory.model.contracts import MemoryFilter, MemoryItem, OrderBy
from workers.memory.model.records import content_text
from workers.memory.ports import MemoryStore

__all__ = ("render_index",)

_PREVIEW_CHARS = 80


async def render_index(
    store: MemoryStore,
    *,
    namespace: str | None = None,
    max_entries: int = 20,
    max_bytes: int | None = None,
) -> str:
    """One line per memory, most recently used first, never-used ones last::

        - plan:current [default] (core; project) — Ship the store this week

    Args:
        store: Where the memories are.
        namespace: Only this namespace; default all.
        max_entries: Most lines (>= 1).
        max_bytes: Stop before the UTF-8 listing would exceed this many bytes.

    Returns:
        The listing (lines joined by ``\\n``; empty when there is nothing to list).
    """
    if max_entries < 1:
        raise ValueError("max_entries must be at least 1")
    await store.flush()
    filter = MemoryFilter(namespace=namespace)
    used = await store.query(filter, OrderBy("last_used_at", "desc"), max_entries, None)
    # Most recently used first; among records last used at the same moment, most used first.
    used.sort(
        key=lambda item: (item.last_used_at is not None, item.last_used_at, item.usage_count),
        reverse=True,
    )
    lines: list[str] = []
    size = 0
    for item in used:
        line = _line(item)
        cost = len(line.encode("utf-8")) + (1 if lines else 0)
        if max_bytes is not None and size + cost > max_bytes:
            break
        lines.append(line)
        size += cost
    return "\n".join(lines)


def _flat(text: str) -> str:
    """One line: every run of whitespace (newlines included) becomes one space, so a stored
    field can never start a line of its own in the agent's prompt."""
    return " ".join(text.split())


def _line(item: MemoryItem) -> str:
    label = _flat(item.key or item.id)
    facets = _flat("; ".join(filter(None, (item.category, ", ".join(item.tags)))))
    preview = _flat(item.summary or content_text(item.content))
    if len(preview) > _PREVIEW_CHARS:
        preview = preview[: _PREVIEW_CHARS - 1] + "…"
    return f"- {label} [{_flat(item.namespace)}] ({facets}) — {preview}"
