"""How a newer memory text relates to an older one about (probably) the same subject: the same
fact, a contradiction, a compatible update, or something else. Cheap explainable rules, no LLM.

The worker calls :func:`classify` on the candidates :class:`.similarity.CandidateIndex` found,
and :func:`classify_values` when a write names a key that already holds a value.

The rules, in order (thresholds chosen on the dev split of ``bench/data/write_policy``):

1. Equal normalised text, or the same terms in nearly the same order
   (:func:`.similarity.is_near_duplicate`): ``duplicate``.
2. Align the canonical terms (:mod:`.text_norm`) as ``difflib.SequenceMatcher`` does
   (:mod:`.align`, the same blocks at a fraction of the cost). Fewer than
   :data:`MIN_SHARED` aligned terms, or aligned terms below :data:`MIN_OVERLAP` of the longer
   text (unless all of the shorter one aligned): ``unrelated`` (not the same subject).
   A replaced span of more than :data:`MAX_REPLACED` terms on either side: ``unrelated``
   (``other_statement``) — the texts share a frame ("Jamie pasted this into the chat >> …
   << and asked me to keep it") around two different statements, not one value changed.
   A replaced word that is a spelling of the same word (one edit in five letters or more,
   two from eight: "fligths", "infrastucture") is no difference; nothing else differing:
   ``duplicate`` (``paraphrase``).
   Another subject, whatever else changed: a replaced span of words where the subject
   stands (before the first aligned content word: "Alice's flight" -> "Bob's flight"), or
   one identifier (a number, a code of letters and digits) replaced right after the
   subject's head word, the statement going on after it ("Order 4471 shipped …"):
   ``unrelated`` (``subject_changed``).
3. One text negated and the other not (not, never, n't, no longer, stopped…): ``negation``.
4. A preference verb turned to its opposite (like → dislike, love → hate, prefer → avoid):
   ``preference_changed``.
5. A replaced span with a date (ISO, d/m/y, times, month and day names, years) on both sides:
   ``date_changed``; with a number on both sides (or a replaced unit after the same number):
   ``number_changed``.
6. A replaced span of content words: before the first aligned content word, or before an
   unchanged number or date (the value both state: "the membership of Ethan costs 39" and
   "… of Ava costs 39" are two memberships), it is the subject that changed (``unrelated``,
   ``subject_changed``); the same terms in another order swap roles (``unrelated``,
   ``roles_swapped``); otherwise the same attribute has a new object: ``contradiction``,
   ``object_changed``.
7. Only insertions (or only deletions) of content: ``compatible`` (``added_detail`` /
   ``removed_detail``).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from enum import StrEnum
from functools import lru_cache
from typing import NamedTuple

from .align import matching_blocks
from .similarity import is_near_duplicate
from .text_norm import TermKind, kind, terms_and_words

__all__ = (
    "MAX_REPLACED",
    "MIN_OVERLAP",
    "MIN_SHARED",
    "Reason",
    "Relation",
    "Verdict",
    "classify",
    "classify_values",
)

MIN_SHARED = 2
"""Aligned terms two texts need to be about the same subject."""
MIN_OVERLAP = 0.5
"""Aligned terms over the longer text's terms needed to be about the same subject (dev-tuned)."""
MAX_REPLACED = 3
"""Most terms a replaced span holds on either side when one value changed. On the dev split
every labelled contradiction's longest replaced span is 1 to 3 terms ("Berlin" -> "Paris",
a date's day, month and year); template-wrapped chat lines that state different things replace
4 to 20 (a third of the contradictions the rules found among ``safety.jsonl``'s lines)."""


class Relation(StrEnum):
    """How the newer text relates to the older one."""

    DUPLICATE = "duplicate"
    CONTRADICTION = "contradiction"
    COMPATIBLE = "compatible"
    UNRELATED = "unrelated"


