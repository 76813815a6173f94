"""Text normalisation shared by the write policy's dedupe and contradiction stages.

Two levels, both deterministic and dependency-free:

- :func:`tokens` / :func:`normalise`: Unicode NFKC, casefold, punctuation that does not change a
  fact dropped. Numbers keep their inner punctuation (``3.5``, ``10:30``, ``2024-03-05``) and
  ``%``/currency signs stay tokens, because they do change a fact. This is what the exact hash
  is taken over.
- :func:`terms`: each token reduced to a *canonical term* (UK/US spelling, a light suffix stem,
  number words as digits, a small general synonym lexicon), with fillers that never change a
  fact ("really", "the", "currently") left out. Two texts with the same multiset of terms state
  the same words; dedupe and contradiction both compare terms, not raw tokens.

The lexicons are small and general English (see ``bench/write_policy_pairs.py`` for how they
relate to the benchmark). A wrong merge there turns a contradiction into a duplicate, so they
stay short.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from enum import Enum
from functools import lru_cache
from itertools import compress, pairwise
from types import MappingProxyType

__all__ = (
    "TermKind",
    "kind",
    "normalise",
    "shingles",
    "term",
    "terms",
    "terms_and_words",
    "tokens",
    "tokens_and_terms",
)

# Apostrophes and dashes NFKC leaves alone; mapping them first makes "don’t" == "don't".
_QUOTES = str.maketrans({"’": "'", "‘": "'", "ʼ": "'", "–": "-", "—": "-"})
# A word or number with inner ' . , : / - kept ("don't", "3.5", "1,200", "10:30", "2024-03-05"):
# a trailing full stop or comma is not inner, so sentence punctuation falls away.
_TOKEN = re.compile(r"\w+(?:['.,:/-]\w+)*|[%$€£¥]")
_HAN = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
_KANA = "\u3040-\u30ff"
_CJK = re.compile(f"[{_HAN}{_KANA}]")
_CJK_WORD = f"[^\\W{_HAN}{_KANA}]+"
_CJK_TOKEN = re.compile(
    f"[{_HAN}]|[\u3040-\u309f]+|[\u30a0-\u30ff]+|{_CJK_WORD}(?:['.,:/-]{_CJK_WORD})*|[%$€£¥]"
)
"""Chinese and Japanese are written without spaces: in a text holding them, each Han character
is a token of its own (so "我喜欢咖啡" and "我不喜欢咖啡" align character by character), a
run of hiragana or of katakana is one, and other words are tokenised as everywhere else."""
_THOUSANDS = re.compile(r"^\d{1,3}(?:,\d{3})+(?:\.\d+)?$")


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


_FILLERS = _words(
    "a an the really actually currently now just also very quite indeed definitely basically "
    "truly certainly honestly still so please um uh well totally absolutely simply"
)
"""Words whose presence never changes the fact a memory states."""

_FUNCTION = _words(
    "my your his her our their its this that these those i you he she we they it me him us them "
    "is am are was were be been being has have had do does did will would shall should can could "
    "may might must of in on at to for from with by as about into over under and or but"
)
"""Words that carry no subject of their own: an aligned run of only these does not anchor one."""

_NEGATIONS = _words(
    "not no never none nobody nothing neither nor cannot without stopped quit longer anymore "
    "nowhere "
    # German, Dutch, French, Spanish, Portuguese, Italian, Russian (memory is written in many
    # languages; words of two meanings, French "plus" and Italian "mai", are left out)
    "nicht kein keine keinen keinem keiner nie niemals nichts niet geen nooit pas jamais rien "
    "aucun aucune nunca nada ningún ninguna não nem nenhum nenhuma non nessuno nessuna "
    "не нет никогда ничего ни "
    # Chinese (a token per character: 不 "not", 没 "have not", 未 "not yet") and Korean's
    # adverbs 안 and 못 (its negated verbs are in kind())
    "不 没 未 안 못"
)
_KOREAN_NEGATED = ("않", "없")
"""Korean verbs of negation, whatever their ending: 않다 "not" (좋아하지 않습니다), 없다
"there is no"."""
_PREFER = _words("like love enjoy prefer adore want favor")
_AVOID = _words("dislike hate avoid detest loathe despise")

_NUMBER_NAMES = (
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen "
    "fifteen sixteen seventeen eighteen nineteen twenty"
)
_NUMBER_WORDS = MappingProxyType(
    {word: str(value) for value, word in enumerate(_NUMBER_NAMES.split())}
)
_MONTHS = _words(
    "january february march april may june july august september october november december "
    "jan feb mar apr jun jul aug sep sept oct nov dec"
)
_DAYS = _words(
    "monday tuesday wednesday thursday friday saturday sunday mon tue tues wed thu thur thurs "
    "fri sat sun today tomorrow yesterday tonight weekend"
)
_DATE = re.compile(
    r"^(?:\d{4}-\d{1,2}(?:-\d{1,2})?|\d{1,2}[./]\d{1,2}[./]\d{2,4}|\d{1,2}:\d{2}(?:am|pm)?"
    r"|\d{1,2}(?:am|pm)|(?:1[89]|20)\d{2}s?|\d{1,2}(?:st|nd|rd|th))$"
)
_NUMBER = re.compile(r"^[+-]?\d+(?:[.,]\d+)*[^\W\d_]*$")

# Groups of words that state the same thing in a memory; the first is the canonical term.
# General-purpose equivalences, kept short on purpose: a wrong merge turns a contradiction into
# a duplicate, which costs more than a missed paraphrase.
_SYNONYM_GROUPS = (
    "live reside dwell",
    "work employ",
    "job occupation profession",
    "like enjoy",
    "love adore",
    "begin start",
    "finish end complete",
    "buy purchase",
    "big large",
    "small little tiny",
    "car automobile",
    "phone telephone cellphone mobile",
    "email e-mail",
    "favorite favourite fave",
    "color colour",
    "kid child children",
    "mom mother mum",
    "dad father",
    "doctor physician",
    "home house",
    "movie film",
    "usual typical",
    "often frequently",
    "quick fast rapid",
    "help assist",
    "need require",
    "use utilize utilise",
    "talk speak",
    "go travel",
    "get receive",
    "reply respond answer",
)
_SYNONYMS = MappingProxyType(
    {word: group.split()[0] for group in _SYNONYM_GROUPS for word in group.split()}
)


class TermKind(Enum):
    """What a canonical term is, for explaining a difference between two texts."""

    WORD = "word"
    NUMBER = "number"
    DATE = "date"
    NEGATION = "negation"
    PREFER = "prefer"
    AVOID = "avoid"
    FUNCTION = "function"


def tokens(text: str) -> tuple[str, ...]:
    """The normalised tokens of ``text``: NFKC, casefolded, meaning-neutral punctuation dropped.

    Args:
        text: Any text.

    Returns:
        The tokens in order; numbers keep inner punctuation, thousands separators removed.
    """
    return _analysed(text)[0] if len(text) <= _CACHED else _tokens(text)


def _tokens(text: str) -> tuple[str, ...]:
    if text.isascii():
        # Most memory texts are ASCII, where NFKC changes nothing, _QUOTES maps nothing (its
        # marks are all non-ASCII) and casefold() is lower(): half the cost of tokenising.
        folded = text.lower()
    else:
        folded = unicodedata.normalize("NFKC", text).translate(_QUOTES).casefold()
        if _CJK.search(folded) is not None:
            return tuple(_CJK_TOKEN.findall(folded))
    found = _TOKEN.findall(folded)
    if "," not in folded:  # no token can hold a thousands separator
        return tuple(found)
    return tuple(
        token.replace(",", "") if "," in token and _THOUSANDS.match(token) else token
        for token in found
    )


_CACHED = 500
"""Texts up to this long keep their analysis (tokens, terms, words) in a cache of 8192: about
5 KB each at this length (45 MB at most, a few MB for memory-sized texts)."""


@lru_cache(maxsize=8192)
def _analysed(text: str) -> tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]:
    """Tokens, terms and the token of each term, of a short text, cached: a write compares
    each incoming text with several stored ones (dedupe, contradiction), and a stored text
    is compared with many incoming ones, so the same texts are analysed again and again."""
    return _analyse(text)


def _analyse(text: str) -> tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]:
    normal = _tokens(text)
    found = tuple(map(term, normal))
    if "" not in found:  # no filler: every token has its term
        return normal, found, normal
    return normal, tuple(filter(None, found)), tuple(compress(normal, found))


def tokens_and_terms(text: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """:func:`tokens` and :func:`terms` of ``text``, tokenising it once.

    Args:
        text: Any text.

    Returns:
        ``(tokens, terms)``.
    """
    analysed = _analysed(text) if len(text) <= _CACHED else _analyse(text)
    return analysed[0], analysed[1]


def normalise(text: str) -> str:
    """The normalised form of ``text``: its tokens joined by single spaces.

    Two texts that differ only in case, Unicode form, whitespace or punctuation that does not
    change a fact normalise to the same string.

    Args:
        text: Any text.

    Returns:
        The normalised text.
    """
    return " ".join(tokens(text))


_IS_ENDINGS = ("ising", "ised", "isation", "isations")
"""UK endings of -ise verbs that have lost the "e" the ``ise`` -> ``ize`` fold looks for."""


def _spelling(word: str) -> str:
    """One spelling for UK/US variants (colour/color, organise/organize, centre/center)."""
    if len(word) > 4:
        word = word.replace("our", "or").replace("ise", "ize").replace("yse", "yze")
        for ending in _IS_ENDINGS:  # organising, organised, organisation: the "e" is gone
            if word.endswith(ending):
                word = word[: -len(ending)] + "iz" + ending[2:]
                break
        word = word.replace("ll", "l")
        if word.endswith("tre"):
            word = word[:-3] + "ter"
    return word


def _stem(word: str) -> str:
    """A light suffix stem, enough for lives/lived/living and city/cities to meet."""
    if len(word) <= 3 or not word.isalpha():
        return word
    for suffix, replacement in _SUFFIXES:
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            word = word[: -len(suffix)] + replacement
            break
    # like/likes/liked/liking all end as "lik": the e an ending swallows is dropped everywhere
    return word[:-1] if word.endswith("e") and len(word) > 3 else word


_SUFFIXES = (
    ("ies", "y"),
    ("ied", "y"),
    ("ing", ""),
    ("sses", "ss"),
    ("ches", "ch"),
    ("shes", "sh"),
    ("xes", "x"),
    ("ed", ""),
    ("ss", "ss"),
    ("s", ""),
)
_KEPT = _FUNCTION | _NEGATIONS | _MONTHS | _DAYS
"""Tokens that are their own term: stemming "does" or "june" would only blur them."""
# The preference verbs as term() leaves them: spelling folding runs before stemming there, so
# it must here too ("despises" -> "despizes" -> "despiz").
_PREFER_TERMS = frozenset(_stem(_spelling(w)) for w in _PREFER) | _PREFER
_AVOID_TERMS = frozenset(_stem(_spelling(w)) for w in _AVOID) | _AVOID


@lru_cache(maxsize=16384)
def term(token: str) -> str:
    """The canonical term of one normalised token; ``""`` for a filler.

    Args:
        token: One token from :func:`tokens`.

    Returns:
        The canonical term (synonyms, spelling and inflection folded), or ``""``.
    """
    if token in _FILLERS:
        return ""
    if token.endswith("n't"):
        return "not"
    if token in _KEPT:
        return token
    if token in _NUMBER_WORDS:
        return _NUMBER_WORDS[token]
    if token in _SYNONYMS:
        return _SYNONYMS[token]
    word = _spelling(token)
    word = _SYNONYMS.get(word, word)
    stem = _stem(word)
    # A stem may land on a synonym's stem ("resides" -> "resid"): fold the stem's word too.
    for candidate in (stem, stem + "e"):
        if candidate in _SYNONYMS:
            return _SYNONYMS[candidate]
    if stem in _KEPT:
        # A content word whose stem is spelled like a kept word ("note", "notes" -> "not";
        # "wills" -> "will") must not turn into that negation or function word: marked, it
        # stays a word of its own, still shared by its inflections.
        return "~" + stem
    return stem


def terms_and_words(text: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The terms of ``text`` and, position by position, the normalised token each came from.

    Args:
        text: Any text.

    Returns:
        ``(terms, words)`` of equal length; ``words`` is what an explanation shows a person.
    """
    analysed = _analysed(text) if len(text) <= _CACHED else _analyse(text)
    return analysed[1], analysed[2]


