"""Pluggable context services: custom selection, compression, token counting and reference
resolution. Each is a Protocol a plain object satisfies; every output is validated by the
worker, never trusted."""

from __future__ import annotations

import inspect
from collections.abc import Awaitable
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from ditto.runtime.context import NodeContext
from workers.context.contracts import CompressInput, Context, Reference, SelectInput

__all__ = (
    "Compressor",
    "ContextServices",
    "ReferenceResolver",
    "Selector",
    "TokenEstimator",
    "resolve_maybe_async",
)


@runtime_checkable
class Selector(Protocol):
    """Returns candidate items, best first (``provider`` and ``rag`` strategies). SELECT then
    validates them, drops repeated ids and applies the limit and the token budget."""

    async def select(self, input: SelectInput, ctx: NodeContext) -> list[Any]: ...


@runtime_checkable
class Compressor(Protocol):
    """Returns the compressed context: only input ids, protected items and whole ``call_id``
    groups kept, within the budgets (all checked)."""

    async def compress(self, input: CompressInput, ctx: NodeContext) -> Context: ...


@runtime_checkable
class TokenEstimator(Protocol):
    """Tokens of one item's content (sync or async); a non-negative integer."""

    def estimate(self, content: Any) -> int | Awaitable[int]: ...


@runtime_checkable
class ReferenceResolver(Protocol):
    """Fetches a reference's content for LOAD with ``resolve_references``; it owns which URIs
    are allowed and bounds its own I/O."""

    async def resolve(self, reference: Reference, ctx: NodeContext) -> Any: ...


@dataclass(frozen=True, slots=True)
class ContextServices:
    selector: Selector | None = None
    """Used by SELECT with ``strategy.kind = "provider"``."""
    rag: Selector | None = None
    """Used by SELECT with ``strategy.kind = "rag"``."""
    compressor: Compressor | None = None
    """Replaces the deterministic COMPRESS (its output is still validated)."""
    token_estimator: TokenEstimator | None = None
    """Replaces ``ceil(bytes / 4)``; only called when a token budget applies."""
    reference_resolver: ReferenceResolver | None = None


async def resolve_maybe_async(value: Any) -> Any:
    return await value if inspect.isawaitable(value) else value
