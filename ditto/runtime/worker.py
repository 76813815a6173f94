"""Worker definitions: a worker type, the node handlers it implements, its concurrency limit and
its cleanup. A definition holds no runtime state; registering it creates replicas."""

from __future__ import annotations

import inspect
import typing
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from ditto.contracts.node_types import NodeContract
from ditto.contracts.retry import RetryPolicy
from ditto.errors import WorkerDefinitionError
from ditto.runtime.offload import ProcessPool, threaded

if TYPE_CHECKING:
    from ditto.runtime.context import NodeContext

__all__ = ("Dispose", "Handler", "NodeSpec", "WorkerDefinition", "define_worker")

Handler = Callable[[Any, "NodeContext"], Awaitable[Any]] | Callable[[Any, "NodeContext"], Any]
"""``async def handler(input, ctx) -> output``, or a plain ``def`` run on a worker thread (see
:mod:`ditto.runtime.offload`). Raise :class:`~ditto.errors.DittoError` for a business failure;
the runtime turns it into a ``failed`` result with the error's code."""

Dispose = Callable[[], Awaitable[None] | None]
"""Cleanup called once when the runtime closes (sync or async)."""


@dataclass(frozen=True, slots=True)
class NodeSpec:
    """A handler with an explicit contract, for handlers whose annotations cannot say it.

    Without a ``NodeSpec`` the contract is read from the handler's annotations: the first
    parameter's type is the input type and the return type is the output type.
    """

    handler: Handler | Callable[[Any], Any]
    input_type: Any = Any
    output_type: Any = Any
    cpu_bound: bool = False
    """Run ``handler(input)`` (a module-level ``def``; picklable input and output) in the
    worker's process pool, off the interpreter lock the event loop needs."""


@dataclass(frozen=True, slots=True)
class BoundNode:
    """A node type's contract together with the (async) handler that implements it."""

    contract: NodeContract
    handler: Callable[[Any, NodeContext], Awaitable[Any]]


@dataclass(frozen=True, slots=True, eq=False)
class WorkerDefinition:
    """What :func:`define_worker` returns; register it with ``create_ditto(workers=[...])`` or
    ``runtime.register``. Compared by identity: one definition is disposed once per runtime."""

    type: str
    nodes: Mapping[str, BoundNode]
    concurrency: int | None
    dispose: Dispose | None
    trusted_outputs: bool = False
    """Output Structs of the right type are passed on unchecked (see ``define_worker``)."""
    retry: RetryPolicy | None = None
    """The default retry policy of this worker's node types (see ``define_worker``)."""

    @property
    def node_types(self) -> frozenset[str]:
        """The node types this worker implements."""
        return frozenset(self.nodes)


