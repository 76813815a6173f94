"""What every store's keyword search accepts, and the explanations it attaches to hits."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Collection, Sequence, Set

import msgspec

from workers.memory.model.contracts import SearchHit, SearchInput
from workers.memory.model.errors import MemoryStoreError
from workers.memory.retrieval.text import native_query_words, query_words

__all__ = ("bm25", "calibrated", "explained", "idf", "keyword_request")

_OPTIONS = frozenset({"explain"})


def keyword_request(
    input: SearchInput, store: str, *, native: bool = False
) -> tuple[list[str], bool]:
    """The query's words and whether to explain the hits (``native``: spelt as written, for a
    store whose search engine folds them itself: :func:`~.text.native_query_words`).

    Raises:
        MemoryStoreError: ``INVALID_INPUT`` for another strategy, an unknown option or a query
            that is not text.
    """
    if input.strategy not in (None, "keyword"):
        raise MemoryStoreError(f"{store} does not support strategy {input.strategy!r}")
    unknown = sorted(input.options.keys() - _OPTIONS)
    if unknown:
        raise MemoryStoreError(f"keyword search has no option {unknown[0]!r} (it takes: explain)")
    explain = input.options.get("explain", False)
    if not isinstance(explain, bool):
        raise MemoryStoreError("options.explain must be true or false")
    if not isinstance(input.query, str):
        raise MemoryStoreError("keyword search needs a text query")
    words = native_query_words(input.query) if native else query_words(input.query)
    return words, explain


def explained(hits: Sequence[SearchHit], explain: bool) -> list[SearchHit]:
    """``hits`` with, when asked, how each ranked: the strategy, its rank and its BM25 score."""
    if not explain:
        return list(hits)
    return [
        msgspec.structs.replace(
            hit, explain={"strategy": "keyword", "keyword_rank": rank, "keyword_score": hit.score}
        )
        for rank, hit in enumerate(hits, start=1)
    ]


_K1 = 1.2
_B = 0.75


def idf(documents: int, containing: int) -> float:
    """BM25's inverse document frequency as FTS5 computes it: ``log((N - n + 0.5) / (n + 0.5))``
    for ``n`` of ``N`` documents containing the term, floored just above 0.

    Total: defined for every ``N >= 0`` and ``n >= 0``. A count read after ``N`` (or estimated
    apart from it) may exceed it; ``n`` is then taken as ``N``, a term in every document,
    which the floor weighs as FTS5 weighs one (the stores keep their counts within ``N``
    themselves; this is the last guard against a logarithm of a negative number)."""
    documents = max(documents, 0)
    containing = min(max(containing, 0), documents)
    return max(math.log((documents - containing + 0.5) / (containing + 0.5)), 1e-6)


def calibrated(score: float, ideal: float) -> float:
    """A BM25 score on the scale every keyword search reports: ``1 - exp(-bm25 / ideal)``, in
    [0, 1].

    ``ideal`` is the sum of the query words' IDFs: the BM25 score of a record of average
    length that holds each query word once. Such a record scores 0.63; one holding only the
    words that carry half the query's IDF, about 0.39; a record matching nothing, 0. The same
    thresholds (``min_score``) therefore mean the same on every store and corpus size, and
    beside the vector leg's cosine similarity."""
    # Written so that NaN (and an infinite ideal) score 0 instead of leaving [0, 1].
    if not (score > 0 and 0 < ideal < math.inf):
        return 0.0
    return 1.0 - math.exp(-score / ideal)


def bm25(
    terms: Set[str], documents: Sequence[Counter[str]], corpus: Collection[Counter[str]]
) -> list[float]:
    """Okapi BM25 (k1 = 1.2, b = 0.75, IDF floored just above 0, as FTS5 does) of each of
    ``documents`` for ``terms``, with term counts per document and statistics over ``corpus``
    (every document of the index, ``documents`` among them), :func:`calibrated`."""
    total = len(corpus)
    average = sum(counts.total() for counts in corpus) / max(total, 1)
    frequency = {term: sum(1 for counts in corpus if term in counts) for term in terms}
    weights = {term: idf(total, frequency[term]) for term in terms}
    ideal = sum(weights.values())
    scores = []
    for counts in documents:
        length = counts.total()
        score = 0.0
        for term in terms & counts.keys():
            tf = counts[term]
            score += weights[term] * tf * (_K1 + 1) / (tf + _K1 * (1 - _B + _B * length / average))
        scores.append(calibrated(score, ideal))
    return scores