class Reason(StrEnum):
    """Why, in one word a person (and the write report) can read."""

    SAME_TEXT = "same_text"
    PARAPHRASE = "paraphrase"
    NUMBER_CHANGED = "number_changed"
    DATE_CHANGED = "date_changed"
    NEGATION = "negation"
    OBJECT_CHANGED = "object_changed"
    PREFERENCE_CHANGED = "preference_changed"
    ADDED_DETAIL = "added_detail"
    REMOVED_DETAIL = "removed_detail"
    SUBJECT_CHANGED = "subject_changed"
    ROLES_SWAPPED = "roles_swapped"
    LOW_OVERLAP = "low_overlap"
    OTHER_STATEMENT = "other_statement"
    VALUE_CHANGED = "value_changed"


@dataclass(frozen=True, slots=True)
class Verdict:
    """The relation, its reason, and the words that differ (old side, new side)."""

    relation: Relation
    reason: Reason
    old_span: tuple[str, ...] = ()
    """Normalised words of the older text that the newer one replaced or dropped."""
    new_span: tuple[str, ...] = ()
    """Normalised words of the newer text that replace or add to the older one."""


_NO_DIFF: tuple[str, ...] = ()
_SHORT_PRODUCT = 400
"""Texts whose term counts multiply to more than this count shared terms with Counters."""
# A tuple, not a set: membership is then three identity tests in C, where a set would call
# the members' (Python-level) Enum.__hash__ on every test, and this runs per term compared.
_CONTENT = (TermKind.WORD, TermKind.NUMBER, TermKind.DATE)
_VALUES = (TermKind.NUMBER, TermKind.DATE)
_CACHED = 500
"""Texts up to this long keep their :class:`_Text` in a cache of 8192 (a few KB each)."""


class _Text(NamedTuple):
    """What the rules read of one text, worked out once: a write compares an incoming text
    with several stored ones, and a stored text meets many incoming ones."""

    terms: tuple[str, ...]
    words: tuple[str, ...]
    """The normalised token of each term, position by position."""
    kinds: tuple[TermKind, ...]
    """The kind of each term, position by position."""
    anchors: tuple[bool, ...]
    """Whether each term anchors a subject: a content term, not a possessive ("Ines's"
    names whose brother or sister follows)."""
    distinct: frozenset[str]
    repeats: bool
    """Some term occurs twice (then :func:`_common` must count, not intersect sets)."""
    ordered: tuple[str, ...]
    """The terms sorted: two texts hold the same terms when these are equal."""
    negated: bool


def _text(text: str) -> _Text:
    return _analysed(text) if len(text) <= _CACHED else _analyse(text)


@lru_cache(maxsize=8192)
def _analysed(text: str) -> _Text:
    return _analyse(text)


def _analyse(text: str) -> _Text:
    found, words = terms_and_words(text)
    kinds = tuple(map(kind, found))
    distinct = frozenset(found)
    return _Text(
        found,
        words,
        kinds,
        tuple(k in _CONTENT and not t.endswith("'s") for t, k in zip(found, kinds, strict=True)),
        distinct,
        len(distinct) != len(found),
        tuple(sorted(found)),
        TermKind.NEGATION in kinds,
    )


def _identifier(word: str, found: TermKind) -> bool:
    """A number, or a code of letters and digits ("web-01", "inv-2024-0017", "lh2157")."""
    if found is TermKind.NUMBER:
        return True
    return (
        found is TermKind.WORD and any(c.isdigit() for c in word) and any(c.isalpha() for c in word)
    )


def _renamed(span: _Span) -> bool:
    """One identifier replaced by another right after the head of the subject, the statement
    going on the same after it: "Order 4471 shipped on March 3" and "Order 4472 …" are two
    orders, "Ticket SUP-2231 is assigned to Maria" and "… SUP-2232 …" two tickets."""
    return (
        len(span.old) == len(span.new) == 1
        and span.after_head
        and span.content_after
        and _identifier(span.old_words[0], span.old_kinds[0])
        and _identifier(span.new_words[0], span.new_kinds[0])
    )


