"""Findings and what is done with their spans: redaction with stable placeholders, the
per-kind summary, JSON paths. Separate from the scanner so that code which only reports or
redacts findings (the worker's result, the audit entry) needs no compiled patterns.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import msgspec

from workers.memory.policy.safety_patterns import BUILTIN_KINDS

__all__ = (
    "Finding",
    "JsonPath",
    "counts",
    "json_strings",
    "kind_rank",
    "placeholder",
    "redact",
    "redact_json",
)

JsonPath = tuple[str | int, ...]
"""Where a string sits in a JSON value: dict keys and list indexes from the root."""

# User kinds rank after the built-in specific ones and before the catch-all ``high_entropy``:
# a user who writes a pattern for their own token format wants it named, not called "random".
_USER_RANK = BUILTIN_KINDS.index("high_entropy") - 0.5


class Finding(msgspec.Struct, frozen=True):
    """One detected span: its kind and offsets into the scanned text, never the text itself."""

    kind: str
    """What was found (``api_key``, ``card``, ``injection``, or a user's kind)."""
    start: int
    """Offset of the first character."""
    end: int
    """Offset just past the last character."""


def kind_rank(kind: str) -> float:
    """How specific a kind is, for settling overlaps (the more specific kind is kept).

    Args:
        kind: A finding's kind.

    Returns:
        Its place in the built-in order (lower is more specific); a user's kind ranks after
        the built-in specific kinds and before ``high_entropy``.
    """
    return BUILTIN_KINDS.index(kind) if kind in BUILTIN_KINDS else _USER_RANK


def placeholder(kind: str) -> str:
    """The stable text that replaces a redacted finding.

    Args:
        kind: The finding's kind.

    Returns:
        ``[REDACTED:<kind>]``.
    """
    return f"[REDACTED:{kind}]"


def redact(text: str, findings: Iterable[Finding]) -> str:
    """Replace each finding's span with its placeholder, ``[REDACTED:<kind>]``.

    Overlapping findings become one placeholder named after the most specific kind among
    them. Placeholders are never found again by
    :meth:`~workers.memory.policy.safety.SafetyScanner.scan`, so redacting twice changes
    nothing.

    Args:
        text: The text the findings were found in.
        findings: Findings of ``text`` (any order; usually those whose action is ``redact``).

    Returns:
        The redacted text.
    """
    spans = sorted(findings, key=lambda f: (f.start, f.end))
    if not spans:
        return text
    pieces: list[str] = []
    cursor = 0
    index = 0
    while index < len(spans):
        first = spans[index]
        start, end, kind = first.start, first.end, first.kind
        index += 1
        while index < len(spans) and spans[index].start < end:
            nxt = spans[index]
            end = max(end, nxt.end)
            if kind_rank(nxt.kind) < kind_rank(kind):
                kind = nxt.kind
            index += 1
        pieces.append(text[cursor:start])
        pieces.append(placeholder(kind))
        cursor = end
    pieces.append(text[cursor:])
    return "".join(pieces)


def redact_json(value: Any, found: Iterable[tuple[JsonPath, Finding]]) -> Any:
    """A copy of a JSON value with the given findings redacted in its strings.

    Args:
        value: The value that :meth:`~workers.memory.policy.safety.SafetyScanner.scan_json` scanned.
        found: ``(path, finding)`` pairs from that scan (usually those to redact).

    Returns:
        The value itself when nothing is to be redacted, else a new value in which only
        the strings with findings differ: containers on the way to them are copied (a
        tuple becomes a list, as in JSON), every other part is shared with ``value``, which
        is never modified.
    """
    by_path: dict[JsonPath, list[Finding]] = {}
    for path, finding in found:
        by_path.setdefault(path, []).append(finding)
    if not by_path:
        return value
    if () in by_path:
        return redact(value, by_path[()]) if isinstance(value, str) else value
    # Copy only the containers on the way to a changed string (the rest is shared), walking
    # down each path in a loop rather than by recursion, so any depth works.
    root = _copy(value)
    copied: set[JsonPath] = {()}
    for path, findings in by_path.items():
        node = root
        for depth, key in enumerate(path[:-1], start=1):
            child = node[key]
            if path[:depth] not in copied:
                child = node[key] = _copy(child)
                copied.add(path[:depth])
            node = child
        node[path[-1]] = redact(node[path[-1]], findings)
    return root


def _copy(value: Any) -> Any:
    if isinstance(value, dict):
        return dict(value)
    return list(value)


def counts(findings: Iterable[Finding]) -> dict[str, int]:
    """How many findings of each kind: the summary a write reports (never the values).

    Args:
        findings: Findings of one or more texts.

    Returns:
        Kind to count, kinds in sorted order.
    """
    tally: dict[str, int] = {}
    for finding in findings:
        tally[finding.kind] = tally.get(finding.kind, 0) + 1
    return dict(sorted(tally.items()))


def json_strings(value: Any, path: JsonPath = ()) -> list[tuple[JsonPath, str]]:
    """The strings of a JSON value with their paths, in document order (dict keys are not
    content: only values).

    Args:
        value: Any JSON value.
        path: Where ``value`` sits (prefixed to every path).

    Returns:
        ``(path, string)`` pairs.
    """
    strings: list[tuple[JsonPath, str]] = []
    # An explicit stack, not recursion: content nested deeper than Python's recursion limit
    # is still scanned (and in document order: children are pushed reversed).
    stack: list[tuple[JsonPath, Any]] = [(path, value)]
    while stack:
        at, item = stack.pop()
        if isinstance(item, str):
            strings.append((at, item))
        elif isinstance(item, dict):
            stack.extend(((*at, k), v) for k, v in reversed(item.items()))
        elif isinstance(item, list | tuple):
            stack.extend(((*at, i), v) for i, v in reversed(list(enumerate(item))))
    return strings
