"""Turning text into search terms, shared by the stores' keyword search.

Words are what FTS5's ``unicode61`` tokenizer sees (letters and digits, case and diacritics
folded); stop words are dropped from queries because they match most documents, cost the most
and carry almost no ranking signal.
"""

from __future__ import annotations

import re
import unicodedata

__all__ = ("STOPWORDS", "fts_phrase", "light_stem", "native_query_words", "query_words", "words")

_WORD = re.compile(r"[^\W_]+")

STOPWORDS = frozenset(
    """
    a about above after again against all am an and any are as at be because been before being
    below between both but by can could did do does doing down during each few for from further
    had has have having he her here hers herself him himself his how i if in into is it its itself
    just me more most my myself no nor not now of off on once only or other our ours ourselves out
    over own same she should so some such than that the their theirs them themselves then there
    these they this those through to too under until up very was we were what when where which
    while who whom why will with would you your yours yourself yourselves
    """.split()  # noqa: SIM905 - a word list reads better as text
)


def words(text: str) -> list[str]:
    """Lower-cased words of ``text`` with diacritics removed."""
    folded = unicodedata.normalize("NFKD", text.casefold())
    stripped = "".join(char for char in folded if not unicodedata.combining(char))
    return _WORD.findall(stripped)


def query_words(text: str) -> list[str]:
    """Distinct words of a query, stop words dropped. A query of stop words only ("what is
    it?") has no words: it matches nothing, rather than whatever records hold "is"."""
    return [word for word in dict.fromkeys(words(text)) if word not in STOPWORDS]


def native_query_words(text: str) -> list[str]:
    """Distinct words of a query for a store whose search engine folds words itself (FTS5's
    ``unicode61``, PostgreSQL's parser): split as :func:`words` splits them, but spelt as
    written, so the engine folds each exactly as it folded the records. Folded here first,
    "Straße" would become "strasse" and "München" "munchen", neither of which PostgreSQL's
    index holds ("münchen"), nor FTS5's for "straße", "ελλάδα" or "ёлка" (it strips Latin
    diacritics only). Stop words are dropped, and words that fold alike are one word."""
    found: dict[tuple[str, ...], str] = {}
    for word in _WORD.findall(unicodedata.normalize("NFC", text)):
        folded = tuple(words(word))
        if folded and not all(part in STOPWORDS for part in folded):
            found.setdefault(folded, word)
    return list(found.values())


def light_stem(word: str) -> str:
    """A small English suffix stripper for the in-process store (plural and verb endings), so
    "records" finds "record" as FTS5's porter stemmer would."""
    for suffix in ("ing", "ed", "es", "s"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3 and not word.endswith("ss"):
            word = word[: -len(suffix)]
            break
    return word[:-1] if word.endswith("e") and len(word) > 3 else word


def fts_phrase(word: str) -> str:
    """``word`` as an FTS5 string: quoted, so FTS5 operators in user text are never interpreted."""
    return '"' + word.replace('"', '""') + '"'