def define_worker(
    type: str,
    handlers: Mapping[str, Handler | NodeSpec],
    *,
    concurrency: int | None = None,
    dispose: Dispose | None = None,
    trusted_outputs: bool = False,
    retry: RetryPolicy | None = None,
) -> WorkerDefinition:
    """Define a worker.

    Args:
        type: Free-form role of the worker (``"memory"``, ``"context"``); the default prefix of
            its replica ids.
        handlers: Node type -> ``async def handler(input, ctx)``, a plain ``def`` (run on a
            worker thread), or a :class:`NodeSpec` (``cpu_bound=True``: a process pool).
        concurrency: Maximum invocations one replica runs at once; ``None`` is unlimited. Also
            the size of the worker's process pool (default: the CPU count).
        dispose: Called once when the runtime closes, after accepted work has drained.
        trusted_outputs: Pass output Structs of the node's output type on unchecked. Only for
            workers that build every output from values they validated themselves: checking
            copies the output, which for pages of records is most of a call's cost.
        retry: The default :class:`~ditto.contracts.retry.RetryPolicy` of these node types,
            for every call routed to them in this runtime; a call's (``invoke(..., retry=)``)
            or a graph task's own policy wins. ``None``: one attempt. Applied by the runtime
            the worker is registered with: a worker served remotely (``ditto worker serve``)
            retries on its own host, within the call's deadline.

    Returns:
        An immutable :class:`WorkerDefinition`.

    Raises:
        WorkerDefinitionError: ``INVALID_WORKER`` for an empty type, no handlers, a bad node type,
            a handler that is not callable (or an ``async`` one declared CPU-bound),
            unresolvable annotations, a bad concurrency or a ``retry`` that is not a
            ``RetryPolicy``.
    """
    if not isinstance(type, str) or not type.strip():
        raise WorkerDefinitionError("a worker type must be a non-empty string")
    if not isinstance(handlers, Mapping) or not handlers:
        raise WorkerDefinitionError(f"worker {type!r} must implement at least one node type")
    if concurrency is not None and (
        isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1
    ):
        raise WorkerDefinitionError(
            f"worker {type!r}: concurrency must be a positive integer or None"
        )
    if dispose is not None and not callable(dispose):
        raise WorkerDefinitionError(f"worker {type!r}: dispose must be callable")
    if retry is not None and not isinstance(retry, RetryPolicy):
        raise WorkerDefinitionError(f"worker {type!r}: retry must be a RetryPolicy or None")
    cpu_bound = any(isinstance(spec, NodeSpec) and spec.cpu_bound for spec in handlers.values())
    pool = ProcessPool(concurrency) if cpu_bound else None
    nodes = {node_type: _bind(type, node_type, spec, pool) for node_type, spec in handlers.items()}
    return WorkerDefinition(
        type,
        MappingProxyType(nodes),
        concurrency,
        _with_pool(dispose, pool),
        trusted_outputs,
        retry,
    )


def _bind(
    worker_type: str, node_type: str, spec: Handler | NodeSpec, pool: ProcessPool | None
) -> BoundNode:
    handler: Any  # which kind of callable it is is checked below, at run time
    if isinstance(spec, NodeSpec):
        handler, input_type, output_type = spec.handler, spec.input_type, spec.output_type
    else:
        handler = spec
        input_type, output_type = _annotated_contract(worker_type, node_type, handler)
    contract = NodeContract(node_type, input_type, output_type)
    if not callable(handler):
        raise WorkerDefinitionError(
            f"worker {worker_type!r}: the handler for {node_type} must be a function taking "
            "(input, ctx)"
        )
    if isinstance(spec, NodeSpec) and spec.cpu_bound:
        if _is_async_callable(handler) or pool is None:
            raise WorkerDefinitionError(
                f"worker {worker_type!r}: the CPU-bound handler for {node_type} must be a plain "
                "module-level function taking (input)"
            )
        return BoundNode(contract, pool.wrap(handler))
    if not _is_async_callable(handler):
        return BoundNode(contract, threaded(handler))
    return BoundNode(contract, handler)


def _with_pool(dispose: Dispose | None, pool: ProcessPool | None) -> Dispose | None:
    """``dispose``, then the process pool's shutdown."""
    if pool is None:
        return dispose

    async def dispose_all() -> None:
        try:
            if dispose is not None:
                outcome = dispose()
                if inspect.isawaitable(outcome):
                    await outcome
        finally:
            pool.shutdown()

    return dispose_all


def _annotated_contract(worker_type: str, node_type: str, handler: Handler) -> tuple[Any, Any]:
    try:
        hints = typing.get_type_hints(handler)
        parameters = list(inspect.signature(handler).parameters.values())
    except (NameError, TypeError, ValueError) as exc:
        raise WorkerDefinitionError(
            f"worker {worker_type!r}: cannot read the annotations of the {node_type} handler "
            f"({exc}); pass NodeSpec(handler, input_type=..., output_type=...) instead"
        ) from exc
    input_type = hints.get(parameters[0].name, Any) if parameters else Any
    output_type = hints.get("return", Any)
    return input_type, output_type


def _is_async_callable(handler: object) -> bool:
    return inspect.iscoroutinefunction(handler) or inspect.iscoroutinefunction(
        getattr(handler, "__call__", None)  # noqa: B004 - async callable objects count too
    )
