"""The one port of the RETRIEVAL worker: a :class:`RetrievalProvider` behind each target.

A provider is a small strategy object (a ``Protocol``, satisfied by a plain class): it opens
what it reads, runs one search of a request the worker has already checked, and closes. It
never writes: the worker has no storage of its own, and a provider over a memory store only
reads it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from workers.memory.model.contracts import MemoryFilter
from workers.retrieval.contracts import RetrievalCandidate

if TYPE_CHECKING:
    from ditto.runtime.context import NodeContext

__all__ = ("ProviderRequest", "ProviderResult", "RetrievalProvider")


@dataclass(frozen=True, slots=True)
class ProviderRequest:
    """One search, as the worker hands it to a provider."""

    target: str
    """The target's name (providers put it in each candidate's ``source``)."""
    query: Any
    """``query.content`` of the request."""
    strategy: str
    """One of the provider's ``strategies`` (resolved: never ``None``)."""
    filter: MemoryFilter
    limit: int
    """Resolved: the request's, else the worker's default."""
    options: dict[str, Any]
    namespace: str | None
    """``target.namespace`` of the request."""


@dataclass(frozen=True, slots=True)
class ProviderResult:
    """Candidates, best first, and what the provider reports beside them."""

    candidates: list[RetrievalCandidate]
    metadata: dict[str, Any] | None = None


@runtime_checkable
class RetrievalProvider(Protocol):
    """Searches one target.

    ``kind`` names what it searches (``memory``, ``corpus``, ``milvus``: the target's
    ``type``); ``strategies`` are the strategies it runs, the first being its default.
    """

    kind: str
    strategies: tuple[str, ...]

    async def open(self) -> None:
        """Make ready to search (load a corpus, check a collection); idempotent and cheap once
        done: the worker calls it before every search."""
        ...

    async def search(self, request: ProviderRequest, ctx: NodeContext) -> ProviderResult:
        """At most ``request.limit`` candidates for ``request``, best first, ``request.filter``
        applied before the limit.

        Raises:
            DittoError: ``INVALID_INPUT`` for a query, filter or option it cannot take;
                ``FORBIDDEN``, ``EMBEDDING_*``, ``RETRIEVAL_PROVIDER_UNAVAILABLE``...
        """
        ...

    async def aclose(self) -> None:
        """Release what :meth:`open` took (what the application passed in stays open)."""
        ...
