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
4. A preference verb turned to its opposite (like → dislike, love → hate, prefer → avoid),
   or the same terms with the things a preference ranks swapped, subject and verb unchanged
   ("prefers tea over coffee" → "coffee over tea"; other swapped roles are two statements,
   rule 6): ``preference_changed``.
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

from .similarity import is_near_duplicate
from .term_spans import (
    CONTENT,
    Analysed,
    Span,
    analysed_text,
    has_kind,
    renamed,
    respelt,
    spans_of,
)
from .text_norm import TermKind

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


def _preference_flip(spans: Sequence[Span]) -> Span | None:
    prefer, avoid = TermKind.PREFER, TermKind.AVOID
    for span in spans:
        if (prefer in span.old_kinds and avoid in span.new_kinds) or (
            avoid in span.old_kinds and prefer in span.new_kinds
        ):
            return span
    return None


def _verdict(
    relation: Relation, reason: Reason, spans: Sequence[Span], *kinds: TermKind
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


def _common(old: Analysed, new: Analysed) -> int:
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


_STANCE = (TermKind.NEGATION, TermKind.PREFER, TermKind.AVOID)


def _only_stance(old: Analysed, new: Analysed) -> bool:
    """Whether the two differ only in negations and preference words (liking or avoiding),
    with something else left: "Likes sushi" / "Dislikes sushi", "Vegetarian" / "Not
    vegetarian"."""

    def rest(text: Analysed) -> list[str]:
        return [
            "~stance" if found in (TermKind.PREFER, TermKind.AVOID) else term
            for term, found in zip(text.terms, text.kinds, strict=True)
            if found is not TermKind.NEGATION
        ]

    if not (has_kind(old.kinds, *_STANCE) or has_kind(new.kinds, *_STANCE)):
        return False
    left = rest(old)
    return left == rest(new) and any(term != "~stance" for term in left)


def _preference_swapped(old: Analysed, new: Analysed) -> bool:
    """Whether two texts of the same terms swap what a preference ranks: the subject and the
    preference verb unchanged, the things compared in the other order ("Alice prefers tea
    over coffee" / "… coffee over tea"), where other swapped roles are two statements
    ("Alice sent the report to Bob" / "Bob sent … to Alice")."""
    same = next(
        (at for at, (a, b) in enumerate(zip(old.terms, new.terms, strict=True)) if a != b),
        len(old.terms),
    )
    return has_kind(old.kinds[:same], TermKind.PREFER)


def classify(old: str, new: str, *, same_subject: bool = False) -> Verdict:
    """How ``new`` relates to ``old`` (see the module notes for the rules, in order).

    Args:
        old: The stored text.
        new: The incoming text.
        same_subject: The caller knows both are about one subject (a key): skip rule 2.

    Returns:
        The verdict: relation, reason and the differing words.
    """
    first_text, second_text = analysed_text(old), analysed_text(new)
    a, b = first_text.terms, second_text.terms
    if a == b:
        return Verdict(Relation.DUPLICATE, Reason.SAME_TEXT)
    # "Likes sushi" / "Dislikes sushi": a statement too short for rule 2 that only turns its
    # stance (a negation, a preference) says the same thing of the same subject.
    same_subject = same_subject or _only_stance(first_text, second_text)
    if not same_subject and _too_little(len(a), len(b), _common(first_text, second_text)):
        # The terms the two hold in common bound the aligned ones: already too few, so the
        # alignment (most of this function's cost) cannot change the verdict of rule 2.
        return Verdict(Relation.UNRELATED, Reason.LOW_OVERLAP)
    shared, spans = spans_of(first_text, second_text)
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
        if _preference_swapped(first_text, second_text):
            return _verdict(Relation.CONTRADICTION, Reason.PREFERENCE_CHANGED, spans)
        return _verdict(Relation.UNRELATED, Reason.ROLES_SWAPPED, spans)
    # A word misspelt or spelt another way ("fligths", "infrastucture") is the same word.
    spans = [span for span in spans if not respelt(span)]
    if not spans:
        return Verdict(Relation.DUPLICATE, Reason.PARAPHRASE)
    if not same_subject:
        first = spans[0]
        if (
            first.before_anchor
            and has_kind(first.old_kinds, TermKind.WORD)
            and has_kind(first.new_kinds, TermKind.WORD)
        ):
            # Whose or which thing the statement is about changed ("Alice's flight" -> "Bob's
            # flight", "the staging database" -> "the production database"): whatever else
            # changed belongs to another subject.
            return _verdict(Relation.UNRELATED, Reason.SUBJECT_CHANGED, [first])
        named = next((span for span in spans if renamed(span)), None)
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
    content = [
        s for s in replaced if has_kind(s.old_kinds, *CONTENT) and has_kind(s.new_kinds, *CONTENT)
    ]
    if content:
        first = content[0]
        if first_text.distinct.issuperset(first.new) and second_text.distinct.issuperset(first.old):
            return _verdict(Relation.UNRELATED, Reason.ROLES_SWAPPED, [first])
        if first.before_anchor or first.value_after:
            return _verdict(Relation.UNRELATED, Reason.SUBJECT_CHANGED, [first])
        return _verdict(Relation.CONTRADICTION, Reason.OBJECT_CHANGED, [first])
    if any(has_kind(s.new_kinds, *CONTENT) for s in spans):
        return _verdict(Relation.COMPATIBLE, Reason.ADDED_DETAIL, spans)
    if any(has_kind(s.old_kinds, *CONTENT) for s in spans):
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