def _respelt(span: _Span) -> bool:
    """One word replaced by a spelling of it: at most one edit (an insertion, deletion,
    substitution or swap of neighbours) in a word of five letters or more, two from eight.
    Shorter words are left alone: "Tom" and "Tim" are two people."""
    if len(span.old) != 1 or len(span.new) != 1:
        return False
    if span.old_kinds[0] is not TermKind.WORD or span.new_kinds[0] is not TermKind.WORD:
        return False
    old, new = span.old_words[0], span.new_words[0]
    shorter = min(len(old), len(new))
    if shorter < 5 or not (old.isalpha() and new.isalpha()):
        return False
    return _edits(old, new, 1 if shorter < 8 else 2) is not None


def _edits(a: str, b: str, most: int) -> int | None:
    """The optimal-string-alignment distance of ``a`` and ``b`` if at most ``most``."""
    if abs(len(a) - len(b)) > most:
        return None
    before: list[int] = []
    row = list(range(len(b) + 1))
    for i in range(1, len(a) + 1):
        current = [i] + [0] * len(b)
        for j in range(1, len(b) + 1):
            cost = a[i - 1] != b[j - 1]
            current[j] = min(row[j] + 1, current[j - 1] + 1, row[j - 1] + cost)
            if i > 1 and j > 1 and a[i - 1] == b[j - 2] and a[i - 2] == b[j - 1]:
                current[j] = min(current[j], before[j - 2] + 1)
        if min(current) > most:
            return None
        before, row = row, current
    return row[-1] if row[-1] <= most else None


def _has(kinds: Sequence[TermKind], *wanted: TermKind) -> bool:
    # A plain loop, not any(): a generator per call costs more than the few kinds it reads.
    for k in wanted:  # noqa: SIM110
        if k in kinds:
            return True
    return False


class _Span(NamedTuple):
    old: tuple[str, ...]
    new: tuple[str, ...]
    old_words: tuple[str, ...]
    new_words: tuple[str, ...]
    old_kinds: tuple[TermKind, ...]
    new_kinds: tuple[TermKind, ...]
    after_number: bool
    """Both sides follow the same number: the unit (or what is counted) changed."""
    before_anchor: bool
    """No aligned content word precedes it: it stands where the subject does."""
    value_after: bool
    """An aligned number or date follows it: the statement's value is the same on both sides,
    so the span qualifies *what* has that value (whose membership, which appointment)."""
    after_head: bool
    """It directly follows the text's first content word (the head of its subject): a number
    or code there names the thing ("Order 4471 shipped", "Ticket SUP-2231 is"), where after a
    verb ("cycles 19 miles", "owes Simon 17 dollars") it is a value."""
    content_after: bool
    """An aligned content term follows it: the statement goes on the same after it."""


def _spans(old: _Text, new: _Text) -> tuple[int, list[_Span]]:
    """Aligned term count and the differing spans of two texts' terms.

    The spans are the gaps between matching blocks, in order: what
    ``SequenceMatcher.get_opcodes()`` tags other than ``equal``."""
    a, b = old.terms, new.terms
    shared = 0
    anchored = False
    spans: list[_Span] = []
    i1 = j1 = 0
    head = next((at for at, anchor in enumerate(old.anchors) if anchor), -1)
    blocks = matching_blocks(a, b)
    # Per block: whether it or a later one aligns a number or a date (a value both state).
    valued = [False] * len(blocks)
    contented = [False] * len(blocks)
    later = said = False
    for at in range(len(blocks) - 1, -1, -1):
        start, _, size = blocks[at]
        later = later or _has(old.kinds[start : start + size], *_VALUES)
        said = said or _has(old.kinds[start : start + size], *_CONTENT)
        valued[at] = later
        contented[at] = said
    for at, (i2, j2, size) in enumerate(blocks):
        if i1 < i2 or j1 < j2:
            spans.append(
                _Span(
                    a[i1:i2],
                    b[j1:j2],
                    old.words[i1:i2],
                    new.words[j1:j2],
                    old.kinds[i1:i2],
                    new.kinds[j1:j2],
                    i1 > 0 and j1 > 0 and old.kinds[i1 - 1] is TermKind.NUMBER,
                    not anchored,
                    valued[at],
                    i1 > 0 and j1 > 0 and i1 - 1 == head,
                    contented[at],
                )
            )
        i1, j1 = i2 + size, j2 + size
        shared += size
        if not anchored and size:
            anchored = True in old.anchors[i2:i1]
    return shared, spans


