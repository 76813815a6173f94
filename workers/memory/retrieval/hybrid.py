"""MEMORY.SEARCH strategies: ``keyword``, ``vector``, ``hybrid``, ``auto`` and
``recent-keyword``, over any store.

* ``keyword`` — the store's BM25 search; scores on the calibrated scale, in [0, 1]
  (``search.keyword.calibrated``).
* ``vector`` — cosine similarity between the query's embedding and the records' (the store's
  exact index), filters applied before the limit.
* ``hybrid`` — both legs, each over-fetching ``max(overfetch × limit, 20)`` candidates, fused:

  - ``confidence`` (the default): a weighted mean of the legs' calibrated scores (cosine
    measured from the embedder's ``cosine_floor`` — the cosine of an unrelated text, 0 unless
    it declares one; the leg's lowest candidate's if that is lower — and clipped to [0, 1];
    the keyword score as the store reports it), where each leg's weight is its *confidence*
    for this query: how sharply its best candidate stands out from its 10th,
    ``((s₁ - s₁₀) / s₁)²`` (its last, with fewer). A leg whose scores are flat — a weak
    embedder on this query, or a keyword leg matching one common word everywhere — counts
    little; a leg that singles records out counts much, so the fusion follows the leg that
    knows, query by query, and a record both legs rank well rises above either. Leg weights
    (default 1 / 1) multiply the confidences. ``score = Σ cᵢ·sᵢ / Σ cᵢ`` is in [0, 1] like the
    legs' scores, so one ``min_score`` means the same with or without an embedder.
  - ``rrf``: ``score = Σ wᵢ / (k + rankᵢ)`` over the legs a record appears in, ``k = 60``,
    weights 0.5 / 0.5 (PAR's and Letta's formula).
  - ``weighted``: each leg's scores min-max normalised over its candidates,
    ``score = vector_weight · v + keyword_weight · k`` (PRX's linear fusion; 0.7 / 0.3).

  On the evaluation harness (``bench/retrieval_eval.py``) ``confidence`` scores at least the
  better leg on every dataset, where ``rrf`` and ``weighted`` fall below it on some.
* ``auto`` (the default) — ``hybrid`` when an embedder is configured, else ``keyword``.
* ``recent-keyword`` — keyword candidates re-ranked by ``metadata["saved_at"]`` (or the
  handbook's ``savedAt``).

Options: ``explain`` (each hit carries its per-leg rank and score, each leg's weight and
contribution and the fused score — the contributions add up to it), ``min_score`` (drop hits
scoring less), ``fusion``, ``rrf_k``, ``vector_weight``, ``keyword_weight``; defaults come from
``ditto.yaml`` (:class:`SearchSettings`) and a request may override them.

Rerank (``options.rerank``: ``off``, ``mmr``, ``embedding``; ``rerank_candidates``,
``mmr_lambda``, ``rerank_weight``): the keyword, vector and hybrid strategies fetch
``rerank_candidates`` hits instead of ``limit``, and a :class:`~.rerank.Reranker` re-orders
them and keeps ``limit`` (:mod:`workers.memory.retrieval.rerank`); it needs an embedder.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Mapping
from dataclasses import dataclass
from time import monotonic
from typing import Any, TypeVar

import msgspec

from ditto.runtime.context import NodeContext
from workers.memory.model.contracts import MemoryItem, SearchHit, SearchInput, SearchOutput
from workers.memory.model.errors import MemoryStoreError, SearchUnavailableError
from workers.memory.ports import KeywordSearch, MemoryStore, VectorStore
from workers.memory.retrieval.embeddings.base import (
    Embedder,
    cosine_floor_of,
    embed_texts,
    model_of,
)
from workers.memory.retrieval.recency import STRATEGY as RECENT_KEYWORD
from workers.memory.retrieval.recency import recency_search
from workers.memory.retrieval.rerank import (
    Reranker,
    RerankerFactory,
    builtin_rerankers,
    rerank_hits,
)
from workers.memory.retrieval.search_settings import SearchSettings, with_options

__all__ = ("STRATEGIES", "SearchEngine", "SearchSettings")

STRATEGIES = ("auto", "keyword", "vector", "hybrid", RECENT_KEYWORD)
_CONFIDENCE_DEPTH = 10
"""A leg's confidence compares its best candidate with its 10th."""
_MIN_CANDIDATES = 20
"""Each hybrid leg fetches at least this many candidates (the confidence needs a 10th)."""
A = TypeVar("A")
B = TypeVar("B")
_MISSING_TTL = 5.0


