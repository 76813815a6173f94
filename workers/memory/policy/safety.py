"""The safety stage of the write policy: find secrets, personal data and prompt injections in
memory content, redact them, and decide what the write does.

Pure and synchronous (stdlib ``re`` only, no I/O), so the worker calls it inline::

    scanner = SafetyScanner(rules)                        # once: compiles every pattern
    found = scanner.scan_json({"content": ..., "summary": ..., "tags": ..., "metadata": ...})
    verdict = decide([finding for _, finding in found], rules)
    if verdict.action is SafetyAction.REJECT:
        raise UnsafeContentError(verdict.kinds, verdict.counts)
    redactable = [(p, f) for p, f in found if rules.action_for(f.kind) is SafetyAction.REDACT]
    clean = redact_json(value, redactable)

A :class:`Finding` holds a kind and offsets, never the matched text, so findings, verdicts,
counts and errors can go to logs, results and audit entries without carrying the secret.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import msgspec

from ditto.errors import DittoError, ErrorCode
from workers.memory.policy.safety_checks import CHECKS, Check
from workers.memory.policy.safety_patterns import BUILTIN_KINDS, BUILTIN_PATTERNS
from workers.memory.policy.safety_rules import ACTION_STRENGTH, SafetyAction, SafetyRules

__all__ = (
    "Finding",
    "JsonPath",
    "SafetyScanner",
    "SafetyVerdict",
    "UnsafeContentError",
    "counts",
    "decide",
    "placeholder",
    "redact",
    "redact_json",
)

JsonPath = tuple[str | int, ...]
"""Where a string sits in a JSON value: dict keys and list indexes from the root."""

_PLACEHOLDER = re.compile(r"\[REDACTED:[a-z][a-z0-9_]*\]")
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


class SafetyVerdict(msgspec.Struct, frozen=True):
    """What the safety stage decided for one write, safe to report and log."""

    action: SafetyAction
    """The strongest action among the kinds found (``allow`` when nothing was found)."""
    kinds: tuple[str, ...]
    """The kinds found, sorted."""
    counts: dict[str, int]
    """How many findings of each kind."""


class UnsafeContentError(DittoError):
    """A write was refused because it holds content of a kind whose action is ``reject``.

    The message and details name the kinds (and counts), never a value.

    Args:
        kinds: The kinds that caused the refusal.
        counts: Findings per kind, for the details.
    """

    default_code = ErrorCode.UNSAFE_CONTENT

    def __init__(self, kinds: Sequence[str], counts: Mapping[str, int] | None = None) -> None:
        names = ", ".join(sorted(kinds))
        super().__init__(
            f"the write was refused by the safety policy: it contains {names}",
            details={"kinds": sorted(kinds), "counts": dict(counts or {})},
        )
        self.kinds = tuple(sorted(kinds))


@dataclass(frozen=True, slots=True)
class _Detector:
    kind: str
    regex: re.Pattern[str]
    check: Check | None
    gate: tuple[str, ...]
    also: tuple[str, ...]
    pre: re.Pattern[str] | None
    narrowed: bool
    long_token: bool
    fallback: bool
    """The pattern has a group ``v``: the finding is that group, not the whole match."""


def _literals(joined: str) -> tuple[str, ...]:
    return tuple(joined.split("|")) if joined else ()


def _rank(kind: str) -> float:
    return BUILTIN_KINDS.index(kind) if kind in BUILTIN_KINDS else _USER_RANK


def placeholder(kind: str) -> str:
    """The stable text that replaces a redacted finding.

    Args:
        kind: The finding's kind.

    Returns:
        ``[REDACTED:<kind>]``.
    """
    return f"[REDACTED:{kind}]"


class SafetyScanner:
    """Finds secrets, personal data and injections in text, with patterns compiled once.

    Built once per rule set (compiling is the expensive part) and shared: it holds no state
    between calls, so one scanner serves concurrent writes.

    Args:
        rules: Patterns, disabled kinds and thresholds; the defaults when omitted.
    """

    def __init__(self, rules: SafetyRules | None = None) -> None:
        self.rules = rules if rules is not None else SafetyRules()
        detectors = []
        # Rows share a pre-check regex (cards and phones: seven digits): compile it once, and
        # run it once per scan (see scan()).
        pres: dict[str, re.Pattern[str]] = {}
        for spec in BUILTIN_PATTERNS:
            if spec.kind in self.rules.disabled:
                continue
            pattern = spec.pattern.replace("%(min)d", str(self.rules.min_token_length))
            flags = re.MULTILINE | (re.IGNORECASE if spec.ignore_case else 0)
            regex = re.compile(pattern, flags)
            check = CHECKS[spec.check] if spec.check is not None else None
            pre = None if spec.pre is None else pres.setdefault(spec.pre, re.compile(spec.pre))
            narrowed = "v" in regex.groupindex
            gate, also = _literals(spec.gate), _literals(spec.also)
            detectors.append(
                _Detector(
                    spec.kind,
                    regex,
                    check,
                    gate,
                    also,
                    pre,
                    narrowed,
                    spec.long_token,
                    spec.fallback,
                )
            )
        for extra in self.rules.extra_patterns:
            if extra.kind in self.rules.disabled:
                continue
            regex = re.compile(extra.pattern)
            narrowed = "v" in regex.groupindex
            detectors.append(
                _Detector(extra.kind, regex, None, (), (), None, narrowed, False, False)
            )
        self._detectors = tuple(detectors)
        self._min_token = self.rules.min_token_length

    def scan(self, text: str) -> list[Finding]:
        """Every finding in ``text``, ordered by position.

        Overlaps are settled so each secret is counted once: findings of one kind that overlap
        become one, and a finding that overlaps a more specific kind's (a ``high_entropy``
        token that is an ``api_key``) is dropped. Text inside a ``[REDACTED:...]`` placeholder
        is never reported, so scanning redacted text finds nothing new.

        Args:
            text: Any string.

        Returns:
            The findings (kinds and offsets only).
        """
        lowered = text.lower()
        found: list[Finding] = []
        pre_found: dict[re.Pattern[str], bool] = {}
        for detector in self._detectors:
            # Plain loops, not any(): a generator per row would cost more than most regexes.
            if detector.gate:
                for literal in detector.gate:
                    if literal in lowered:
                        break
                else:
                    continue
            if detector.also:
                for literal in detector.also:
                    if literal in lowered:
                        break
                else:
                    continue
            if detector.long_token and (
                len(text) < self._min_token or max(map(len, text.split())) < self._min_token
            ):
                continue
            if (pre := detector.pre) is not None:
                hit = pre_found.get(pre)
                if hit is None:
                    hit = pre_found[pre] = pre.search(text) is not None
                if not hit:
                    continue
            for match in detector.regex.finditer(text):
                start, end = match.span("v") if detector.narrowed else match.span()
                if start == end or start < 0:
                    continue
                if detector.fallback and any(f.start < end and start < f.end for f in found):
                    continue
                if detector.check is not None and not detector.check(text[start:end], self.rules):
                    continue
                found.append(Finding(detector.kind, start, end))
        if not found:
            return found
        if "[REDACTED:" in text:
            held = [match.span() for match in _PLACEHOLDER.finditer(text)]
            found = [f for f in found if not any(a <= f.start and f.end <= b for a, b in held)]
        return _settle(found)

    def scan_json(self, value: Any) -> list[tuple[JsonPath, Finding]]:
        """Every finding in the strings of a JSON value (dict values, list items, at any depth).

        Dict keys are not scanned: they are field names, not content.

        Args:
            value: Any JSON value (``str``, ``int``, ``float``, ``bool``, ``None``, ``list``,
                ``dict``); for a record, pass ``{"content": ..., "summary": ..., "tags": ...,
                "metadata": ...}`` so paths name the field.

        Returns:
            ``(path, finding)`` pairs, the finding's offsets relative to the string at path.
        """
        out: list[tuple[JsonPath, Finding]] = []
        # An explicit stack, not recursion: content nested deeper than Python's recursion
        # limit is still scanned (and in document order: children are pushed reversed).
        stack: list[tuple[JsonPath, Any]] = [((), value)]
        while stack:
            path, item = stack.pop()
            if isinstance(item, str):
                out.extend((path, finding) for finding in self.scan(item))
            elif isinstance(item, dict):
                stack.extend(((*path, k), v) for k, v in reversed(item.items()))
            elif isinstance(item, list | tuple):
                stack.extend(((*path, i), v) for i, v in reversed(list(enumerate(item))))
        return out


def _settle(found: list[Finding]) -> list[Finding]:
    """Merge same-kind overlaps; drop a finding that overlaps a more specific kind's."""
    kept: list[Finding] = []
    for finding in sorted(found, key=lambda f: (_rank(f.kind), f.start, -f.end)):
        for index, other in enumerate(kept):
            if finding.start < other.end and other.start < finding.end:
                if other.kind == finding.kind:
                    start = min(other.start, finding.start)
                    kept[index] = Finding(other.kind, start, max(other.end, finding.end))
                break
        else:
            kept.append(finding)
    return sorted(kept, key=lambda f: (f.start, f.end))


def redact(text: str, findings: Iterable[Finding]) -> str:
    """Replace each finding's span with its placeholder, ``[REDACTED:<kind>]``.

    Overlapping findings become one placeholder named after the most specific kind among
    them. Placeholders are never found again by :meth:`SafetyScanner.scan`, so redacting
    twice changes nothing.

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
            if _rank(nxt.kind) < _rank(kind):
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
        value: The value that :meth:`SafetyScanner.scan_json` scanned.
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


def decide(findings: Iterable[Finding], rules: SafetyRules) -> SafetyVerdict:
    """The action a write takes: the strongest action among its findings' kinds.

    Args:
        findings: Every finding of the write (all of its strings).
        rules: The rules in force (their ``actions``).

    Returns:
        The verdict: the action (reject > quarantine > redact > allow; ``allow`` for no
        findings), the kinds found and their counts.
    """
    tally = counts(findings)
    action = SafetyAction.ALLOW
    for kind in tally:
        candidate = rules.action_for(kind)
        if ACTION_STRENGTH[candidate] > ACTION_STRENGTH[action]:
            action = candidate
    return SafetyVerdict(action, tuple(tally), tally)
