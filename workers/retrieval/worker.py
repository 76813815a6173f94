"""``create_retrieval_worker``: ``RETRIEVAL.SEARCH`` over configured targets.

The worker owns the contract, as the MEMORY worker does for its nodes: it resolves the target
(an unknown one is ``RETRIEVAL_TARGET_NOT_FOUND``, never a fallback) and the strategy (one the
target's provider does not run is ``RETRIEVAL_STRATEGY_UNSUPPORTED``; ``rag`` never runs), the
limit, then checks what the provider returned — at most the limit, finite scores, each
candidate once — and hands it back in the provider's order. It never re-ranks, deduplicates or
invents ids, and it stores nothing: the pipeline (embed, search, fuse, rerank) runs inside the
providers, which reuse the MEMORY worker's (:mod:`workers.memory.retrieval`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from types import MappingProxyType

from ditto.contracts.node_types import NodeContract
from ditto.errors import DittoError, ErrorCode, InvalidInputError
from ditto.runtime.context import NodeContext
from ditto.runtime.worker import NodeSpec, WorkerDefinition, define_worker
from workers.memory.model.contracts import MAX_QUERY_CHARS, MemoryFilter
from workers.retrieval.contracts import (
    RetrievalCandidate,
    RetrievalSearchInput,
    RetrievalSearchOutput,
)
from workers.retrieval.errors import RetrievalError, invalid, provider_boundary, unsupported
from workers.retrieval.ports import ProviderRequest, ProviderResult, RetrievalProvider

__all__ = ("MAX_LIMIT", "NODE", "SEARCH_CONTRACT", "create_retrieval_worker")

NODE = "RETRIEVAL.SEARCH"
SEARCH_CONTRACT = NodeContract(NODE, RetrievalSearchInput, RetrievalSearchOutput)
"""The node's wire types: a runtime that sends RETRIEVAL.SEARCH to remote workers registers
it with this contract, so inputs are checked before they leave and outputs decoded on return."""
MAX_LIMIT = 10_000
_NEVER = frozenset({"rag"})
"""Strategies no target runs (the reference refuses ``rag`` in any case: generation is not
retrieval)."""


def _off_contract(what: str) -> DittoError:
    return RetrievalError(
        f"the retrieval provider returned an invalid result: {what}",
        code=ErrorCode.INVALID_BACKEND_OUTPUT,
    )


class _SearchNode:
    """The handler of ``RETRIEVAL.SEARCH`` over a fixed table of targets."""

    def __init__(self, targets: Mapping[str, RetrievalProvider], search_limit: int) -> None:
        self.targets = targets
        self.search_limit = search_limit

    async def search(
        self, request: RetrievalSearchInput, ctx: NodeContext
    ) -> RetrievalSearchOutput:
        target = request.target
        provider = self.targets.get(target.name)
        if provider is None or target.type not in (None, provider.kind):
            kind = "" if target.type is None else f" of type {target.type!r}"
            raise RetrievalError(
                f"no retrieval target {target.name!r}{kind}; targets: "
                + (", ".join(sorted(self.targets)) or "none"),
                code=ErrorCode.RETRIEVAL_TARGET_NOT_FOUND,
            )
        strategy = request.strategy or provider.strategies[0]
        if strategy.casefold() in _NEVER or strategy not in provider.strategies:
            raise unsupported(
                f"target {target.name!r} ({provider.kind}) has no strategy {strategy!r}; "
                f"it offers {', '.join(provider.strategies)}"
            )
        if isinstance(request.query.content, str) and len(request.query.content) > MAX_QUERY_CHARS:
            raise invalid(f"query is longer than {MAX_QUERY_CHARS} characters")
        limit = request.limit or self.search_limit
        asked = ProviderRequest(
            target.name,
            request.query.content,
            strategy,
            request.filter or MemoryFilter(),
            limit,
            request.options,
            target.namespace,
        )
        await provider_boundary(provider.open())
        found = await provider_boundary(provider.search(asked, ctx))
        candidates = _checked(found, limit)
        metadata = {"provider": provider.kind, **(found.metadata or {})}
        return RetrievalSearchOutput(candidates, target, strategy, metadata)


def _checked(found: object, limit: int) -> list[RetrievalCandidate]:
    """The provider's candidates, if they keep the contract.

    Raises:
        DittoError: ``INVALID_BACKEND_OUTPUT`` naming what is wrong.
    """
    if not isinstance(found, ProviderResult) or not isinstance(found.candidates, list):
        raise _off_contract("a provider must return a ProviderResult")
    candidates = found.candidates
    if not all(isinstance(candidate, RetrievalCandidate) for candidate in candidates):
        raise _off_contract("candidates must be RetrievalCandidate")
    if len(candidates) > limit:
        raise _off_contract("more candidates than the limit")
    seen: set[tuple[str | None, str | None]] = set()
    for candidate in candidates:
        if candidate.score is not None and (
            isinstance(candidate.score, bool) or not math.isfinite(candidate.score)
        ):
            raise _off_contract("a score that is not a finite number")
        source = candidate.source
        identity = (
            None if source is None else source.target,
            candidate.id if candidate.id is not None else (None if source is None else source.ref),
        )
        if identity[1] is not None:
            if identity in seen:
                raise _off_contract("a candidate twice")
            seen.add(identity)
    return candidates


def create_retrieval_worker(
    targets: Mapping[str, RetrievalProvider],
    *,
    search_limit: int = 10,
    concurrency: int | None = None,
    own_targets: bool = False,
) -> WorkerDefinition:
    """The RETRIEVAL worker: ``RETRIEVAL.SEARCH`` over ``targets``.

    Args:
        targets: Target name -> the provider that searches it (built once; the table is copied
            and never changes).
        search_limit: Candidates when a request gives no limit (1..10000).
        concurrency: Most calls one replica runs at once (``None``: unlimited).
        own_targets: Close every provider when the runtime closes (a worker process that built
            them itself: ``ditto worker serve --worker module:attr``). Otherwise the
            application that opened them closes them.

    Raises:
        InvalidInputError: No targets, a name that is not a non-empty string, a provider that is
            not a ``RetrievalProvider`` (or declares no strategy), or a bad limit.
    """
    if not isinstance(targets, Mapping) or not targets:
        raise InvalidInputError("a retrieval worker needs at least one target")
    for name, provider in targets.items():
        if not isinstance(name, str) or not name.strip():
            raise InvalidInputError("a retrieval target's name must be a non-empty string")
        if not isinstance(provider, RetrievalProvider) or not provider.strategies:
            raise InvalidInputError(
                f"target {name!r}: a provider needs kind, strategies, open, search and aclose"
            )
    if (
        isinstance(search_limit, bool)
        or not isinstance(search_limit, int)
        or not 1 <= search_limit <= MAX_LIMIT
    ):
        raise InvalidInputError(f"search_limit must be an integer from 1 to {MAX_LIMIT}")
    table = MappingProxyType(dict(targets))
    node = _SearchNode(table, search_limit)

    async def close_all() -> None:
        failures = []
        for provider in table.values():  # every one, even after one fails
            try:
                await provider.aclose()
            except Exception as exc:
                failures.append(exc)
        if failures:
            raise ExceptionGroup("closing retrieval targets failed", failures)

    return define_worker(
        "retrieval",
        {NODE: NodeSpec(node.search, SEARCH_CONTRACT.input_type, SEARCH_CONTRACT.output_type)},
        concurrency=concurrency,
        dispose=close_all if own_targets else None,
    )
