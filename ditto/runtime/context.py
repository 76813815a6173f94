"""What a handler receives besides its input: where it runs, for whom, until when, and a way to
call other nodes."""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING, Any, Final, NamedTuple, Protocol

import anyio

from ditto.errors import Interrupt

if TYPE_CHECKING:
    from ditto.contracts.result import NodeResult
    from ditto.contracts.retry import RetryPolicy

__all__ = ("NO_ANSWER", "ExecutionScope", "Invoker", "NodeContext", "derived_key", "key_of")

NO_ANSWER: Final = object()
"""The resume value of a call that is not resuming an interrupt (``None`` is a valid answer)."""


class ExecutionScope(NamedTuple):
    """Where an invocation sits in a graph run (``None`` for a top-level ``invoke``)."""

    graph_id: str
    run_id: str
    task_id: str


class Invoker(Protocol):
    """How a handler's nested calls (and a remote worker's received calls) reach the runtime:
    routed again, inside an outer deadline, accepted even while the runtime drains."""

    async def __call__(
        self,
        node_type: str,
        input: Any,
        *,
        timeout: float | None,
        principal: str | None,
        worker: str | None,
        execution: ExecutionScope | None,
        outer_deadline: float | None,
        attempt: int = 1,
        execution_id: str | None = None,
        idempotency_key: str | None = None,
        retry: RetryPolicy | None = None,
        answer: Any = NO_ANSWER,
    ) -> NodeResult[Any]: ...


class NodeContext:
    """The second argument of every handler."""

    __slots__ = (
        "_answer",
        "_invoke",
        "_key",
        "_key_scope",
        "_nested",
        "attempt",
        "deadline",
        "execution",
        "execution_id",
        "node",
        "principal",
        "worker_id",
    )

    def __init__(
        self,
        invoke: Invoker,
        node: str,
        execution_id: str,
        worker_id: str,
        execution: ExecutionScope | None,
        principal: str | None,
        deadline: float | None,
        answer: Any = NO_ANSWER,
        attempt: int = 1,
        idempotency_key: str | None = None,
        key_scope: str | None = None,
    ) -> None:
        self._invoke = invoke
        self._key_scope = key_scope
        self._answer = answer
        self._nested = 0
        self._key = idempotency_key
        self.attempt = attempt
        """1 for a first delivery; a remote worker that takes over the call of a worker that
        died runs it again with ``attempt`` + 1 (at-least-once delivery)."""
        self.node = node
        """The node type being run."""
        self.execution_id = execution_id
        """The id this invocation's ``NodeResult`` will carry."""
        self.worker_id = worker_id
        """The replica running the handler."""
        self.execution = execution
        """Graph id, run id and task id when the node runs inside a graph, else ``None``."""
        self.principal = principal
        """Who the invocation acts for, as passed to ``invoke(..., principal=...)``."""
        self.deadline = deadline
        """Absolute deadline on the ``anyio.current_time()`` clock, or ``None``."""

    @property
    def idempotency_key(self) -> str:
        """*The* key to deduplicate this call's side effects by: the same for every attempt of
        the same work. A task of a checkpointed run keeps it across resumes, in any process; a
        remote call across redeliveries; a nested call (``ctx.invoke``) derives its own from its
        parent's and its place among the parent's nested calls. At-least-once delivery plus
        this key is how side effects become exactly-once. Outside a checkpoint a task's key is
        unique to its run; a top-level ``invoke`` uses its execution id. (Computed on first
        read: a handler that never reads it pays nothing.)"""
        key = self._key
        if key is None:
            key = self._key = key_of(self.execution, self.execution_id, self._key_scope)
        return key

    @property
    def resumed(self) -> bool:
        """True when this call resumes an interrupted task (``runtime.resume``)."""
        return self._answer is not NO_ANSWER

    @property
    def resume_value(self) -> Any:
        """The answer given to ``runtime.resume`` when this call resumes an interrupted task,
        else ``None`` (see :attr:`resumed` to tell an answer of ``None`` apart)."""
        return None if self._answer is NO_ANSWER else self._answer

    def interrupt(self, payload: Any = None) -> Any:
        """Ask a person: the first time, raise :class:`~ditto.errors.Interrupt` with ``payload``
        (the run pauses and checkpoints); when the run is resumed, return the answer.

        Example::

            async def approve(draft, ctx):
                answer = ctx.interrupt({"question": "send this email?", "draft": draft})
                return {"sent": answer == "yes"}
        """
        if self._answer is NO_ANSWER:
            raise Interrupt(payload)
        return self._answer

    def remaining(self) -> float | None:
        """Seconds left before the deadline (never negative), or ``None`` when unbounded."""
        if self.deadline is None:
            return None
        return max(0.0, self.deadline - anyio.current_time())

    async def invoke(
        self,
        node_type: str,
        input: Any,
        *,
        timeout: float | None = None,
        worker: str | None = None,
        retry: RetryPolicy | None = None,
    ) -> NodeResult[Any]:
        """Invoke another node from inside a handler.

        The nested call is routed again (it may run on another replica), inherits this call's
        execution scope, principal and deadline (``timeout`` can only shorten it), and is still
        accepted while the runtime drains during ``close()``. ``retry`` as for
        ``runtime.invoke`` (default: the node type's worker default, else one attempt).
        """
        self._nested += 1
        return await self._invoke(
            node_type,
            input,
            timeout=timeout,
            principal=self.principal,
            worker=worker,
            execution=self.execution,
            outer_deadline=self.deadline,
            idempotency_key=derived_key(self.idempotency_key, node_type, str(self._nested)),
            retry=retry,
        )


def key_of(execution: ExecutionScope | None, execution_id: str, key_scope: str | None) -> str:
    """The idempotency key of a call (see :attr:`NodeContext.idempotency_key`): a task's derives
    from ``key_scope`` (a checkpoint id, the same across resumes; default the run id) and its
    task id; a top-level call's is its execution id."""
    if execution is None:
        return execution_id
    return derived_key(key_scope or execution.run_id, execution.task_id)


def derived_key(*parts: str) -> str:
    """A stable idempotency key from ``parts`` (128 bits of SHA-256, hex)."""
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:32]
