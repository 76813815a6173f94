"""``SearchSettings``: the defaults of the search engine's fusion and rerank stage, and the
check of a request's ``options`` that override them (``ditto.yaml``'s
``workers.memory.search`` builds the defaults)."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any, Literal

from ditto.errors import InvalidInputError
from workers.memory.model.errors import MemoryStoreError

__all__ = ("FUSIONS", "OPTIONS", "RERANKS", "Fusion", "SearchSettings", "with_options")

Fusion = Literal["confidence", "rrf", "weighted"]
FUSIONS = ("confidence", "rrf", "weighted")
RERANKS = ("off", "mmr", "embedding")
"""The built-in rerank stages (an engine may be given more, such as a cross-encoder)."""
_DEFAULT_WEIGHTS = {"confidence": (1.0, 1.0), "rrf": (0.5, 0.5), "weighted": (0.7, 0.3)}
"""(vector, keyword) leg weights of each fusion."""
_MAX_RERANK_CANDIDATES = 1000
OPTIONS = frozenset(
    {
        "explain",
        "min_score",
        "fusion",
        "rrf_k",
        "vector_weight",
        "keyword_weight",
        "rerank",
        "rerank_candidates",
        "mmr_lambda",
        "rerank_weight",
    }
)
"""Every option a SEARCH request may pass to the engine."""


@dataclass(frozen=True, slots=True)
class SearchSettings:
    """Defaults of the search engine (a request's ``options`` override them).

    Args:
        fusion: ``confidence``, ``rrf`` or ``weighted``.
        rrf_k: RRF's rank offset (> 0).
        vector_weight / keyword_weight: Leg weights (>= 0, not both 0); ``None`` takes the
            fusion's default (confidence 1 / 1, RRF 0.5 / 0.5, weighted 0.7 / 0.3).
        overfetch: Each hybrid leg fetches ``overfetch × limit`` candidates (1..20).
        min_score: Drop hits scoring below it (``None``: keep all); it reads the fused scores,
            before any rerank.
        rerank: The rerank stage after fusion: ``off``, ``mmr``, ``embedding`` (or a name the
            engine was given a reranker for).
        rerank_candidates: How many fused candidates the rerank stage sees (1..1000, at least
            the limit); ``None``: ``max(3 × limit, 30)``.
        mmr_lambda: MMR's trade-off in [0, 1]: 1 keeps the fused order, 0 is diversity only.
        rerank_weight: The embedding reranker's share of the best-chunk cosine in [0, 1] (the
            rest is the fused relevance).
    """

    fusion: Fusion = "confidence"
    rrf_k: float = 60
    vector_weight: float | None = None
    keyword_weight: float | None = None
    overfetch: int = 3
    min_score: float | None = None
    rerank: str = "off"
    rerank_candidates: int | None = None
    mmr_lambda: float = 0.7
    rerank_weight: float = 0.5

    def __post_init__(self) -> None:
        if self.fusion not in FUSIONS:
            raise InvalidInputError("fusion must be confidence, rrf or weighted")
        _number("rrf_k", self.rrf_k, positive=True)
        for name in ("vector_weight", "keyword_weight", "min_score"):
            value = getattr(self, name)
            if value is not None:
                _number(name, value, positive=False, allow_negative=name == "min_score")
        vector, keyword = self.weights()
        if vector == 0 and keyword == 0:
            raise InvalidInputError("vector_weight and keyword_weight cannot both be 0")
        _integer("overfetch", self.overfetch, 20)
        if not isinstance(self.rerank, str) or not self.rerank:
            raise InvalidInputError("rerank must be a reranker's name: off, mmr or embedding")
        if self.rerank_candidates is not None:
            _integer("rerank_candidates", self.rerank_candidates, _MAX_RERANK_CANDIDATES)
        for name in ("mmr_lambda", "rerank_weight"):
            if _number(name, getattr(self, name), positive=False) > 1:
                raise InvalidInputError(f"{name} must be from 0 to 1")

    def weights(self) -> tuple[float, float]:
        vector, keyword = _DEFAULT_WEIGHTS[self.fusion]
        return (
            vector if self.vector_weight is None else self.vector_weight,
            keyword if self.keyword_weight is None else self.keyword_weight,
        )

    def candidates(self, limit: int) -> int:
        """How many fused hits the rerank stage sees for a request of ``limit``."""
        wanted = self.rerank_candidates or max(3 * limit, 30)
        return max(wanted, limit)


def with_options(settings: SearchSettings, options: dict[str, Any]) -> tuple[SearchSettings, bool]:
    """``settings`` with a request's ``options`` applied, and whether it asks to explain.

    Raises:
        MemoryStoreError: ``INVALID_INPUT`` naming the option: unknown, or a bad value.
    """
    unknown = sorted(options.keys() - OPTIONS)
    if unknown:
        raise MemoryStoreError(
            f"unknown search option {unknown[0]!r}; options: {', '.join(sorted(OPTIONS))}"
        )
    explain = options.get("explain", False)
    if not isinstance(explain, bool):
        raise MemoryStoreError("options.explain must be true or false")
    overrides = {name: value for name, value in options.items() if name != "explain"}
    if not overrides:
        return settings, explain
    try:
        return replace(settings, **overrides), explain
    except (InvalidInputError, TypeError) as exc:
        raise MemoryStoreError(str(exc).removeprefix("[INVALID_INPUT] ")) from None


def _integer(name: str, value: object, most: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidInputError(f"{name} must be an integer")
    if not 1 <= value <= most:
        raise InvalidInputError(f"{name} must be from 1 to {most}")
    return value


def _number(name: str, value: object, *, positive: bool, allow_negative: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not _finite(value):
        raise MemoryStoreError(f"{name} must be a finite number")
    if positive and value <= 0:
        raise MemoryStoreError(f"{name} must be more than 0")
    if not positive and not allow_negative and value < 0:
        raise MemoryStoreError(f"{name} must not be negative")
    return float(value)


def _finite(value: int | float) -> bool:
    """Finite as a float: an integer past the float range (2**1100) is not."""
    try:
        return math.isfinite(value)
    except OverflowError:
        return False
