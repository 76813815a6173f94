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
Findings and redaction live in :mod:`workers.memory.policy.safety_redact` and are
re-exported here; the detectors are data, in :mod:`~workers.memory.policy.safety_patterns`
(secrets and personal data) and :mod:`~workers.memory.policy.safety_injection` (prompt
injection; other languages in ``safety_injection_langs``, base64 in ``safety_encoded``)."""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import msgspec

from ditto.errors import DittoError, ErrorCode
from workers.memory.policy.safety_checks import CHECKS, Check
from workers.memory.policy.safety_encoded import with_encoded_injections
from workers.memory.policy.safety_injection import INJECTION_PATTERNS
from workers.memory.policy.safety_patterns import BUILTIN_PATTERNS
from workers.memory.policy.safety_redact import (
    Finding,
    JsonPath,
    counts,
    json_strings,
    kind_rank,
    placeholder,
    redact,
    redact_json,
)
from workers.memory.policy.safety_rules import ACTION_STRENGTH, SafetyAction, SafetyRules
from workers.memory.policy.safety_unmask import unmask

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

_PLACEHOLDER = re.compile(r"\[REDACTED:[a-z][a-z0-9_]*\]")
_SEPARATOR = "\n\x00\n"


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
    check: Check | None = None
    gate: tuple[str, ...] = ()
    also: tuple[str, ...] = ()
    pre: re.Pattern[str] | None = None
    narrowed: bool = False
    """The pattern has a group ``v``: the finding is that group, not the whole match."""
    min_chunk: int = 0
    fallback: bool = False
    non_ascii: bool = False
    gate_words: frozenset[bytes] = frozenset()
    also_words: frozenset[bytes] = frozenset()


def _literals(joined: str) -> tuple[str, ...]:
    return tuple(joined.split("|")) if joined else ()


def _words(joined: str) -> frozenset[bytes]:
    return frozenset(word.encode() for word in joined.split("|")) if joined else frozenset()


_PUNCTUATION = "!\"#$%&'()*+,./:;<=>?@[\\]^_`{|}~"
_WORD_BREAKS = bytes.maketrans(_PUNCTUATION.encode(), b" " * len(_PUNCTUATION))
"""Punctuation that ends a word (not "-": "role-play" is one word), for the word gates."""
_WIDE_BREAKS = str.maketrans(
    dict.fromkeys("\u2018\u2019\u201c\u201d\u00ab\u00bb\u3000\uff0c\u3002", " ")
)


def _text_words(lowered: str) -> frozenset[bytes]:
    """The words of a lower-cased text, as UTF-8, for the word gates.

    A byte table maps punctuation to spaces several times faster than a ``str`` table, and
    leaves the bytes of non-ASCII letters alone.
    """
    if not lowered.isascii():
        lowered = lowered.translate(_WIDE_BREAKS)
    return frozenset(lowered.encode().translate(_WORD_BREAKS).split())


def _passes(row: _Detector, lowered: str, words: frozenset[bytes]) -> bool:
    """Whether a row's gates let its regex run (the scan of a view; scan() inlines this)."""
    if row.gate and not any(literal in lowered for literal in row.gate):
        return False
    if row.also and not any(literal in lowered for literal in row.also):
        return False
    if row.gate_words and words.isdisjoint(row.gate_words):
        return False
    return not (row.also_words and words.isdisjoint(row.also_words))


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
        unmasked = []
        # Rows share a pre-check regex (cards and phones: seven digits): compile it once, and
        # run it once per scan (see scan()).
        pres: dict[str, re.Pattern[str]] = {}
        for spec in (*BUILTIN_PATTERNS, *INJECTION_PATTERNS):
            if spec.kind in self.rules.disabled:
                continue
            pattern = spec.pattern.replace("%(min)d", str(self.rules.min_token_length))
            flags = re.MULTILINE | (re.IGNORECASE if spec.ignore_case else 0)
            regex = re.compile(pattern, flags)
            check = CHECKS[spec.check] if spec.check is not None else None
            pre = None if spec.pre is None else pres.setdefault(spec.pre, re.compile(spec.pre))
            narrowed = "v" in regex.groupindex
            gate, also = _literals(spec.gate), _literals(spec.also)
            if spec.whole_words:
                gate_words, also_words = _words(spec.gate), _words(spec.also)
                gate, also = (), ()
            else:
                gate_words, also_words = frozenset(), frozenset()
            detector = _Detector(
                spec.kind,
                regex,
                check,
                gate,
                also,
                pre,
                narrowed,
                self.rules.min_token_length if spec.min_chunk < 0 else spec.min_chunk,
                spec.fallback,
                spec.non_ascii,
                gate_words,
                also_words,
            )
            if spec.unmask:
                unmasked.append(detector)
            if not spec.view_only:
                detectors.append(detector)
        for extra in self.rules.extra_patterns:
            if extra.kind in self.rules.disabled:
                continue
            regex = re.compile(extra.pattern)
            narrowed = "v" in regex.groupindex
            detectors.append(_Detector(extra.kind, regex, narrowed=narrowed))
        self._detectors = tuple(detectors)
        self._unmasked = tuple(unmasked)

    def scan(self, text: str) -> list[Finding]:
        """Every finding in ``text``, ordered by position.

        Overlaps are settled so each secret is counted once: findings of one kind that overlap
        become one, and a finding that overlaps a more specific kind's (a ``high_entropy``
        token that is an ``api_key``) is dropped. Text inside a ``[REDACTED:...]`` placeholder
        is never reported, so scanning redacted text finds nothing new. The injection rows
        also run over a de-obfuscated view of the text when it shows obfuscation (zero-width
        characters, look-alike letters, leetspeak, spaced-out letters: see
        :mod:`workers.memory.policy.safety_unmask`); their findings are reported at the
        original's offsets.

        Args:
            text: Any string.

        Returns:
            The findings (kinds and offsets only).
        """
        lowered = text.lower()
        found: list[Finding] = []
        pre_found: dict[re.Pattern[str], bool] = {}
        longest = -1  # the longest whitespace-free run, measured when a row first asks
        ascii_only = text.isascii()
        words: frozenset[bytes] | None = None
        for detector in self._detectors:
            if detector.non_ascii and ascii_only:
                continue
            if detector.min_chunk:
                if longest < 0:
                    longest = max(map(len, text.split()), default=0)
                if longest < detector.min_chunk:
                    continue
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
            if detector.gate_words:
                # One set of the text's words answers every word-gated row with a C-level
                # isdisjoint, where a dozen substring tests per row would cost a microsecond.
                if words is None:
                    words = _text_words(lowered)
                if words.isdisjoint(detector.gate_words):
                    continue
                if detector.also_words and words.isdisjoint(detector.also_words):
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
        if self._unmasked:
            if (seen := unmask(text)) is not None:
                found.extend(self._scan_view(*seen, ascii_only=seen[0].isascii()))
            found = with_encoded_injections(text, found, self._injects, longest)
        if not found:
            return found
        if "[REDACTED:" in text:
            held = [match.span() for match in _PLACEHOLDER.finditer(text)]
            found = [f for f in found if not any(a <= f.start and f.end <= b for a, b in held)]
        return _settle(found)

    def _injects(self, text: str) -> bool:
        """Whether the injection rows find an injection in ``text`` (or its unmasked view)."""
        view, offsets = unmask(text) or (text, None)
        return bool(self._scan_view(view, offsets, ascii_only=view.isascii()))

    def _scan_view(
        self, view: str, offsets: Sequence[int] | None, *, ascii_only: bool
    ) -> list[Finding]:
        """The unmasked rows' findings in a de-obfuscated view, at the original's offsets."""
        # Markup mapped to spaces leaves runs of them: the literals are matched on words.
        lowered = " ".join(view.lower().split())
        words = _text_words(lowered)
        found = []
        for row in self._unmasked:
            if row.non_ascii and ascii_only:
                continue
            if not _passes(row, lowered, words):
                continue
            if row.pre is not None and row.pre.search(view) is None:
                continue
            for match in row.regex.finditer(view):
                start, end = match.span()
                if start == end:
                    continue
                if offsets is not None:
                    start, end = offsets[start], offsets[end - 1] + 1
                found.append(Finding(row.kind, start, end))
        return found

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
        strings: list[tuple[JsonPath, str]] = []
        if isinstance(value, dict):  # a record's fields: most are strings, None or empty
            for key, item in value.items():
                if isinstance(item, str):
                    strings.append(((key,), item))
                elif item and isinstance(item, dict | list | tuple):
                    strings += json_strings(item, (key,))
        else:
            strings = json_strings(value)
        if len(strings) <= 1:
            return [(path, finding) for path, text in strings for finding in self.scan(text)]
        # One scan of all the strings joined costs far less than one scan each (a record's
        # tags and summary are short: the fixed cost per scan would dominate). The separator
        # is a line break around a NUL, which no built-in pattern matches, so matches stay
        # within their string; one that crosses anyway (a user's ".*") is cut at each
        # boundary, and every string it touched gets its part.
        starts = []
        at = 0
        for _, text in strings:
            starts.append(at)
            at += len(text) + len(_SEPARATOR)
        out: list[tuple[JsonPath, Finding]] = []
        for finding in self.scan(_SEPARATOR.join(text for _, text in strings)):
            index = bisect_right(starts, finding.start) - 1
            while index < len(strings) and starts[index] < finding.end:
                first = starts[index]
                end = min(finding.end, first + len(strings[index][1])) - first
                start = max(finding.start - first, 0)
                if start < end:
                    out.append((strings[index][0], Finding(finding.kind, start, end)))
                index += 1
        return out


def _settle(found: list[Finding]) -> list[Finding]:
    """Merge same-kind overlaps; drop a finding that overlaps a more specific kind's."""
    kept: list[Finding] = []
    for finding in sorted(found, key=lambda f: (kind_rank(f.kind), f.start, -f.end)):
        for index, other in enumerate(kept):
            if finding.start < other.end and other.start < finding.end:
                if other.kind == finding.kind:
                    start = min(other.start, finding.start)
                    kept[index] = Finding(other.kind, start, max(other.end, finding.end))
                break
        else:
            kept.append(finding)
    return sorted(kept, key=lambda f: (f.start, f.end))


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
