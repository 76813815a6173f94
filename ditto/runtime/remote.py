"""Node types served by workers in other processes: the pool a runtime routes to when no local
replica has room, and one call through it, from validated input to ``NodeResult``.

The input was validated by the caller (``invoke_route`` converts it before routing), so
``INVALID_INPUT`` never crosses the wire; the worker validates it again. The output is decoded
with this side's contract, so a worker cannot hand the caller an off-contract value. A call that
times out here, or is cancelled, sends a cancel notice; whatever the worker did meanwhile is not
rolled back (as for any timeout, the outcome on the worker is unknown).
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Iterable
from time import perf_counter
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

import msgspec

from ditto.contracts.node_types import NodeContract
from ditto.contracts.result import NodeResult
from ditto.errors import (
    DittoError,
    ErrorCode,
    ErrorInfo,
    NoWorkerAvailableError,
    WorkerDefinitionError,
)
from ditto.runtime.context import NO_ANSWER
from ditto.runtime.transports.envelope import CallEnvelope
from ditto.runtime.worker import BoundNode, WorkerDefinition

if TYPE_CHECKING:
    from ditto.contracts.node_types import NodeTypeRegistry
    from ditto.runtime.context import ExecutionScope, NodeContext
    from ditto.runtime.router import Replica, Route
    from ditto.runtime.transports.port import Transport

__all__ = ("call_remote", "remote_definition")

_TIMEOUT = ErrorInfo(
    ErrorCode.TIMEOUT.value, "the remote node did not reply before its deadline", True
)
_WAITED = ErrorInfo(
    ErrorCode.TIMEOUT.value,
    "the call's deadline passed while it waited for a free remote slot (nothing was sent)",
    True,
)
_QUEUE_FULL = ErrorInfo(
    ErrorCode.QUEUE_FULL.value,
    "too many calls are already waiting for a free slot of this remote pool",
    True,
)
_encode = msgspec.msgpack.Encoder().encode

MAX_WAITING = 10_000
"""Calls of one remote pool waiting for a slot (the pool at its ``concurrency``) before new
ones get ``QUEUE_FULL`` — the default ``runtime.remote.max_pending``."""


def remote_definition(
    nodes: Iterable[str | NodeContract],
    contracts: NodeTypeRegistry,
    transport: Transport,
    concurrency: int | None,
) -> WorkerDefinition:
    """The worker definition standing for a remote pool: its contracts (given, else the one
    already registered for the node type, else unchecked), and the transport closed with the
    runtime.

    Raises:
        WorkerDefinitionError: No node types, or an invalid one.
    """
    bound: dict[str, BoundNode] = {}
    for node in nodes:
        if isinstance(node, NodeContract):
            contract = node
        elif isinstance(node, str):
            contract = contracts.get(node) or NodeContract(node)
        else:
            raise WorkerDefinitionError("remote node types are strings or NodeContracts")
        bound[contract.node_type] = BoundNode(contract, _never_local)
    if not bound:
        raise WorkerDefinitionError("register_remote needs at least one node type")
    if concurrency is not None and (
        isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1
    ):
        raise WorkerDefinitionError("concurrency must be a positive integer or None")
    return WorkerDefinition("remote", MappingProxyType(bound), concurrency, transport.aclose)


async def _never_local(value: Any, ctx: NodeContext) -> Any:  # pragma: no cover - routing
    raise AssertionError("a remote pool's calls go through its transport")


async def call_remote(
    replica: Replica,
    route: Route,
    node_input: Any,
    execution_id: str,
    deadline: float,
    principal: str | None,
    execution: ExecutionScope | None,
    started: float,
    idempotency_key: str,
    attempt: int = 1,
    answer: Any = NO_ANSWER,
) -> NodeResult[Any]:
    """One call through ``replica``'s transport (``deadline`` on the event loop's clock;
    ``attempt``: which attempt of a retried call this is, the handler's ``ctx.attempt``;
    ``answer``: what ``runtime.resume`` answered, when the call resumes an interrupted task,
    sent with it for the handler's ``ctx.interrupt`` to return)."""
    transport = replica.transport
    assert transport is not None
    node = route.node_type
    try:
        encoded = _encode(node_input)
        answered = None if answer is NO_ANSWER else (msgspec.Raw(_encode(answer)),)
    except (TypeError, ValueError, OverflowError, RecursionError) as exc:
        # What a local handler's contract would refuse, refused before anything is sent: an
        # input the wire cannot carry (a lone surrogate, an int past 64 bits, a set or an
        # object msgpack has no type for, nesting past the recursion limit).
        problem = ErrorInfo(ErrorCode.INVALID_INPUT.value, _unsendable(node, exc))
        return _result(execution_id, node, "failed", None, problem, replica.id, started)
    refused = await _take_slot(replica, deadline)
    if refused is not None:
        status = "timeout" if refused is _WAITED else "failed"
        return _result(execution_id, node, status, None, refused, replica.id, started)
    try:
        remaining = deadline - asyncio.get_running_loop().time()
        envelope = CallEnvelope(
            execution_id,
            node,
            msgspec.Raw(encoded),
            time.time() + remaining,
            principal,
            None if execution is None else (execution[0], execution[1], execution[2]),
            attempt,
            transport.reply_to,
            idempotency_key,
            answer=answered,
        )
        reply = await transport.call(envelope, remaining)
    except TimeoutError:
        return _result(execution_id, node, "timeout", None, _TIMEOUT, replica.id, started)
    except (NoWorkerAvailableError, DittoError) as exc:
        return _result(execution_id, node, "failed", None, exc.to_info(), replica.id, started)
    finally:
        _release_slot(replica)
    output = None
    error = reply.error
    if reply.status == "success":
        try:
            output = msgspec.msgpack.decode(reply.output, type=route.contract.output_type)
        except (msgspec.DecodeError, msgspec.ValidationError):
            return _result(
                execution_id,
                node,
                "failed",
                None,
                ErrorInfo(
                    ErrorCode.INVALID_OUTPUT.value,
                    f"the remote worker's {node} output does not match its contract",
                ),
                reply.worker_id,
                started,
            )
    elif error is None:
        error = ErrorInfo(ErrorCode.INTERNAL_ERROR.value, f"the remote node ended {reply.status}")
    return _result(
        execution_id,
        node,
        reply.status,
        output,
        error,
        reply.worker_id,
        started,
        reply.queue_ms,
        reply.run_ms,
    )


