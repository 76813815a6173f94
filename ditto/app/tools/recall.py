"""Auto-recall and auto-save: the memories worth putting in a system prompt, and conversation
turns kept as memory.

``recall_block`` follows PRX's injection: the best few memories for the user's message, each
above a relevance threshold, rendered as ``- [category] key: content`` lines under a
``[Memory context]`` heading, with a byte cap per entry and one for the whole block (PRX: 3,072
and 24,576 bytes). Text is cut at character boundaries — a cap never splits a UTF-8 character
— and a cut entry ends with ``…``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ditto.app.tools.toolkit import CONVERSATION, MemoryToolkit, text_of

if TYPE_CHECKING:
    from ditto import Ditto

__all__ = ("HEADING", "clip_utf8", "recall_block", "save_turn")

HEADING = "[Memory context]"
_ELLIPSIS = "…"


def clip_utf8(text: str, max_bytes: int) -> str:
    """``text`` cut to at most ``max_bytes`` bytes of UTF-8, at a character boundary; a cut
    text ends with ``…`` (inside the cap)."""
    encoded = text.encode("utf-8")
    if len(encoded) <= max_bytes:
        return text
    room = max_bytes - len(_ELLIPSIS.encode("utf-8"))
    if room <= 0:
        return ""
    # errors="ignore" drops the partial character a byte cut may leave at the end.
    return encoded[:room].decode("utf-8", errors="ignore") + _ELLIPSIS


async def recall_block(
    runtime: Ditto,
    query: str,
    *,
    max_items: int = 5,
    max_item_bytes: int = 3_072,
    max_total_bytes: int = 24_576,
    min_relevance: float | None = 0.4,
    namespace: str = "default",
    session_id: str | None = None,
    principal: str | None = None,
    include_conversation: bool = False,
) -> str:
    """The memories relevant to ``query``, rendered for a system prompt ("" when none).

    One ``MEMORY.SEARCH`` through ``runtime`` (access control, audit and usage apply); hits
    below ``min_relevance`` are left out (PRX's 0.4), and so are saved conversation turns
    unless ``include_conversation`` (as PRX skips its auto-saved turns: the conversation is
    in the prompt already). The block never exceeds ``max_total_bytes`` and no entry exceeds
    ``max_item_bytes`` (UTF-8).

    Raises:
        ValueError: A cap or count below 1.
        DittoError: The search failed (its code says why).
    """
    for name, value in (
        ("max_items", max_items),
        ("max_item_bytes", max_item_bytes),
        ("max_total_bytes", max_total_bytes),
    ):
        if value < 1:
            raise ValueError(f"{name} must be at least 1")
    request: dict[str, Any] = {
        "query": query,
        # Turns are dropped after the search: ask for enough to fill the block without them.
        "limit": max_items if include_conversation else max_items * 3,
        "filter": {"namespace": namespace},
    }
    if session_id is not None:
        request["filter"]["metadata"] = {"session_id": session_id}
    if min_relevance is not None:
        request["options"] = {"min_score": min_relevance}
    hits = (await runtime.invoke("MEMORY.SEARCH", request, principal=principal)).unwrap().hits
    if not include_conversation:
        hits = [hit for hit in hits if hit.memory.category != CONVERSATION]
    hits = hits[:max_items]
    lines = [HEADING]
    used = len(HEADING.encode("utf-8"))
    for hit in hits:
        item = hit.memory
        label = f"- [{item.category}] {item.key}: " if item.key else f"- [{item.category}] "
        entry = clip_utf8(label + " ".join(text_of(item.content).split()), max_item_bytes)
        cost = 1 + len(entry.encode("utf-8"))  # the newline before it
        if used + cost > max_total_bytes:
            entry = clip_utf8(entry, max_total_bytes - used - 1)
            if entry:
                lines.append(entry)
            break
        lines.append(entry)
        used += cost
    if len(lines) == 1:
        return ""
    return "\n".join(lines)


async def save_turn(toolkit: MemoryToolkit, role: str, text: str, *, key: str | None = None) -> str:
    """Keep one conversation turn as memory (auto-save): category ``conversation``, with the
    toolkit's session and the speaker in ``metadata``; ``search_history`` finds it.

    Returns:
        The new record's id.

    Raises:
        DittoError: The write failed (its code says why).
    """
    metadata: dict[str, Any] = {"role": role}
    if toolkit.session_id is not None:
        metadata["session_id"] = toolkit.session_id
    draft: dict[str, Any] = {
        "content": text,
        "category": CONVERSATION,
        "namespace": toolkit.namespace,
        "metadata": metadata,
        "source": "conversation",
    }
    if key is not None:
        draft["key"] = key
    result = await toolkit.runtime.invoke(
        "MEMORY.WRITE", {"memories": [draft]}, principal=toolkit.principal
    )
    (item,) = result.unwrap().items
    return str(item.id)