def _preference_flip(spans: Sequence[_Span]) -> _Span | None:
    prefer, avoid = TermKind.PREFER, TermKind.AVOID
    for span in spans:
        if (prefer in span.old_kinds and avoid in span.new_kinds) or (
            avoid in span.old_kinds and prefer in span.new_kinds
        ):
            return span
    return None


def _verdict(
    relation: Relation, reason: Reason, spans: Sequence[_Span], *kinds: TermKind
) -> Verdict:
    """A verdict naming the words of ``spans`` (only those of ``kinds``, when given)."""
    if not kinds:
        return Verdict(
            relation,
            reason,
            tuple(w for s in spans for w in s.old_words),
            tuple(w for s in spans for w in s.new_words),
        )

    def pick(found: tuple[TermKind, ...], words: tuple[str, ...]) -> Iterator[str]:
        return (w for k, w in zip(found, words, strict=True) if k in kinds)

    return Verdict(
        relation,
        reason,
        tuple(w for s in spans for w in pick(s.old_kinds, s.old_words)),
        tuple(w for s in spans for w in pick(s.new_kinds, s.new_words)),
    )


def _too_little(size_a: int, size_b: int, shared: int) -> bool:
    """Rule 2: too few aligned terms for one subject. The same subject has enough of the
    longer text aligned, or all of the shorter one (a long added detail must not make an
    update look unrelated)."""
    contained = shared == min(size_a, size_b)
    too_little = shared < MIN_SHARED or shared < MIN_OVERLAP * max(size_a, size_b)
    return too_little and not contained


def _common(old: _Text, new: _Text) -> int:
    """How many terms the two texts hold in common, counted with repeats."""
    if not old.repeats and not new.repeats:
        # Each term once on both sides: the multiset intersection is the set intersection.
        return len(old.distinct & new.distinct)
    a, b = old.terms, new.terms
    if len(a) * len(b) > _SHORT_PRODUCT:
        return sum((Counter(a) & Counter(b)).values())
    # Memory texts are a few terms long: crossing them off a list beats building two
    # Counters (0.6 µs against 3.4 on the benchmark's pairs).
    rest = list(b)
    shared = 0
    for found in a:
        if found in rest:
            rest.remove(found)
            shared += 1
    return shared


