"""``workers.retrieval:`` — the RETRIEVAL worker and its targets (``MemoryWorkerSettings``'s
``search_target`` hands MEMORY.SEARCH to it)."""

from __future__ import annotations

from typing import Literal, Self

from pydantic import BaseModel, ConfigDict, Field, model_validator

__all__ = ("RetrievalTargetSettings", "RetrievalWorkerSettings")

TargetName = str


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class RetrievalTargetSettings(_Strict):
    """One entry of ``workers.retrieval.targets``: what the target searches."""

    kind: Literal["memory", "corpus", "milvus"]
    """``memory``: the memory store ``workers.memory`` configures, read-only, with its access
    policy and search defaults; ``corpus``: the text and Markdown files under ``path``;
    ``milvus``: the ``collection`` of the Milvus Lite file ``path`` (the ``retrieval``
    extra). The embedder is ``workers.memory.embedder`` for every kind."""
    path: str | None = Field(None, min_length=1)
    """The corpus folder, or the Milvus Lite file (relative to the working directory)."""
    collection: str | None = Field(None, min_length=1, max_length=255)
    """The Milvus collection."""
    index: Literal["FLAT", "HNSW"] = "FLAT"
    """Milvus: the index a new collection gets, exact (``FLAT``) or approximate (``HNSW``)."""
    chunk_words: int = Field(200, ge=16, le=2000)
    """Corpus: most words of a chunk (whole paragraphs where they fit)."""
    cache: str | None = Field(None, min_length=1)
    """Corpus: a SQLite file keeping the chunks' vectors between runs (only what changed is
    embedded again); ``None``: embedded at every start."""

    @model_validator(mode="after")
    def _needs_what_its_kind_reads(self) -> Self:
        if self.kind != "memory" and self.path is None:
            raise ValueError(f"a {self.kind} target needs path")
        if self.kind == "milvus" and self.collection is None:
            raise ValueError("a milvus target needs collection")
        if self.cache is not None and self.kind != "corpus":
            raise ValueError("cache is a corpus target's setting")
        if self.kind == "memory" and (self.path is not None or self.collection is not None):
            raise ValueError("a memory target searches workers.memory's store: no path")
        return self


class RetrievalWorkerSettings(_Strict):
    """``workers.retrieval:`` — the RETRIEVAL worker (built when it has targets)."""

    search_limit: int = Field(10, ge=1, le=10_000)
    """Candidates when a RETRIEVAL.SEARCH request gives no limit."""
    targets: dict[TargetName, RetrievalTargetSettings] = Field(default_factory=dict)
    """Target name -> what it searches; empty: no RETRIEVAL worker."""

    @model_validator(mode="after")
    def _names(self) -> Self:
        for name in self.targets:
            if not name or len(name) > 256:
                raise ValueError("a target name must be 1 to 256 characters")
        return self
