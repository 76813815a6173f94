"""The MEMORY worker's search pipeline run for a RETRIEVAL target held in a memory store.

Both the memory-store provider and the corpus provider keep their records in a
:class:`~workers.memory.ports.MemoryStore` (the application's, or an in-process one built from
the corpus), so both rank with the MEMORY worker's own :class:`SearchEngine` — embed the query,
keyword and vector legs, fusion, min score, rerank — rather than a second copy of it. This
module turns a :class:`ProviderRequest` into the engine's ``SearchInput`` and checks every hit
against the filter as the MEMORY worker does: a record outside it is a provider bug, never a
result.
"""

from __future__ import annotations

from datetime import datetime

import msgspec

from ditto.errors import ErrorCode
from ditto.runtime.context import NodeContext
from workers.memory.model.contracts import (
    MemoryFilter,
    SearchHit,
    SearchInput,
    SearchOutput,
)
from workers.memory.model.filters import matches_filter
from workers.memory.model.validation import check_input
from workers.memory.ports import KeywordSearch, MemoryStore, VectorStore
from workers.memory.retrieval.hybrid import STRATEGIES, SearchEngine
from workers.memory.retrieval.recency import STRATEGY as RECENT_KEYWORD
from workers.retrieval.errors import RetrievalError, invalid
from workers.retrieval.ports import ProviderRequest

__all__ = ("engine_strategies", "run_engine", "scoped_filter")


def engine_strategies(store: MemoryStore, engine: SearchEngine) -> tuple[str, ...]:
    """The strategies ``engine`` can run over ``store``, ``auto`` first (the default)."""
    keyword = isinstance(store, KeywordSearch)
    vectors = engine.embedder is not None and isinstance(store, VectorStore)
    offered = {
        "auto": keyword or vectors,
        "keyword": keyword,
        RECENT_KEYWORD: keyword,
        "vector": vectors,
        "hybrid": keyword and vectors,
    }
    return tuple(strategy for strategy in STRATEGIES if offered[strategy])


def scoped_filter(request: ProviderRequest) -> MemoryFilter:
    """``request.filter`` inside ``target.namespace`` when one is given.

    Raises:
        RetrievalError: ``INVALID_INPUT`` when the filter names another namespace.
    """
    namespace = request.namespace
    if namespace is None:
        return request.filter
    if request.filter.namespace not in (None, namespace):
        raise invalid("the filter's namespace differs from the target's namespace")
    return msgspec.structs.replace(request.filter, namespace=namespace)


async def run_engine(
    engine: SearchEngine,
    request: ProviderRequest,
    filter: MemoryFilter,
    ctx: NodeContext,
    now: datetime,
) -> tuple[list[SearchHit], int | None]:
    """The engine's hits for ``request`` under ``filter``, each checked against it at ``now``,
    and its count of records without a vector (vector and hybrid strategies).

    Raises:
        DittoError: ``INVALID_INPUT`` (a query or option the engine refuses), the engine's
            coded errors, or ``INVALID_BACKEND_OUTPUT`` for a hit outside the filter or limit.
    """
    search = SearchInput(
        request.query, request.strategy, filter, request.limit, request.options, explain_miss=None
    )
    check_input(search)
    found = await engine.search(search, ctx)
    output = found if isinstance(found, SearchOutput) else SearchOutput(found)
    if len(output.hits) > request.limit:
        raise _outside("more hits than the limit")
    for hit in output.hits:
        if not matches_filter(hit.memory, filter, now):
            raise _outside("a record outside the filter")
    return output.hits, output.vector_missing


def _outside(what: str) -> RetrievalError:
    return RetrievalError(
        f"the memory search returned {what}", code=ErrorCode.INVALID_BACKEND_OUTPUT
    )
