"""The rerank stage: a :class:`Reranker` re-orders the top-n fused hits of a search.

The engine fetches ``n`` candidates (``SearchSettings.candidates``: ``max(3 × limit, 30)``
unless configured), fuses them, drops those under ``min_score``, then hands them to the
reranker and keeps the first ``limit`` it returns. A reranker only re-orders (and may re-score)
what the engine gave it — filters, validity and access control were applied before — so it can
never bring back a record the store did not return (:func:`rerank_hits` checks).

Both built-in rerankers compare texts with the search's own :class:`Embedder`, embedding the
query and the candidates at query time (what is embedded for a record is
:func:`~workers.memory.retrieval.vectors.vector_text`); that embedding is their whole cost, one
batch per search. The *relevance* they start from is each hit's fused score divided by the best
one, in [0, 1], so they read every fusion alike (confidence scores are already calibrated in
[0, 1]; RRF and weighted scores are not, and only their ratios mean something).

* :class:`MMRReranker` — maximal marginal relevance: picks, one at a time, the candidate with
  the best ``λ · relevance − (1 − λ) · max cosine to those already picked``. ``λ = 1`` keeps the
  fused order; lower values push near-duplicates of better hits down. Scores stay the fused ones.
* :class:`EmbeddingReranker` — re-scores each candidate by the cosine between the query and the
  candidate's best *chunk* (:func:`~workers.memory.retrieval.chunking.chunks`: the embedder's
  window, else ``_CHUNK_WORDS`` words, at most ``_MAX_CHUNKS``), so a long record whose
  relevant passage lies past the embedder's window (MiniLM reads 256 word pieces) is seen whole:
  ``score = (1 − w) · relevance + w · clip(cosine, 0, 1)`` with ``w = rerank_weight`` (the cosine
  measured from the embedder's ``cosine_floor``, as the hybrid fusion does). Both
  terms are in [0, 1], so the score is too.

A cross-encoder belongs behind the same port (its ``rerank`` scores ``(query, text)`` pairs);
none ships its weights in a package today, and nothing here downloads weights at run time, so
an engine takes one through ``SearchEngine(rerankers={"cross-encoder": factory})``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import msgspec
import numpy as np

from ditto.errors import ErrorCode
from workers.memory.model.contracts import SearchHit
from workers.memory.model.errors import MemoryStoreError
from workers.memory.retrieval.chunking import chunks, window_of
from workers.memory.retrieval.embeddings.base import (
    Embedder,
    Matrix,
    cosine_floor_of,
    embed_texts,
    embeds_queries_apart,
)
from workers.memory.retrieval.vectors import vector_text

if TYPE_CHECKING:
    from ditto.runtime.context import NodeContext
    from workers.memory.retrieval.search_settings import SearchSettings

__all__ = (
    "EmbeddingReranker",
    "MMRReranker",
    "Reranker",
    "RerankerFactory",
    "builtin_rerankers",
    "rerank_hits",
)

_CHUNK_WORDS = 128
"""Words per chunk for an embedder that declares no window: about 170 word pieces of English."""
_MAX_CHUNKS = 8
"""Chunks embedded per candidate: bounds a search's cost on very long records (the first
``96 × 7 + 128`` words are seen at 128-word windows)."""


@runtime_checkable
class Reranker(Protocol):
    """Re-orders the fused candidates of one search.

    ``name`` is what ``options.rerank`` and ``workers.memory.search.rerank`` call it; ``cost``
    says in a line what a call costs (what it computes per candidate), for people choosing one.
    """

    name: str
    cost: str

    async def rerank(
        self,
        query: str,
        hits: Sequence[SearchHit],
        limit: int,
        ctx: NodeContext | None = None,
    ) -> list[SearchHit]:
        """The best ``limit`` of ``hits`` in a new order.

        Args:
            query: The search's text.
            hits: The fused candidates, best first (at least one).
            limit: Most hits to return.
            ctx: The node context (unused by the built-in rerankers).

        Returns:
            Hits taken from ``hits`` (never another record), each at most once; a hit's
            ``score`` may change, and a hit that carries an ``explain`` dict gets the
            reranker's own fields added to it.

        Raises:
            MemoryStoreError: ``EMBEDDING_FAILED`` (or the embedder's own coded error).
        """
        ...


RerankerFactory = Callable[["SearchSettings"], Reranker]
"""Builds a search's reranker from its settings (with the request's options applied)."""


def builtin_rerankers(embedder: Embedder) -> dict[str, RerankerFactory]:
    """The rerankers every engine with an embedder offers, by name."""
    return {
        "mmr": lambda settings: MMRReranker(embedder, settings.mmr_lambda),
        "embedding": lambda settings: EmbeddingReranker(embedder, settings.rerank_weight),
    }


class MMRReranker:
    """Maximal marginal relevance over the candidates' query-time embeddings (see the module)."""

    name = "mmr"
    cost = "embeds the query and every candidate (one batch) per search"

    def __init__(self, embedder: Embedder, mmr_lambda: float = 0.7) -> None:
        self._embedder = embedder
        self._lambda = mmr_lambda

    async def rerank(
        self, query: str, hits: Sequence[SearchHit], limit: int, ctx: NodeContext | None = None
    ) -> list[SearchHit]:
        vectors = await embed_texts(self._embedder, [vector_text(hit.memory) for hit in hits])
        similar = vectors @ vectors.T
        relevance = _relevance(hits)
        chosen: list[int] = []
        redundancy = np.zeros(len(hits), dtype=np.float32)
        left = list(range(len(hits)))
        picked: list[SearchHit] = []
        while left and len(chosen) < limit:
            # ties keep the fused order: max() returns the first best
            best = max(
                left,
                key=lambda i: self._lambda * relevance[i] - (1 - self._lambda) * redundancy[i],
            )
            mmr = self._lambda * relevance[best] - (1 - self._lambda) * float(redundancy[best])
            picked.append(
                _noted(
                    hits[best],
                    None,
                    {
                        "mmr_lambda": self._lambda,
                        "mmr_score": float(mmr),
                        "mmr_redundancy": float(redundancy[best]),
                    },
                )
            )
            chosen.append(best)
            left.remove(best)
            redundancy = np.maximum(redundancy, similar[best])
        return picked


