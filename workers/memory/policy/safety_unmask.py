"""A de-obfuscated view of a text, for the prompt-injection rows of the safety stage.

Injections are hidden from people and filters in a handful of published ways: invisible
characters inside words (zero-width spaces, soft hyphens, bidi controls), Unicode tag
characters (text that renders as nothing), look-alike letters from another script
(Cyrillic "о" in "ignоre"), full-width and mathematical letters, leetspeak ("1gn0r3"),
spaced-out letters ("i g n o r e", "i-g-n-o-r-e") and Markdown emphasis around single words.
:func:`unmask` undoes all of them at once and says where each character of the view came from,
so a finding in the view is reported at the right place in the original.

It is built for the common case first: a text that shows none of the signals (most do) costs
one or two regex searches and gets ``None``, and the injection rows are not run a second time.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence

__all__ = ("unmask",)

_INVISIBLE = re.compile(
    "[\u00ad\u034f\u180e\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u2069\ufeff]+"
)
"""Format characters that render as nothing: removed (they split words for a regex only)."""

_SPACED = re.compile(r"(?<![^\W_])(?:[^\W\d_][ .\-_*·])+[^\W\d_](?![^\W_])")
"""Single letters, one separator character apart: ``i g n o r e``, ``a-l-l``, ``i n``. Two
spaces or more end a run, so ``i g n o r e   a l l`` keeps its word break. Collapsed only in
a text that has a run of three (``_SPACED_HINT``): elsewhere "a b" is two words."""
_SPACED_HINT = re.compile(
    r"[ .\-_*·](?<![^\W_][^\W\d_].)(?<=[^\W\d_].)(?=[^\W\d_][ .\-_*·][^\W\d_](?![^\W_]))"
)
"""The start of such a run, found from its first separator: a pattern that opens with a
character set lets the regex engine skip ahead in C, several times faster than ``_SPACED``."""
_SEPARATOR = re.compile(r"[ .\-_*·]")


def _wide_table() -> dict[int, str]:
    table: dict[int, str] = {0x3000: " "}
    # Full-width ASCII (U+FF01-FF5E), mathematical alphanumerics (bold, italic, script, ...)
    # and Unicode tags (U+E0020-E007E, the "ASCII smuggling" block): one code point each,
    # so the view keeps the original's length and offsets.
    for code in (*range(0xFF01, 0xFF5F), *range(0x1D400, 0x1D800)):
        folded = unicodedata.normalize("NFKC", chr(code))
        if len(folded) == 1 and folded.isascii():
            table[code] = folded
    for code in range(0xE0020, 0xE007F):
        table[code] = chr(code - 0xE0000)
    return table


_WIDE_TABLE = _wide_table()
_WIDE = re.compile(
    "[\uff10-\uff19\uff21-\uff3a\uff41-\uff5a\U0001d400-\U0001d7ff\U000e0020-\U000e007e]"
)
"""Full-width or mathematical letters and digits, or tag characters: the table is worth it."""

_CONFUSABLES = str.maketrans(
    "аеорсухіјѕԁһӏԛԝАВЕКМНОРСТХІЈЅαεικνορτυχΑΒΕΖΗΙΚΜΝΟΡΤΥΧ",
    "aeopcyxijsdhlqwABEKMHOPCTXIJSaeikvoptuxABEZHIKMNOPTYX",
)
"""Cyrillic and Greek letters that look like Latin ones (from the Unicode confusables data)."""
_SCRIPTS = "\u0370-\u03ff\u0400-\u052f"
_MIXED = re.compile(f"[{_SCRIPTS}](?:(?<=[A-Za-z].)|(?=[A-Za-z]))")
_MIXED_WORD = re.compile(
    rf"(?<![^\W\d_])[^\W\d_]*(?:[A-Za-z][{_SCRIPTS}]|[{_SCRIPTS}][A-Za-z])[^\W\d_]*"
)
"""A word that mixes Latin with Cyrillic or Greek: only such words are folded, so Russian and
Greek text stays itself (and keeps matching the rows written for it)."""

_LEET_HINT = re.compile(r"[013457$](?<=[A-Za-z].)(?=[A-Za-z])")
"""A leet digit between two letters ("n0r", "3v1"): times and units ("3pm", "10km") are not."""
_LEET_ALPHABET = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ013457$")
_PUNCTUATION = "\"'()[],.;:!?"
_LEET_WORD = re.compile(
    r"(?<![A-Za-z0-9$])[A-Za-z0-9$]*(?:[A-Za-z][0-9$]|[0-9$][A-Za-z])[A-Za-z0-9$]*"
)
"""(Both word patterns start only at a word's start: a long token costs linear time.)"""
_LEET_TABLE = str.maketrans("013457$", "oieasts")

_MARKUP = re.compile(r"[*_~`](?<![\w*~`].)[*_~`]*[^\W_]")
"""Markdown emphasis or code opened before a word (``**ignore**``, ``_all_``, ```x```)."""
_MARKUP_TABLE = str.maketrans("*_~`", "    ")


def _has_leet(text: str) -> bool:
    """Whether a word-sized token hides letters as digits ("y0u", "pr3v10u5").

    Keys and hashes have digits between letters too, but in longer tokens, with other digits
    and symbols: each token the hint lands in is looked at once, then the search moves on.
    """
    at = 0
    while (hint := _LEET_HINT.search(text, at)) is not None:
        start = max(text.rfind(" ", 0, hint.start()), text.rfind("\n", 0, hint.start())) + 1
        end = len(text)
        for stop in (" ", "\n"):
            found = text.find(stop, hint.end())
            if found >= 0:
                end = min(end, found)
        token = text[start:end].strip(_PUNCTUATION)
        if 3 <= len(token) <= 16 and _LEET_ALPHABET.issuperset(token):
            return True
        at = end
    return False


def _drop(text: str, spans: list[tuple[int, int]]) -> tuple[str, list[int]]:
    """``text`` without the (sorted, disjoint) spans, and where each kept character was."""
    pieces: list[str] = []
    offsets: list[int] = []
    at = 0
    for start, end in spans:
        pieces.append(text[at:start])
        offsets.extend(range(at, start))
        at = end
    pieces.append(text[at:])
    offsets.extend(range(at, len(text)))
    return "".join(pieces), offsets


def _collapse(text: str, wide: bool) -> tuple[str, list[int]] | None:
    """Remove invisible characters, then the separators of spaced-out letters."""
    offsets: list[int] | None = None
    if wide and _INVISIBLE.search(text) is not None:
        text, offsets = _drop(text, [match.span() for match in _INVISIBLE.finditer(text)])
    if _SPACED_HINT.search(text) is not None:
        spans = [
            (run.start() + a, run.start() + b)
            for run in _SPACED.finditer(text)
            for a, b in map(re.Match.span, _SEPARATOR.finditer(run[0]))
        ]
        text, inner = _drop(text, spans)
        offsets = inner if offsets is None else [offsets[i] for i in inner]
    return None if offsets is None else (text, offsets)


def unmask(text: str) -> tuple[str, Sequence[int] | None] | None:
    """The text with its obfuscation undone, or ``None`` when it shows none.

    Args:
        text: Any text.

    Returns:
        ``(view, offsets)``: ``offsets[i]`` is the index in ``text`` of the view's character
        ``i`` (``None`` when the view has the text's length, character for character), or
        ``None`` when the view would equal the text.
    """
    offsets: Sequence[int] | None = None
    view = text
    wide = not text.isascii()
    collapsed = _collapse(text, wide)
    if collapsed is not None:
        view, offsets = collapsed
    if wide:
        if _WIDE.search(view) is not None:
            view = view.translate(_WIDE_TABLE)
        if _MIXED.search(view) is not None:
            view = _MIXED_WORD.sub(lambda match: match[0].translate(_CONFUSABLES), view)
    if _has_leet(view):
        view = _LEET_WORD.sub(lambda match: match[0].translate(_LEET_TABLE), view)
    if _MARKUP.search(view) is not None:
        view = view.translate(_MARKUP_TABLE)
    if offsets is None and view == text:
        return None
    return view, offsets
