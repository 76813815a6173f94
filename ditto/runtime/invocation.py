"""One invocation, from admitted input to ``NodeResult``: validate, route, run under a deadline,
and turn every outcome into a result.

This is the runtime's hot path (every ``invoke`` and every graph task goes through
:func:`invoke_route`), so it avoids per-call allocations beyond the result itself and logs only
on failures.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Awaitable
from itertools import count
from random import getrandbits
from time import perf_counter
from typing import TYPE_CHECKING, Any

from ditto.contracts.outcomes import CURRENT
from ditto.contracts.result import NodeResult
from ditto.contracts.retry import RetryPolicy
from ditto.errors import DittoError, ErrorCode, ErrorInfo, InvalidInputError, NoWorkerAvailableError
from ditto.runtime.context import NO_ANSWER, ExecutionScope, Invoker, NodeContext, key_of
from ditto.runtime.deadlines import arm
from ditto.runtime.remote import call_remote
from ditto.runtime.retry import ONCE, retried

if TYPE_CHECKING:
    from ditto.runtime.router import Route

__all__ = ("check_retry", "invoke_route", "new_execution_id")

logger = logging.getLogger("ditto.runtime")

_TIMEOUT = ErrorInfo(ErrorCode.TIMEOUT.value, "the node did not finish before its deadline", True)
_CANCELLED = ErrorInfo(ErrorCode.CANCELLED.value, "the node was cancelled")
_INTERNAL = ErrorInfo(ErrorCode.INTERNAL_ERROR.value, "the node failed with an unexpected error")


class _ExecutionIds:
    """Execution ids: UUID-shaped strings, unique without drawing random bits per call.

    ``str(uuid.uuid4())`` costs ~3 µs here, a tenth of a whole no-op invocation. An id only
    needs to be unique, not unguessable, so each process draws 74 random bits once (again after
    a fork, so a child never repeats its parent's ids) and counts the remaining 48.
    """

    __slots__ = ("counter", "prefix")

    def __init__(self) -> None:
        self.reseed()

    def reseed(self) -> None:
        bits = getrandbits(80)
        # The version (4) and variant (10xx) nibbles of a random UUID, around 74 random bits.
        head = f"{bits >> 48:08x}"
        middle = f"{(bits >> 32) & 0xFFFF:04x}"
        version = f"4{(bits >> 20) & 0xFFF:03x}"
        variant = f"{0x8000 | (bits >> 6) & 0x3FFF:04x}"
        self.prefix = f"{head}-{middle}-{version}-{variant}-"
        self.counter = count(getrandbits(47))

    def next(self) -> str:
        return f"{self.prefix}{next(self.counter) & 0xFFFFFFFFFFFF:012x}"


_ids = _ExecutionIds()
os.register_at_fork(after_in_child=_ids.reseed)
new_execution_id = _ids.next
"""A new execution id (a UUID-shaped string, unique within and across processes)."""


async def invoke_route(
    nested: Invoker,
    route: Route,
    value: Any,
    *,
    deadline: float,
    principal: str | None,
    worker: str | None,
    execution: ExecutionScope | None,
    answer: Any = NO_ANSWER,
    attempt: int = 1,
    execution_id: str | None = None,
    idempotency_key: str | None = None,
    key_scope: str | None = None,
    retry: RetryPolicy | None = None,
) -> NodeResult[Any]:
    """Run one invocation of ``route``'s node type and wrap the outcome.

    Args:
        nested: How the handler's ``ctx.invoke`` reaches the runtime.
        deadline: Absolute time on the event loop's clock (``loop.time()``).
        answer: What ``runtime.resume`` answered, when this call resumes an interrupted task.
        attempt: How many times this call was delivered (a remote worker's redelivery).
        execution_id: The id to report (a remote call keeps its caller's); default a new one.
        idempotency_key: The handler's ``ctx.idempotency_key``; default derived from
            ``key_scope`` and the task (see :func:`~ditto.runtime.context.key_of`).
        key_scope: What a task's key derives from (its checkpoint id); default the run id.
        retry: The call's (or task's) retry policy; ``None``: the route's default (its
            worker's), else one attempt. Each attempt is a new invocation with the call's
            idempotency key (see :mod:`ditto.runtime.retry`).

    Returns a ``NodeResult`` for every outcome of the *node*: invalid input, no capacity, a
    handler error, a deadline, a cancellation from inside. The *caller's* cancellation is not an
    outcome of the node: it propagates unchanged.
    """
    if retry is None:
        retry = route.retry
    if retry is not None and retry.max_attempts > 1:
        return await _retrying(
            retry,
            nested,
            route,
            value,
            deadline,
            principal,
            worker,
            execution,
            answer,
            attempt,
            execution_id,
            idempotency_key,
            key_scope,
        )
    started = perf_counter()
    if execution_id is None:
        execution_id = new_execution_id()
    node = route.node_type
    contract = route.contract
    try:
        node_input = value if contract.input_type is Any else contract.convert_input(value)
        replica = route.pick(worker)
    except (InvalidInputError, NoWorkerAvailableError) as exc:
        return _failed(execution_id, node, exc.to_info(), None, started)

    replica_id = replica.id
    loop = asyncio.get_running_loop()
    now = loop.time()
    if deadline <= now:
        return _timed_out(execution_id, node, replica_id, started)
    if replica.transport is not None:
        if idempotency_key is None:  # the worker's handler gets it with the call
            idempotency_key = key_of(execution, execution_id, key_scope)
        return await call_remote(
            replica,
            route,
            node_input,
            execution_id,
            deadline,
            principal,
            execution,
            started,
            key_of(execution, execution_id, key_scope)
            if idempotency_key is None
            else idempotency_key,
            attempt,
            answer,
        )
    task = asyncio.current_task()
    assert task is not None, "invoke runs inside an asyncio task"
    cancelling = task.cancelling()
    timer = arm(loop, task, deadline, now)
    ctx = NodeContext(
        nested,
        node,
        execution_id,
        replica_id,
        execution,
        principal,
        deadline,
        answer,
        attempt,
        idempotency_key,
        key_scope,
    )
    replica.active += 1
    error: ErrorInfo | None = None
    claim = CURRENT.set(timer)  # stores that commit claim their outcome through it
    try:
        output = await route.handlers[replica_id](node_input, ctx)
    except asyncio.CancelledError:
        if timer.fired:
            timer.fired = False  # our own cancellation came back: consume it
            if task.uncancel() <= cancelling:
                return _timed_out(execution_id, node, replica_id, started)
        if task.cancelling() > cancelling:
            raise  # the caller is being cancelled: never turn that into a result
        return NodeResult(
            execution_id, node, "cancelled", None, _CANCELLED, replica_id, _elapsed(started)
        )
    except DittoError as exc:
        error = exc.to_info()
    except Exception:
        logger.exception("handler for %s on worker %s raised", node, replica_id)
        error = _INTERNAL
    finally:
        CURRENT.reset(claim)
        timer.disarm()
        replica.active -= 1
    if timer.fired:
        # The handler swallowed the deadline's cancellation: whatever it produced is late,
        # unless it claimed the outcome of a commit that was under way (see claim_outcome).
        task.uncancel()
    if task.cancelling() > cancelling:
        # The handler swallowed the caller's cancellation: it still belongs to the caller.
        raise asyncio.CancelledError()
    if (timer.fired or loop.time() >= deadline) and not timer.claimed:
        # Also when the timer could not fire: a handler that blocked the event loop past its
        # deadline delivers a late result, and a late result is a timeout.
        return _timed_out(execution_id, node, replica_id, started)
    if error is None:
        try:
            output = contract.convert_output(output, trusted=replica.definition.trusted_outputs)
        except InvalidInputError as exc:
            error = exc.to_info()
    if error is not None:
        return _failed(execution_id, node, error, replica_id, started)
    return NodeResult(execution_id, node, "success", output, None, replica_id, _elapsed(started))


async def _retrying(
    policy: RetryPolicy,
    nested: Invoker,
    route: Route,
    value: Any,
    deadline: float,
    principal: str | None,
    worker: str | None,
    execution: ExecutionScope | None,
    answer: Any,
    attempt: int,
    execution_id: str | None,
    idempotency_key: str | None,
    key_scope: str | None,
) -> NodeResult[Any]:
    """:func:`invoke_route` under ``policy``: attempts share the key of the work (for a
    top-level call, derived from the first attempt's execution id) and count ``ctx.attempt`` up
    from ``attempt``; a given ``execution_id`` (a remote worker's call) names every attempt.

    The first attempt runs as a call without a policy would (its handler derives the same key
    lazily), so a policy costs a call that succeeds at once one frame more."""
    started = perf_counter()
    loop = asyncio.get_running_loop()

    def run(number: int, attempt_id: str | None, key: str | None) -> Awaitable[NodeResult[Any]]:
        return invoke_route(
            nested,
            route,
            value,
            deadline=policy.attempt_deadline(deadline, loop.time()),
            principal=principal,
            worker=worker,
            execution=execution,
            answer=answer,
            attempt=attempt + number - 1,
            execution_id=attempt_id,
            idempotency_key=key,
            key_scope=key_scope,
            retry=ONCE,
        )

    first_id = new_execution_id() if execution_id is None else execution_id
    first = await run(1, first_id, idempotency_key)
    if first.status == "success":
        return first
    key = key_of(execution, first_id, key_scope) if idempotency_key is None else idempotency_key
    return await retried(
        policy, lambda number: run(number, execution_id, key), deadline, first, started
    )


def _timed_out(
    execution_id: str, node: str, worker_id: str | None, started: float
) -> NodeResult[Any]:
    return NodeResult(execution_id, node, "timeout", None, _TIMEOUT, worker_id, _elapsed(started))


def _failed(
    execution_id: str, node: str, error: ErrorInfo, worker_id: str | None, started: float
) -> NodeResult[Any]:
    return NodeResult(execution_id, node, "failed", None, error, worker_id, _elapsed(started))


def _elapsed(started: float) -> float:
    return (perf_counter() - started) * 1000.0


def check_retry(retry: object) -> None:
    """Raises:
    InvalidInputError: ``retry`` (of an ``invoke`` call) is not a ``RetryPolicy``."""
    if not isinstance(retry, RetryPolicy):
        raise InvalidInputError("retry must be a RetryPolicy or None")
