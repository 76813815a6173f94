"""A record's history as a timeline of differences: what each change did to each field, and
to the content line by line."""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from typing import Any

from ditto.app.ui.render import content_text

__all__ = ("FIELDS", "Step", "timeline")

FIELDS = (
    "key",
    "namespace",
    "summary",
    "category",
    "tags",
    "metadata",
    "source",
    "pinned",
    "archived_at",
    "owner",
    "visibility",
    "trust",
    "principal",
    "status",
    "valid_from",
    "valid_to",
    "expires_at",
    "supersedes",
    "contests",
)
"""The fields a change may alter besides the content (timestamps and counters left out)."""


_UNSET: tuple[Any, ...] = (None, [], {}, False)


@dataclass(frozen=True)
class Step:
    """One history entry and what it changed since the one before it."""

    entry: Any
    fields: list[tuple[str, str, str]] = field(default_factory=list)
    """``(field, before, after)`` for every field that changed."""
    lines: list[tuple[str, str]] = field(default_factory=list)
    """The content's unified diff: ``("add" | "del" | "same" | "hunk", text)``."""


def _shown(value: Any) -> str:
    if value is None:
        return "—"
    if isinstance(value, list | dict):
        return content_text(value)
    return str(value)


def timeline(entries: list[Any]) -> list[Step]:
    """``entries`` (oldest first, as the history log gives them) as steps, newest first."""
    steps = []
    before = None
    for entry in entries:
        record = entry.record
        changed = [
            (name, _shown(getattr(before, name, None)), _shown(getattr(record, name)))
            for name in FIELDS
            if before is None or getattr(before, name) != getattr(record, name)
        ]
        if before is None:  # a new record: only what it was given
            changed = [row for row in changed if getattr(record, row[0]) not in _UNSET]
        old: list[str] = [] if before is None else content_text(before.content).splitlines()
        new = content_text(record.content).splitlines()
        lines = []
        if before is None or before.content != record.content:
            for line in list(difflib.unified_diff(old, new, lineterm="", n=2))[2:]:
                kind = {"+": "add", "-": "del", "@": "hunk"}.get(line[:1], "same")
                lines.append((kind, line))
        steps.append(Step(entry, changed, lines))
        before = record
    steps.reverse()
    return steps