@dataclass(frozen=True, slots=True)
class _Leg:
    name: str
    ranked: list[tuple[MemoryItem, float]]
    floor: float = 0.0
    """The score of an unrelated record, which the confidence fusion measures scores from: for
    the vector leg the embedder's ``cosine_floor``, or its lowest candidate's cosine if lower."""


class SearchEngine:
    """The default :class:`~workers.memory.ports.MemorySearchProvider`: every strategy above
    over ``store`` (and ``embedder`` for the vector leg and the rerankers).

    ``rerankers`` adds rerank stages by name (a cross-encoder, say) to the built-in ``mmr``
    and ``embedding``; each factory builds a search's reranker from its settings.

    Raises:
        MemoryStoreError: ``INVALID_INPUT`` when ``settings.rerank`` names no reranker this
            engine has (``mmr`` and ``embedding`` need an embedder).
    """

    def __init__(
        self,
        store: MemoryStore,
        embedder: Embedder | None = None,
        settings: SearchSettings | None = None,
        rerankers: Mapping[str, RerankerFactory] | None = None,
    ) -> None:
        self.store = store
        self.embedder = embedder
        self.model = model_of(embedder) if embedder is not None else None
        self.floor = cosine_floor_of(embedder) if embedder is not None else 0.0
        self.settings = settings or SearchSettings()
        builtin = builtin_rerankers(embedder) if embedder is not None else {}
        self.rerankers: dict[str, RerankerFactory] = {**builtin, **(rerankers or {})}
        self._reranker(self.settings)  # a clear error at start, not at the first search
        self._recent = recency_search(store)
        self._missing: tuple[int, float] | None = None

    async def search(self, input: SearchInput, ctx: NodeContext) -> list[SearchHit] | SearchOutput:
        strategy = input.strategy or "auto"
        if strategy == RECENT_KEYWORD:
            return await self._recent.search(input, ctx)
        if strategy not in STRATEGIES:
            raise MemoryStoreError(
                f"unknown search strategy {strategy!r}; use one of {', '.join(STRATEGIES)}"
            )
        settings, explain = with_options(self.settings, input.options)
        if strategy == "auto":
            strategy = "hybrid" if self.embedder is not None else "keyword"
        reranker = self._reranker(settings)
        wanted = input.limit or 10
        limit = wanted if reranker is None else settings.candidates(wanted)
        if strategy == "keyword":
            hits = await self._keyword(input, limit, explain)
        else:
            if not isinstance(input.query, str):
                raise MemoryStoreError(f"{strategy} search needs a text query")
            if strategy == "vector":
                leg = await self._vector(input, limit)
                hits = [
                    SearchHit(item, score, _leg_explain("vector", rank, score) if explain else None)
                    for rank, (item, score) in enumerate(leg.ranked, start=1)
                ]
            else:
                hits = await self._hybrid(input, limit, settings, explain)
        if settings.min_score is not None:
            hits = [
                hit for hit in hits if hit.score is not None and hit.score >= settings.min_score
            ]
        if reranker is not None:
            if not isinstance(input.query, str):
                raise MemoryStoreError(f"rerank {reranker.name!r} needs a text query")
            hits = await rerank_hits(reranker, input.query, hits, wanted, ctx, explain)
        if strategy == "keyword":
            return hits
        missing = await self._vector_missing()
        if explain and missing:
            hits = [
                msgspec.structs.replace(
                    hit, explain={**(hit.explain or {}), "vector_missing": missing}
                )
                for hit in hits
            ]
        return SearchOutput(hits, missing)

    async def _vector_missing(self) -> int | None:
        """Records without a vector of the embedder's model, counted at most every
        ``_MISSING_TTL`` seconds (a count reads the whole index)."""
        if self.model is None or not isinstance(self.store, VectorStore):
            return None
        now = monotonic()
        if self._missing is None or now - self._missing[1] >= _MISSING_TTL:
            self._missing = (await self.store.count_missing_vectors(self.model), now)
        return self._missing[0]

    def _reranker(self, settings: SearchSettings) -> Reranker | None:
        """The search's reranker (``None`` when off)."""
        if settings.rerank == "off":
            return None
        factory = self.rerankers.get(settings.rerank)
        if factory is None:
            offered = ", ".join(["off", *self.rerankers]) if self.rerankers else "off"
            need = "" if self.embedder is not None else " (mmr and embedding need an embedder)"
            raise MemoryStoreError(f"unknown rerank {settings.rerank!r}; use {offered}{need}")
        return factory(settings)

    async def _keyword(self, input: SearchInput, limit: int, explain: bool) -> list[SearchHit]:
        if not isinstance(self.store, KeywordSearch):
            raise SearchUnavailableError()
        options = {"explain": True} if explain else {}
        request = msgspec.structs.replace(input, strategy="keyword", limit=limit, options=options)
        return await self.store.search(request)

    async def _vector(self, input: SearchInput, limit: int) -> _Leg:
        if self.embedder is None or self.model is None:
            raise MemoryStoreError(
                "vector search needs an embedder: configure workers.memory.embedder (or pass "
                "embedder= to create_memory_worker)",
                code="SEARCH_UNAVAILABLE",
            )
        if not isinstance(self.store, VectorStore):  # the worker refuses this pairing first
            raise SearchUnavailableError()
        query = await embed_texts(self.embedder, [input.query], queries=True)
        ranked = await self.store.vector_search(self.model, query[0], input.filter, limit)
        # The declared floor is a same-language figure: a query in another language than the
        # records sits lower on every record, so the leg's own lowest candidate bounds it.
        floor = min(self.floor, min(score for _, score in ranked)) if ranked else self.floor
        return _Leg("vector", ranked, max(floor, 0.0))

    async def _hybrid(
        self, input: SearchInput, limit: int, settings: SearchSettings, explain: bool
    ) -> list[SearchHit]:
        fetch = max(limit * settings.overfetch, _MIN_CANDIDATES)
        keyword_request = msgspec.structs.replace(input, limit=fetch, options={})
        vector_leg, keyword_hits = await _both(
            self._vector(input, fetch), self._keyword(keyword_request, fetch, False)
        )
        keyword_leg = _Leg("keyword", [(hit.memory, hit.score or 0.0) for hit in keyword_hits])
        vector_weight, keyword_weight = settings.weights()
        legs = ((vector_leg, vector_weight), (keyword_leg, keyword_weight))
        contribute = _FUSE[settings.fusion](legs, settings)
        fused: dict[str, dict[str, Any]] = {}
        items: dict[str, MemoryItem] = {}
        for (leg, _), (leg_weight, contributions) in zip(legs, contribute, strict=True):
            for rank, ((item, score), contribution) in enumerate(
                zip(leg.ranked, contributions, strict=True), start=1
            ):
                items.setdefault(item.id, item)
                entry = fused.setdefault(item.id, {"fused_score": 0.0})
                entry[f"{leg.name}_rank"] = rank
                entry[f"{leg.name}_score"] = score
                entry[f"{leg.name}_weight"] = leg_weight
                entry[f"{leg.name}_contribution"] = contribution
                entry["fused_score"] += contribution
        order = sorted(fused, key=lambda item_id: (-fused[item_id]["fused_score"], item_id))
        hits = []
        for item_id in order[:limit]:
            why = fused[item_id]
            detail = None
            if explain:
                detail = {"strategy": "hybrid", "fusion": settings.fusion, **why}
                for (leg, _), (leg_weight, _) in zip(legs, contribute, strict=True):
                    # a leg that missed it contributes 0
                    detail.setdefault(f"{leg.name}_rank", None)
                    detail.setdefault(f"{leg.name}_score", None)
                    detail.setdefault(f"{leg.name}_weight", leg_weight)
                    detail.setdefault(f"{leg.name}_contribution", 0.0)
            hits.append(SearchHit(items[item_id], why["fused_score"], detail))
        return hits