def _unsendable(node: str, exc: BaseException) -> str:
    """Why an input cannot go to a remote worker, without echoing its values."""
    if isinstance(exc, UnicodeError):
        why = "it holds text that is not valid Unicode (a lone surrogate)"
    elif isinstance(exc, OverflowError):
        why = "it holds an integer outside the signed or unsigned 64-bit range"
    elif isinstance(exc, RecursionError):
        why = "it is nested too deeply"
    else:  # msgspec names the type it cannot encode ("Encoding objects of type set ...")
        why = str(exc).split(" - ")[0][:200] or type(exc).__name__
    return f"invalid input for {node}: it cannot be sent to a remote worker: {why}"


async def _take_slot(replica: Replica, deadline: float) -> ErrorInfo | None:
    """Count the call in ``replica``'s limit, waiting first come, first served while the pool
    is at it (the deadline still running); why not, when it cannot: the deadline passed while
    it waited (:data:`_WAITED`), or :data:`MAX_WAITING` calls already wait (``QUEUE_FULL``)."""
    limit = replica.limit
    waiting = replica.waiting
    if limit is None or (replica.active < limit and not waiting):
        replica.active += 1
        return None
    if len(waiting) >= MAX_WAITING:
        # Calls that gave up stay in the queue until a release skips them (removing each as
        # it leaves is O(n): 10,000 timing out together would hold the loop for seconds).
        # Count only the live ones, dropping the others now (O(n), only while it is full).
        replica.waiting = waiting = deque(turn for turn in waiting if not turn.done())
        if len(waiting) >= MAX_WAITING:
            return _QUEUE_FULL
    turn: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    waiting.append(turn)
    try:
        async with asyncio.timeout_at(deadline):
            await turn  # the slot is handed over: ``active`` already counts this call
    except BaseException as exc:
        if turn.done() and not turn.cancelled():
            _release_slot(replica)  # handed over just as the call left: pass it on
        else:
            turn.cancel()  # left in the queue: the next release skips it
        if isinstance(exc, TimeoutError):
            return _WAITED
        raise
    return None


def _release_slot(replica: Replica) -> None:
    """Hand the slot to the oldest waiting call, if any; else free it."""
    waiting = replica.waiting
    while waiting:
        turn = waiting.popleft()
        if not turn.done():
            turn.set_result(None)
            return
    replica.active -= 1


def _result(
    execution_id: str,
    node: str,
    status: Any,
    output: Any,
    error: ErrorInfo | None,
    worker_id: str,
    started: float,
    queue_ms: float | None = None,
    run_ms: float | None = None,
) -> NodeResult[Any]:
    return NodeResult(
        execution_id,
        node,
        status,
        output,
        error,
        worker_id,
        (perf_counter() - started) * 1000.0,
        queue_ms=queue_ms,
        run_ms=run_ms,
    )
