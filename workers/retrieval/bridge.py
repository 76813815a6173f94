"""``RetrievalSearchProvider``: MEMORY.SEARCH handed on to RETRIEVAL.SEARCH (reference §6.3).

Give it to the MEMORY worker as its search provider (``create_memory_worker(store,
search=RetrievalSearchProvider("memory"))``, or ``workers.memory.search_target`` in
``ditto.yaml``) and every search runs on a RETRIEVAL worker — in this process or on other hosts
(``ditto worker serve``), which is how retrieval scales out apart from the store. The MEMORY
worker keeps what is its own: it validates the request, narrows the filter to what the caller
may see *before* handing it on, checks every hit against that filter, applies access control to
what comes back, counts usage and answers ``explain_miss``. The call goes through
``ctx.invoke``, so it carries the caller's principal and deadline.

The target must be a memory target (its candidates carry complete records): a candidate whose
content is not a ``MemoryItem`` with the candidate's id is ``INVALID_BACKEND_OUTPUT``. Failures
keep their code when MEMORY has the same one (``INVALID_INPUT``, ``FORBIDDEN``, the embedding
codes, ``TIMEOUT``); a strategy the target lacks is ``INVALID_INPUT``, as for MEMORY's own
providers; anything else is ``MEMORY_BACKEND_ERROR`` naming the retrieval code.
"""

from __future__ import annotations

from typing import Any

import msgspec

from ditto.errors import DittoError, ErrorCode, ErrorInfo
from ditto.runtime.context import NodeContext
from workers.memory.model.contracts import MemoryItem, SearchHit, SearchInput, SearchOutput
from workers.retrieval.contracts import (
    RetrievalQuery,
    RetrievalSearchInput,
    RetrievalSearchOutput,
    RetrievalTarget,
)
from workers.retrieval.worker import NODE

__all__ = ("RetrievalSearchProvider",)

_KEPT = frozenset(
    {
        ErrorCode.INVALID_INPUT,
        ErrorCode.FORBIDDEN,
        ErrorCode.EMBEDDING_MISMATCH,
        ErrorCode.EMBEDDING_FAILED,
        ErrorCode.EMBEDDER_UNAVAILABLE,
        ErrorCode.TIMEOUT,
    }
)
"""Retrieval failures MEMORY reports under the same code."""


class RetrievalSearchProvider:
    """A :class:`~workers.memory.ports.MemorySearchProvider` that calls ``RETRIEVAL.SEARCH`` on
    ``target`` (see the module).

    Args:
        target: The RETRIEVAL worker's name for the memory store.
        namespace: Sent as ``target.namespace`` (``None``: the filter's namespace decides).
    """

    def __init__(self, target: str, *, namespace: str | None = None) -> None:
        self.target = RetrievalTarget(target, type="memory", namespace=namespace)

    async def search(self, input: SearchInput, ctx: NodeContext) -> SearchOutput:
        request = RetrievalSearchInput(
            query=RetrievalQuery(input.query),
            target=self.target,
            strategy=input.strategy,
            filter=input.filter,
            limit=input.limit,
            options=input.options,
        )
        try:
            result = await ctx.invoke(NODE, request)
        except DittoError as exc:  # no worker serves RETRIEVAL.SEARCH, the runtime closed...
            raise _handed_on(exc.to_info()) from exc
        if not result.ok:
            raise _handed_on(result.error)
        output = _decoded(result.output, RetrievalSearchOutput, "a RETRIEVAL.SEARCH output")
        hits = []
        for candidate in output.candidates:
            record = _decoded(candidate.content, MemoryItem, "a candidate's content")
            if record.id != candidate.id:
                raise _off_contract("a candidate's id differs from its record's")
            explain = (candidate.metadata or {}).get("explain")
            hits.append(SearchHit(record, candidate.score, explain if explain else None))
        missing = (output.metadata or {}).get("vector_missing")
        return SearchOutput(hits, missing if type(missing) is int else None)


def _decoded(value: Any, kind: type[Any], what: str) -> Any:
    """``value`` as ``kind``: as it is when it already is one (an in-process call), converted
    from JSON builtins when it crossed a transport."""
    if isinstance(value, kind):
        return value
    try:
        return msgspec.convert(value, kind)
    except (msgspec.ValidationError, TypeError) as exc:
        raise _off_contract(f"{what} is not {kind.__name__}") from exc


def _off_contract(what: str) -> DittoError:
    return DittoError(
        f"the retrieval worker returned an invalid result: {what}",
        code=ErrorCode.INVALID_BACKEND_OUTPUT,
    )


def _handed_on(error: ErrorInfo | None) -> DittoError:
    if error is None:  # a failed result always carries one; never a silent success
        error = ErrorInfo(ErrorCode.RETRIEVAL_BACKEND_ERROR, "no error information")
    if error.code in _KEPT:
        return DittoError(error.message, code=error.code, retryable=error.retryable)
    if error.code == ErrorCode.RETRIEVAL_STRATEGY_UNSUPPORTED:
        return DittoError(error.message, code=ErrorCode.INVALID_INPUT)
    return DittoError(
        f"the retrieval worker failed ({error.code})",
        code=ErrorCode.MEMORY_BACKEND_ERROR,
        retryable=error.retryable,
        details={"retrieval_code": error.code},
    )