_Contributions = list[tuple[float, list[float]]]
"""Per leg: the weight it had, and what each of its candidates (in rank order) adds."""


def _confidence_fusion(
    legs: tuple[tuple[_Leg, float], ...], settings: SearchSettings
) -> _Contributions:
    calibrated = [
        [min(max((score - leg.floor) / (1.0 - leg.floor), 0.0), 1.0) for _, score in leg.ranked]
        for leg, _ in legs
    ]
    confidences = [
        weight * _confidence(scores) for (_, weight), scores in zip(legs, calibrated, strict=True)
    ]
    total = sum(confidences)
    if total <= 0:  # no leg singles anything out: the legs count by their weights alone
        confidences = [
            weight if scores else 0.0 for (_, weight), scores in zip(legs, calibrated, strict=True)
        ]
        total = sum(confidences) or 1.0
    shares = [confidence / total for confidence in confidences]
    return [
        (share, [share * score for score in scores])
        for share, scores in zip(shares, calibrated, strict=True)
    ]


def _confidence(scores: list[float]) -> float:
    """How sharply a leg's best candidate stands out: ``((s₁ - s₁₀) / s₁)²`` (0 when its best
    scores 0 or it has one candidate)."""
    if not scores or scores[0] <= 0:
        return 0.0
    gap = (scores[0] - scores[min(_CONFIDENCE_DEPTH, len(scores)) - 1]) / scores[0]
    return gap * gap