def terms(text: str) -> tuple[str, ...]:
    """The canonical terms of ``text`` in order, fillers left out.

    Args:
        text: Any text.

    Returns:
        The terms (see :func:`term`).
    """
    if len(text) <= _CACHED:
        return _analysed(text)[1]
    return tuple(filter(None, map(term, _tokens(text))))


@lru_cache(maxsize=16384)
def kind(found: str) -> TermKind:
    """What a canonical term is: a date, a number, a negation, a preference verb or a word.

    Args:
        found: A term from :func:`terms`.

    Returns:
        Its kind.
    """
    if found in _NEGATIONS or found.startswith(_KOREAN_NEGATED):
        return TermKind.NEGATION
    if found in _MONTHS or found in _DAYS or _DATE.match(found):
        return TermKind.DATE
    if _NUMBER.match(found):
        return TermKind.NUMBER
    if found in _PREFER_TERMS:
        return TermKind.PREFER
    if found in _AVOID_TERMS:
        return TermKind.AVOID
    if found in _FUNCTION:
        return TermKind.FUNCTION
    return TermKind.WORD


def shingles(found: Sequence[str]) -> frozenset[str]:
    """Word shingles of a term sequence: every term and every adjacent pair.

    Unigrams make one changed word in a short sentence cost little; pairs keep word order, so
    "Bob owes Alice" and "Alice owes Bob" are far apart.

    Args:
        found: Terms from :func:`terms`.

    Returns:
        The shingle set (pairs joined by a space, which no term contains).
    """
    return frozenset((*found, *(f"{a} {b}" for a, b in pairwise(found))))