def classify(old: str, new: str, *, same_subject: bool = False) -> Verdict:
    """How ``new`` relates to ``old`` (see the module notes for the rules, in order).

    Args:
        old: The stored text.
        new: The incoming text.
        same_subject: The caller knows both are about one subject (a key): skip rule 2.

    Returns:
        The verdict: relation, reason and the differing words.
    """
    first_text, second_text = _text(old), _text(new)
    a, b = first_text.terms, second_text.terms
    if a == b:
        return Verdict(Relation.DUPLICATE, Reason.SAME_TEXT)
    if not same_subject and _too_little(len(a), len(b), _common(first_text, second_text)):
        # The terms the two hold in common bound the aligned ones: already too few, so the
        # alignment (most of this function's cost) cannot change the verdict of rule 2.
        return Verdict(Relation.UNRELATED, Reason.LOW_OVERLAP)
    shared, spans = _spans(first_text, second_text)
    if not same_subject:
        if _too_little(len(a), len(b), shared):
            return Verdict(Relation.UNRELATED, Reason.LOW_OVERLAP)
        longer = [
            s for s in spans if s.old and s.new and max(len(s.old), len(s.new)) > MAX_REPLACED
        ]
        if longer:
            return _verdict(Relation.UNRELATED, Reason.OTHER_STATEMENT, longer[:1])
    if first_text.ordered == second_text.ordered:
        if is_near_duplicate(old, new):
            return Verdict(Relation.DUPLICATE, Reason.PARAPHRASE)
        return _verdict(Relation.UNRELATED, Reason.ROLES_SWAPPED, spans)
    # A word misspelt or spelt another way ("fligths", "infrastucture") is the same word.
    spans = [span for span in spans if not _respelt(span)]
    if not spans:
        return Verdict(Relation.DUPLICATE, Reason.PARAPHRASE)
    if not same_subject:
        first = spans[0]
        if (
            first.before_anchor
            and _has(first.old_kinds, TermKind.WORD)
            and _has(first.new_kinds, TermKind.WORD)
        ):
            # Whose or which thing the statement is about changed ("Alice's flight" -> "Bob's
            # flight", "the staging database" -> "the production database"): whatever else
            # changed belongs to another subject.
            return _verdict(Relation.UNRELATED, Reason.SUBJECT_CHANGED, [first])
        named = next((span for span in spans if _renamed(span)), None)
        if named is not None:
            return _verdict(Relation.UNRELATED, Reason.SUBJECT_CHANGED, [named])
    if first_text.negated != second_text.negated:
        return _verdict(Relation.CONTRADICTION, Reason.NEGATION, spans, TermKind.NEGATION)
    flip = _preference_flip(spans)
    if flip is not None:
        return _verdict(Relation.CONTRADICTION, Reason.PREFERENCE_CHANGED, [flip])
    replaced = [s for s in spans if s.old and s.new]
    for wanted, reason in (
        (TermKind.DATE, Reason.DATE_CHANGED),
        (TermKind.NUMBER, Reason.NUMBER_CHANGED),
    ):
        hits = [s for s in replaced if wanted in s.old_kinds and wanted in s.new_kinds]
        if hits:
            return _verdict(Relation.CONTRADICTION, reason, hits)
    units = [s for s in replaced if s.after_number]
    if units:
        return _verdict(Relation.CONTRADICTION, Reason.NUMBER_CHANGED, units[:1])
    content = [s for s in replaced if _has(s.old_kinds, *_CONTENT) and _has(s.new_kinds, *_CONTENT)]
    if content:
        first = content[0]
        if first_text.distinct.issuperset(first.new) and second_text.distinct.issuperset(first.old):
            return _verdict(Relation.UNRELATED, Reason.ROLES_SWAPPED, [first])
        if first.before_anchor or first.value_after:
            return _verdict(Relation.UNRELATED, Reason.SUBJECT_CHANGED, [first])
        return _verdict(Relation.CONTRADICTION, Reason.OBJECT_CHANGED, [first])
    if any(_has(s.new_kinds, *_CONTENT) for s in spans):
        return _verdict(Relation.COMPATIBLE, Reason.ADDED_DETAIL, spans)
    if any(_has(s.old_kinds, *_CONTENT) for s in spans):
        return _verdict(Relation.COMPATIBLE, Reason.REMOVED_DETAIL, spans)
    # Only function words differ ("was" -> "is", "in" -> "at"): the same fact, a new wording.
    return _verdict(Relation.COMPATIBLE, Reason.PARAPHRASE, spans)


def _as_text(value: object) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)


def classify_values(old: object, new: object) -> Verdict:
    """How a new value for a key relates to the value the key holds: the key path.

    The key already says the subject is the same, so there is no ``unrelated``: values that do
    not state the same fact and do not only add detail contradict each other.

    Args:
        old: The stored value (text or any JSON value).
        new: The incoming value.

    Returns:
        ``duplicate``, ``compatible`` or ``contradiction`` with its reason.
    """
    if old == new:
        return Verdict(Relation.DUPLICATE, Reason.SAME_TEXT)
    old_text, new_text = _as_text(old), _as_text(new)
    verdict = classify(old_text, new_text, same_subject=True)
    if verdict.relation is Relation.UNRELATED:
        # Under one key a "new subject" is a new value: "Berlin" -> "Paris".
        reason = (
            Reason.OBJECT_CHANGED
            if verdict.reason is Reason.SUBJECT_CHANGED
            else Reason.VALUE_CHANGED
        )
        return Verdict(Relation.CONTRADICTION, reason, verdict.old_span, verdict.new_span)
    if verdict.relation is Relation.COMPATIBLE and verdict.reason is Reason.PARAPHRASE:
        return Verdict(Relation.DUPLICATE, Reason.PARAPHRASE, verdict.old_span, verdict.new_span)
    return verdict