def _rrf_fusion(legs: tuple[tuple[_Leg, float], ...], settings: SearchSettings) -> _Contributions:
    return [
        (weight, [weight / (settings.rrf_k + rank) for rank in range(1, len(leg.ranked) + 1)])
        for leg, weight in legs
    ]


def _weighted_fusion(
    legs: tuple[tuple[_Leg, float], ...], settings: SearchSettings
) -> _Contributions:
    out = []
    for leg, weight in legs:
        normalise = _min_max([score for _, score in leg.ranked])
        out.append((weight, [weight * normalise(score) for _, score in leg.ranked]))
    return out


_FUSE = {"confidence": _confidence_fusion, "rrf": _rrf_fusion, "weighted": _weighted_fusion}


async def _both(first: Awaitable[A], second: Awaitable[B]) -> tuple[A, B]:
    """Run two legs at once and return both results; when one fails (or the caller is
    cancelled) the other is cancelled and awaited, and the failure propagates as it is.

    Not an ``asyncio.TaskGroup``: on Python 3.11 a child failing while the group waits leaves
    the parent task's cancel request counted (fixed in 3.12), which the runtime then rightly
    reads as the caller being cancelled."""
    tasks = (asyncio.ensure_future(first), asyncio.ensure_future(second))
    try:
        return await tasks[0], await tasks[1]
    finally:
        pending = [task for task in tasks if not task.done()]
        for task in pending:
            task.cancel()
        if pending:
            await asyncio.gather(*pending, return_exceptions=True)
        for task in tasks:  # a failure nobody awaited is still retrieved (no warning)
            if task.done() and not task.cancelled():
                task.exception()


def _leg_explain(name: str, rank: int, score: float) -> dict[str, Any]:
    return {"strategy": name, f"{name}_rank": rank, f"{name}_score": score}


def _min_max(scores: list[float]) -> Any:
    """Min-max normalisation over one leg's candidates (a single value, or all equal, is 1)."""
    if not scores:
        return lambda score: 0.0
    low, high = min(scores), max(scores)
    if high - low <= 1e-12:
        return lambda score: 1.0
    return lambda score: (score - low) / (high - low)
