"""The RETRIEVAL.SEARCH wire types (reference contract §6.1), frozen ``msgspec.Struct``s.

The runtime converts a dict input into :class:`RetrievalSearchInput` once, at the boundary, so a
malformed request is ``INVALID_INPUT`` before any provider runs. Filters are the MEMORY filter
(:class:`~workers.memory.model.contracts.MemoryFilter`): one filter language for every target,
so a MEMORY.SEARCH handed on to RETRIEVAL keeps its (access-narrowed) filter as it is, and a
provider that cannot apply a condition refuses it rather than ignoring it.
"""

from __future__ import annotations

from typing import Annotated, Any

import msgspec
from msgspec import Meta

from workers.memory.model.contracts import Limit, MemoryFilter, Name

__all__ = (
    "CandidateSource",
    "RetrievalCandidate",
    "RetrievalQuery",
    "RetrievalSearchInput",
    "RetrievalSearchOutput",
    "RetrievalTarget",
)

Ref = Annotated[str, Meta(min_length=1, max_length=2048)]


class _Frozen(msgspec.Struct, frozen=True, forbid_unknown_fields=True, omit_defaults=True):
    pass


class RetrievalQuery(_Frozen, frozen=True, forbid_unknown_fields=True):
    """What to look for."""

    content: Any
    """Usually text (at most 10,000 characters); a provider says what else it accepts."""
    metadata: dict[str, Any] | None = None
    """The caller's own facts about the query; providers do not read it."""


class RetrievalTarget(_Frozen, frozen=True, forbid_unknown_fields=True):
    """Where to look: a target the worker was configured with, by name."""

    name: Name
    type: Name | None = None
    """When given, the target's provider must be of this kind (``memory``, ``corpus``,
    ``milvus``): a caller that expects records never gets documents by a name mix-up."""
    namespace: Name | None = None
    """A memory target searches this namespace only (other providers refuse it)."""
    metadata: dict[str, Any] | None = None
    """The caller's own facts about the target; echoed back, never read."""


class RetrievalSearchInput(_Frozen, frozen=True, forbid_unknown_fields=True):
    """The input of ``RETRIEVAL.SEARCH``."""

    query: RetrievalQuery
    target: RetrievalTarget
    strategy: Name | None = None
    """``None``: the target's default strategy."""
    filter: MemoryFilter | None = None
    """Applied by the provider before the limit (see the module)."""
    limit: Limit | None = None
    """Most candidates; ``None``: the worker's ``search_limit`` (10)."""
    options: dict[str, Any] = msgspec.field(default_factory=dict)
    """The provider's options (the memory pipeline's: ``explain``, ``min_score``, ``fusion``,
    ``rerank``...); an option a provider does not know is ``INVALID_INPUT``."""


class CandidateSource(_Frozen, frozen=True, forbid_unknown_fields=True):
    """Where a candidate came from: the target's name and the provider's reference."""

    target: Name | None = None
    ref: Ref | None = None
    """The provider's stable reference: a record id, ``path#chunk``, a Milvus primary key."""


class RetrievalCandidate(_Frozen, frozen=True, forbid_unknown_fields=True):
    """One candidate, as the provider ranked it."""

    content: Any
    """A memory target's complete record (``MemoryItem`` as JSON); a document's text."""
    id: Ref | None = None
    score: float | None = None
    """Higher is better; on the provider's scale (calibrated in [0, 1] for memory and corpus,
    cosine for Milvus)."""
    source: CandidateSource | None = None
    metadata: dict[str, Any] | None = None
    """The document's metadata (corpus, Milvus) and, with ``options.explain``, ``explain``."""


class RetrievalSearchOutput(_Frozen, frozen=True, forbid_unknown_fields=True):
    """The output of ``RETRIEVAL.SEARCH``: the candidates best first, never more than the limit,
    never reranked, deduplicated or given ids by the worker (the provider's order stands)."""

    candidates: list[RetrievalCandidate]
    target: RetrievalTarget
    """The request's target, as given."""
    strategy: Name | None = None
    """The strategy that ran (the request's, or the target's default)."""
    metadata: dict[str, Any] | None = None
    """``provider`` (its kind) and what it reports, such as ``vector_missing``."""
