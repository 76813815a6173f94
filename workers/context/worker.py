"""``create_context_worker``: CONTEXT.LOAD, SELECT, UPDATE and COMPRESS.

Explicit mode (a ``context`` in the input, or LOAD's ``sources`` without a scope) transforms
the given value and never touches a store. Scoped mode (a ``scope``) does one read, the pure
operation, and one atomic compare-and-set: only a LOAD with sources creates state, SELECT never
writes (nor refreshes the TTL), ``expected_version`` is honoured, and a concurrent change is
``STATE_CONFLICT`` — no automatic retry, no silent overwrite.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import msgspec

from ditto.errors import ErrorCode, InvalidInputError
from ditto.runtime.context import NodeContext
from ditto.runtime.worker import WorkerDefinition, define_worker
from workers.context.contracts import (
    CompressInput,
    Context,
    ContextScope,
    ContextSelection,
    LoadInput,
    SelectInput,
    UpdateInput,
)
from workers.context.errors import ContextError
from workers.context.operations import ContextOperations
from workers.context.policy import ContextPolicy
from workers.context.queue import ScopeQueue
from workers.context.services import ContextServices
from workers.context.stores.base import ContextStateStore, StoredContext, conflict

__all__ = ("create_context_worker",)

T = TypeVar("T")
Scoped = LoadInput | SelectInput | UpdateInput | CompressInput


def _invalid(message: str) -> ContextError:
    return ContextError(ErrorCode.INVALID_INPUT, message)


def _not_found() -> ContextError:
    return ContextError(
        ErrorCode.CONTEXT_NOT_FOUND,
        "this scope has no context (absent or expired); initialise it with LOAD and sources",
    )


class _ContextNodes:
    def __init__(
        self,
        store: ContextStateStore | None,
        operations: ContextOperations,
        queue: ScopeQueue | None,
    ) -> None:
        self.store = store
        self.ops = operations
        self.queue = queue

    # ----------------------------------------------------------------- scoped plumbing

    async def _scoped(
        self, request: Scoped, operation: Callable[[StoredContext | None], Awaitable[T]]
    ) -> T:
        scope = request.scope
        assert scope is not None
        if scope.session_id is None and scope.turn_id is None and scope.invocation_id is None:
            raise _invalid("a scope needs at least one of session_id, turn_id, invocation_id")
        if getattr(request, "context", None) is not None:
            raise _invalid("give either a context or a scope, not both")
        store = self.store
        if store is None:
            raise ContextError(
                ErrorCode.STATE_STORE_UNAVAILABLE,
                "a scope was given but no context store is configured",
            )

        if self.queue is None:
            return await operation(await self._read(store, scope, request.expected_version))

        async def serialised() -> T:
            return await operation(await self._read(store, scope, request.expected_version))

        return await self.queue.run(store.key(scope), serialised)

    @staticmethod
    async def _read(
        store: ContextStateStore, scope: ContextScope, expected_version: str | None
    ) -> StoredContext | None:
        stored = await store.get(scope)
        if expected_version is not None and (stored is None or stored.version != expected_version):
            raise conflict()
        return stored

    async def _commit(
        self, scope: ContextScope, stored: StoredContext | None, context: Context
    ) -> Context:
        assert self.store is not None
        written = await self.store.compare_and_set(
            scope, None if stored is None else stored.version, context
        )
        return msgspec.structs.replace(context, version=written.version)

    @staticmethod
    def _explicit(request: Scoped) -> Context:
        if request.expected_version is not None:
            raise _invalid("expected_version needs a scope")
        context = getattr(request, "context", None)
        if context is None:
            raise _invalid("give a context (explicit mode) or a scope (cached mode)")
        return context  # type: ignore[no-any-return]

    # ----------------------------------------------------------------- nodes

    async def load(self, request: LoadInput, ctx: NodeContext) -> Context:
        if request.resolve_references and request.sources is None:
            raise _invalid("resolve_references needs sources")
        if request.scope is None:
            if request.expected_version is not None:
                raise _invalid("expected_version needs a scope")
            if request.sources is None:
                raise _invalid("an explicit LOAD needs sources (or give a scope to read)")
            return await self.ops.load(request, ctx)
        scope = request.scope

        async def operation(stored: StoredContext | None) -> Context:
            if request.sources is None:
                if stored is None:
                    raise _not_found()
                return msgspec.structs.replace(stored.context, version=stored.version)
            return await self._commit(scope, stored, await self.ops.load(request, ctx))

        return await self._scoped(request, operation)

    async def select(self, request: SelectInput, ctx: NodeContext) -> ContextSelection:
        if request.scope is None:
            return await self.ops.select(request, self._explicit(request), ctx)

        async def operation(stored: StoredContext | None) -> ContextSelection:
            if stored is None:
                raise _not_found()
            # The selection carries the version it was read from (stored contexts carry none).
            read = msgspec.structs.replace(stored.context, version=stored.version)
            return await self.ops.select(request, read, ctx, checked=True)

        return await self._scoped(request, operation)

    async def update(self, request: UpdateInput, ctx: NodeContext) -> Context:
        if request.scope is None:
            return await self.ops.update(request, self._explicit(request))
        scope = request.scope

        async def operation(stored: StoredContext | None) -> Context:
            if stored is None:
                raise _not_found()
            return await self._commit(scope, stored, await self.ops.update(request, stored.context))

        return await self._scoped(request, operation)

    async def compress(self, request: CompressInput, ctx: NodeContext) -> Context:
        if request.scope is None:
            return await self.ops.compress(request, self._explicit(request), ctx)
        scope = request.scope

        async def operation(stored: StoredContext | None) -> Context:
            if stored is None:
                raise _not_found()
            compressed = await self.ops.compress(request, stored.context, ctx)
            return await self._commit(scope, stored, compressed)

        return await self._scoped(request, operation)


def _bounded_depth(handler: Handler[T]) -> Handler[T]:
    """``handler`` whose input nested deeper than the operations can walk (they recurse over
    JSON values: canonical encoding, stable ids, text extraction) is ``INVALID_INPUT``, not an
    internal error. A context is only stored after those walks, so nothing changes."""

    @functools.wraps(handler)
    async def run(request: Any, ctx: NodeContext) -> T:
        try:
            return await handler(request, ctx)
        except RecursionError:
            raise _invalid("the input is nested too deeply") from None

    return run


Handler = Callable[[Any, NodeContext], Awaitable[T]]


def create_context_worker(
    *,
    store: ContextStateStore | None = None,
    policy: ContextPolicy | None = None,
    services: ContextServices | None = None,
    queue: ScopeQueue | None = None,
    concurrency: int | None = None,
) -> WorkerDefinition:
    """The CONTEXT worker.

    Args:
        store: Where scoped working sets live (``RedisContextStore``, or
            ``InProcessContextStore`` for development); ``None`` allows explicit mode only. The
            application owns it.
        policy: Limits (default :class:`ContextPolicy`); requests may tighten, never relax it.
        services: Custom selector, compressor, token estimator and reference resolver.
        queue: Serialise calls per scope inside this process.
        concurrency: Most calls one replica runs at once.
    """
    if store is not None and not isinstance(store, ContextStateStore):
        raise InvalidInputError("store must be a ContextStateStore")
    operations = ContextOperations(policy or ContextPolicy(), services or ContextServices())
    nodes = _ContextNodes(store, operations, queue)
    return define_worker(
        "context",
        {
            "CONTEXT.LOAD": _bounded_depth(nodes.load),
            "CONTEXT.SELECT": _bounded_depth(nodes.select),
            "CONTEXT.UPDATE": _bounded_depth(nodes.update),
            "CONTEXT.COMPRESS": _bounded_depth(nodes.compress),
        },
        concurrency=concurrency,
        # Outputs are built from contexts the operations validated (and the store decoded).
        trusted_outputs=True,
    )
