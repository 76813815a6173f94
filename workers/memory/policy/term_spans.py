"""What the contradiction rules read of two texts: each text's terms analysed once (kinds,
anchors, the words they came from) and the spans where the two differ, aligned as
``difflib.SequenceMatcher`` aligns them, with what each span is (where it stands, what follows
it, whether it is a word respelt or an identifier renamed)."""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from typing import NamedTuple

from .align import matching_blocks
from .text_norm import TermKind, kind, terms_and_words

__all__ = (
    "CONTENT",
    "VALUES",
    "Analysed",
    "Span",
    "analysed_text",
    "has_kind",
    "head_term",
    "renamed",
    "respelt",
    "spans_of",
)

# A tuple, not a set: membership is then three identity tests in C, where a set would call
# the members' (Python-level) Enum.__hash__ on every test, and this runs per term compared.
CONTENT = (TermKind.WORD, TermKind.NUMBER, TermKind.DATE)
_QUALIFYING = frozenset({"of", "for", "with"})
"""Prepositions that tie a name to the thing it qualifies (the membership *of* Ethan)."""
VALUES = (TermKind.NUMBER, TermKind.DATE)
_CACHED = 500
"""Texts up to this long keep their :class:`Analysed` in a cache of 8192 (a few KB each)."""


class Analysed(NamedTuple):
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


def analysed_text(text: str) -> Analysed:
    return _analysed(text) if len(text) <= _CACHED else _analyse(text)


@lru_cache(maxsize=8192)
def _analysed(text: str) -> Analysed:
    return _analyse(text)


def _analyse(text: str) -> Analysed:
    found, words = terms_and_words(text)
    kinds = tuple(map(kind, found))
    distinct = frozenset(found)
    return Analysed(
        found,
        words,
        kinds,
        tuple(k in CONTENT and not t.endswith("'s") for t, k in zip(found, kinds, strict=True)),
        distinct,
        len(distinct) != len(found),
        tuple(sorted(found)),
        TermKind.NEGATION in kinds,
    )


def _identifier(word: str, found: TermKind) -> bool:
    """A whole number, or a code of letters and digits ("web-01", "inv-2024-0017", "lh2157").
    A number with a decimal point is a version or a measure ("Python 3.11"), not a name."""
    if found is TermKind.NUMBER:
        return word.isdigit()
    return (
        found is TermKind.WORD and any(c.isdigit() for c in word) and any(c.isalpha() for c in word)
    )


def renamed(span: Span) -> bool:
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


def respelt(span: Span) -> bool:
    """One word replaced by a misspelling of it: two neighbouring letters swapped ("fligths",
    "reciepts"), or one letter left out or put in inside a word of seven letters or more
    ("infrastucture", "wharehouse") — never at either end, and never one letter for another:
    "hiking" and "biking", "Maria" and "Marie", "Daniel" and "Daniela", "lunch" and "launch"
    are different words."""
    if len(span.old) != 1 or len(span.new) != 1:
        return False
    if span.old_kinds[0] is not TermKind.WORD or span.new_kinds[0] is not TermKind.WORD:
        return False
    old, new = span.old_words[0], span.new_words[0]
    if not (old.isalpha() and new.isalpha()) or min(len(old), len(new)) < 5:
        return False
    if len(old) == len(new):
        return _swapped(old, new)
    shorter, longer = sorted((old, new), key=len)
    if len(longer) - len(shorter) != 1 or len(shorter) < 7:
        return False
    return any(longer[:at] + longer[at + 1 :] == shorter for at in range(1, len(longer) - 1))


def _swapped(a: str, b: str) -> bool:
    """Whether ``b`` is ``a`` with two neighbouring letters (not the first) swapped."""
    differ = [at for at in range(len(a)) if a[at] != b[at]]
    return (
        len(differ) == 2
        and differ[0] > 0
        and differ[1] == differ[0] + 1
        and a[differ[0]] == b[differ[1]]
        and a[differ[1]] == b[differ[0]]
    )


def has_kind(kinds: Sequence[TermKind], *wanted: TermKind) -> bool:
    # A plain loop, not any(): a generator per call costs more than the few kinds it reads.
    for k in wanted:  # noqa: SIM110
        if k in kinds:
            return True
    return False


class Span(NamedTuple):
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
    """It follows "of", "for" or "with" and an aligned number or date follows it: the
    statement's value is the same on both sides, so the span names *whose* or *which* thing
    has it ("the membership of Ethan costs 39"), not a changed attribute ("closed" / "open on
    Monday", "moved to Berlin" / "to Munich in 2020")."""
    after_head: bool
    """It directly follows the text's first content word (the head of its subject): a number
    or code there names the thing ("Order 4471 shipped", "Ticket SUP-2231 is"), where after a
    verb ("cycles 19 miles", "owes Simon 17 dollars") it is a value."""
    content_after: bool
    """An aligned content term follows it: the statement goes on the same after it."""


def spans_of(old: Analysed, new: Analysed) -> tuple[int, list[Span]]:
    """Aligned term count and the differing spans of two texts' terms.

    The spans are the gaps between matching blocks, in order: what
    ``SequenceMatcher.get_opcodes()`` tags other than ``equal``."""
    a, b = old.terms, new.terms
    shared = 0
    anchored = False
    spans: list[Span] = []
    i1 = j1 = 0
    head = next((at for at, anchor in enumerate(old.anchors) if anchor), -1)
    blocks = matching_blocks(a, b)
    # Per block: whether it or a later one aligns a number or a date (a value both state).
    valued = [False] * len(blocks)
    contented = [False] * len(blocks)
    later = said = False
    for at in range(len(blocks) - 1, -1, -1):
        start, _, size = blocks[at]
        later = later or has_kind(old.kinds[start : start + size], *VALUES)
        said = said or has_kind(old.kinds[start : start + size], *CONTENT)
        valued[at] = later
        contented[at] = said
    for at, (i2, j2, size) in enumerate(blocks):
        if i1 < i2 or j1 < j2:
            spans.append(
                Span(
                    a[i1:i2],
                    b[j1:j2],
                    old.words[i1:i2],
                    new.words[j1:j2],
                    old.kinds[i1:i2],
                    new.kinds[j1:j2],
                    i1 > 0 and j1 > 0 and old.kinds[i1 - 1] is TermKind.NUMBER,
                    not anchored,
                    valued[at] and i1 > 0 and old.words[i1 - 1] in _QUALIFYING,
                    i1 > 0 and j1 > 0 and i1 - 1 == head,
                    contented[at],
                )
            )
        i1, j1 = i2 + size, j2 + size
        shared += size
        if not anchored and size:
            anchored = True in old.anchors[i2:i1]
    return shared, spans


def head_term(text: str) -> str | None:
    """The first term that anchors a subject in ``text`` ("oliver" in "Oliver likes spicy
    food", "offic" in "Helga's office is room 4.12"), or ``None``."""
    analysed = analysed_text(text)
    for term, anchor in zip(analysed.terms, analysed.anchors, strict=True):
        if anchor:
            return term
    return None