class EmbeddingReranker:
    """Fused relevance mixed with the query's cosine to each candidate's best chunk (see the
    module)."""

    name = "embedding"
    cost = (
        f"embeds the query and every candidate in chunks of {_CHUNK_WORDS} words "
        f"(at most {_MAX_CHUNKS} each, one batch) per search"
    )

    def __init__(self, embedder: Embedder, weight: float = 0.5) -> None:
        self._embedder = embedder
        self._weight = weight
        self._window = window_of(embedder) or _CHUNK_WORDS
        self._floor = cosine_floor_of(embedder)

    async def rerank(
        self, query: str, hits: Sequence[SearchHit], limit: int, ctx: NodeContext | None = None
    ) -> list[SearchHit]:
        pieces = [chunks(vector_text(hit.memory), self._window, _MAX_CHUNKS) for hit in hits]
        passages = [piece for candidate in pieces for piece in candidate]
        if embeds_queries_apart(self._embedder):  # a query: prefix of its own (e5)
            asked = await embed_texts(self._embedder, [query], queries=True)
            cosines = await embed_texts(self._embedder, passages) @ asked[0]
        else:  # one batch for the query and the passages
            vectors = await embed_texts(self._embedder, [query, *passages])
            cosines = vectors[1:] @ vectors[0]
        best = _best_per_candidate(cosines, [len(candidate) for candidate in pieces])
        relevance = _relevance(hits)
        scored = []
        for position, hit in enumerate(hits):
            cosine = min(max((best[position] - self._floor) / (1.0 - self._floor), 0.0), 1.0)
            score = (1 - self._weight) * relevance[position] + self._weight * cosine
            detail = {
                "embedding_cosine": best[position],
                "embedding_chunks": len(pieces[position]),
                "rerank_weight": self._weight,
                "fused_relevance": relevance[position],
            }
            scored.append((score, position, _noted(hit, score, detail)))
        scored.sort(key=lambda entry: (-entry[0], entry[1]))
        return [hit for _, _, hit in scored[:limit]]


async def rerank_hits(
    reranker: Reranker,
    query: str,
    hits: list[SearchHit],
    limit: int,
    ctx: NodeContext | None,
    explain: bool,
) -> list[SearchHit]:
    """Run ``reranker`` over ``hits`` and keep ``limit``; with ``explain`` each hit also says
    ``reranker``, ``rank_before`` (its fused rank) and ``rank_after``.

    Raises:
        MemoryStoreError: ``INTERNAL_ERROR`` when the reranker returned a record it was not
            given, or one twice (a reranker never invents records).
    """
    if not hits:
        return hits
    before = {hit.memory.id: rank for rank, hit in enumerate(hits, start=1)}
    reranked = (await reranker.rerank(query, hits, limit, ctx))[:limit]
    ids = [hit.memory.id for hit in reranked]
    if not before.keys() >= set(ids) or len(set(ids)) != len(ids):
        raise MemoryStoreError(
            f"the reranker {reranker.name!r} returned records it was not given",
            code=ErrorCode.INTERNAL_ERROR,
        )
    if not explain:
        return reranked
    return [
        _noted(
            hit,
            None,
            {"reranker": reranker.name, "rank_before": before[hit.memory.id], "rank_after": rank},
        )
        for rank, hit in enumerate(reranked, start=1)
    ]


def _relevance(hits: Sequence[SearchHit]) -> list[float]:
    """Each hit's fused score over the best one, in [0, 1] (all 0 when none scores above 0)."""
    scores = [max(hit.score or 0.0, 0.0) for hit in hits]
    top = max(scores, default=0.0)
    return [score / top if top > 0 else 0.0 for score in scores]


def _best_per_candidate(cosines: Matrix, counts: list[int]) -> list[float]:
    best, start = [], 0
    for count in counts:
        best.append(float(cosines[start : start + count].max()))
        start += count
    return best


def _noted(hit: SearchHit, score: float | None, detail: dict[str, Any]) -> SearchHit:
    """``hit`` with a new score (``None`` keeps it) and ``detail`` added to its explain dict
    (only when it has one: explain is off otherwise)."""
    changes: dict[str, Any] = {}
    if score is not None:
        changes["score"] = float(score)
    if hit.explain is not None:
        changes["explain"] = {**hit.explain, **detail}
    return msgspec.structs.replace(hit, **changes) if changes else hit
