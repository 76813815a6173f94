"""The engine under the ``Ditto`` facade: the registry, the limits, admission and close, the
plans it ran, the checkpoint store and the stall watchdog, and the operations built on them.

The facade (:mod:`ditto.runtime.runtime`) documents the public API and delegates here. The
runtime's parts never receive the facade nor this object whole where a narrower collaborator
does: a handler's ``ctx`` gets :meth:`Engine.invoke_nested` (an
:class:`~ditto.runtime.context.Invoker`), a graph run, a loop and a stream get this engine as the
small protocol each declares (:class:`~ditto.runtime.runs.RunServices`,
:class:`~ditto.runtime.loop_runner.LoopServices`, :class:`~ditto.runtime.streams.StreamServices`),
and a remote worker's server gets :meth:`invoke_nested` only.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import anyio.to_thread

from ditto.errors import InvalidInputError
from ditto.runtime.checkpoints.envelope import plain_json
from ditto.runtime.checkpoints.graphs import GraphCheckpoint, KnownPlans
from ditto.runtime.checkpoints.holding import HeldLease, hold
from ditto.runtime.checkpoints.traced import traced
from ditto.runtime.context import NO_ANSWER, ExecutionScope
from ditto.runtime.invocation import check_retry, invoke_route
from ditto.runtime.lifecycle import Lifecycle
from ditto.runtime.limits import RuntimeLimits
from ditto.runtime.registry import WorkerHandle, WorkerRegistry
from ditto.runtime.runs import (
    ResultObserver,
    RunRequest,
    checked_request,
    checked_wait,
    execute_run,
    seconds,
    stored_result,
)
from ditto.runtime.tracing import runtime_tracer
from ditto.runtime.watchdog import LoopWatchdog, handler_codes

if TYPE_CHECKING:
    from ditto.contracts.node_types import NodeContract
    from ditto.contracts.result import NodeResult
    from ditto.contracts.retry import RetryPolicy
    from ditto.graph.builder import Graph
    from ditto.graph.plan import Plan
    from ditto.runtime.checkpoints.port import CheckpointStore
    from ditto.runtime.loops import LoopDefinition, LoopObserver
    from ditto.runtime.results import RunResult
    from ditto.runtime.router import Route
    from ditto.runtime.transports.port import Transport
    from ditto.runtime.worker import WorkerDefinition

__all__ = ("Engine",)


class Engine:
    """A runtime's state and operations (see the module docstring).

    Args:
        limits: The scheduling limits in force.
        checkpoints: Where checkpointed runs and loops keep their state; default: an
            in-process store created on first use. Closed when the engine closes.
    """

    __slots__ = (
        "_checkpoints",
        "_watchdog",
        "_watching",
        "default_timeout",
        "lease_ttl",
        "life",
        "limits",
        "plans",
        "registry",
        "tracer",
    )

    def __init__(self, limits: RuntimeLimits, checkpoints: CheckpointStore | None) -> None:
        self.limits = limits
        self.registry = WorkerRegistry()
        self.plans = KnownPlans()
        self.life = Lifecycle()
        self.default_timeout = limits.timeout_ms / 1000.0
        """Seconds of every call's deadline at most: a call, a task or a run may shorten it."""
        self.lease_ttl = limits.checkpoint_lease_ms / 1000.0
        """Seconds a checkpoint's lease outlives its last renewal."""
        self.tracer = runtime_tracer(limits.tracing)
        """Where runs and tasks record their spans; ``None`` when tracing is off."""
        self._checkpoints = None if checkpoints is None else traced(checkpoints, self.tracer)
        stall_ms = limits.stall_warning_ms
        codes = lambda: handler_codes(self.registry.definitions)  # noqa: E731
        self._watchdog = None if stall_ms is None else LoopWatchdog(stall_ms / 1000, codes)
        self._watching = self._watchdog is None  # started by the first call (it needs the loop)

    @property
    def checkpoints(self) -> CheckpointStore:
        """The checkpoint store (in-process unless another was given; traced when tracing)."""
        if self._checkpoints is None:
            from ditto.runtime.checkpoints.inprocess import InProcessCheckpointStore

            self._checkpoints = traced(InProcessCheckpointStore(), self.tracer)
        return self._checkpoints

    # ----------------------------------------------------------------- registration

    def register(
        self, worker: WorkerDefinition, *, replicas: int = 1, id: str | None = None
    ) -> WorkerHandle:
        self.life.check_open()
        return self.registry.register(worker, replicas=replicas, id=id)

    def register_remote(
        self,
        node_types: Iterable[str | NodeContract],
        *,
        transport: Transport,
        concurrency: int | None,
        id: str,
    ) -> WorkerHandle:
        self.life.check_open()
        return self.registry.register_remote(
            node_types, transport=transport, concurrency=concurrency, id=id
        )

    # ----------------------------------------------------------------- invoke

    def _watch(self) -> None:
        if not self._watching:
            assert self._watchdog is not None
            self._watchdog.start()
            self._watching = True

    def _prepare(
        self,
        node_type: str,
        timeout: float | None,
        worker: str | None,
        outer_deadline: float | None,
        retry: RetryPolicy | None,
    ) -> tuple[Route, float]:
        """The route and the absolute deadline of one call (raises for misuse)."""
        self._watch()
        if retry is not None:
            check_retry(retry)
        route = self.registry.route(node_type)
        if worker is not None:
            route.check_pin(worker)
        limit = self.default_timeout  # runtime.timeout_ms: a call's timeout only shortens it
        deadline = asyncio.get_running_loop().time() + (
            limit if timeout is None else min(limit, seconds(timeout, "timeout"))
        )
        if outer_deadline is not None and outer_deadline < deadline:
            deadline = outer_deadline
        return route, deadline

    async def invoke(
        self,
        node_type: str,
        input: Any,
        *,
        timeout: float | None,
        principal: str | None,
        worker: str | None,
        retry: RetryPolicy | None = None,
    ) -> NodeResult[Any]:
        """A top-level call: refused once closing, counted until it ends."""
        self.life.check_open()
        route, deadline = self._prepare(node_type, timeout, worker, None, retry)
        self.life.admit()
        try:
            return await invoke_route(
                self.invoke_nested,
                route,
                input,
                deadline=deadline,
                principal=principal,
                worker=worker,
                execution=None,
                retry=retry,
            )
        finally:
            self.life.release()

    async def invoke_nested(
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
    ) -> NodeResult[Any]:
        """A nested call (``ctx.invoke``), or a remote worker running a call it received:
        accepted even while the runtime drains (an :class:`~ditto.runtime.context.Invoker`)."""
        route, deadline = self._prepare(node_type, timeout, worker, outer_deadline, retry)
        return await invoke_route(
            self.invoke_nested,
            route,
            input,
            deadline=deadline,
            principal=principal,
            worker=worker,
            execution=execution,
            attempt=attempt,
            execution_id=execution_id,
            idempotency_key=idempotency_key,
            retry=retry,
            answer=answer,
        )

    # ----------------------------------------------------------------- run

    def request(
        self,
        plan: Graph | Plan,
        run_input: Any,
        concurrency: int | None,
        timeout: float | None,
        principal: str | None,
    ) -> RunRequest:
        """Check a run's arguments before anything runs."""
        self.life.check_open()
        limit = concurrency if concurrency is not None else self.limits.graph_concurrency
        return checked_request(self.registry, plan, run_input, limit, timeout, principal)

    async def lease(self, checkpoint_id: str, wait: float | None) -> HeldLease:
        """The lease of ``checkpoint_id``, renewed until released (see ``hold``)."""
        return await hold(self.checkpoints, checkpoint_id, ttl=self.lease_ttl, wait=wait)

    async def open_checkpoint(
        self, request: RunRequest, checkpoint_id: str, wait: float | None = None
    ) -> GraphCheckpoint:
        """The run's checkpoint, its lease held (see :meth:`GraphCheckpoint.open`);
        :meth:`execute` gives the lease up at the end of the run."""
        plan = request.plan
        state = GraphCheckpoint(self.checkpoints, checkpoint_id)
        await state.open(
            await self.lease(checkpoint_id, wait),
            plan,
            self.plans.remember(plan),
            request.run_input,
            request.principal,
            self.registry.contracts,
        )
        return state

    async def execute(
        self, request: RunRequest, observe: ResultObserver | None = None
    ) -> RunResult:
        """Run a checked request to its end (admitted as top-level work)."""
        self.life.check_open()
        self._watch()
        if observe is not None:
            request.observe = observe
        self.life.admit()
        try:
            return await execute_run(self, request)
        finally:
            self.life.release()
            if request.checkpoint is not None:
                await request.checkpoint.release()

    async def run(
        self,
        plan: Graph,
        run_input: Any = None,
        *,
        concurrency: int | None = None,
        timeout: float | None = None,
        principal: str | None = None,
        checkpoint: str | None = None,
        wait: float | None = None,
        key_scope: str | None = None,
    ) -> RunResult:
        """``Ditto.run``; also what a loop runs each graph with (``key_scope``: what the tasks'
        idempotency keys derive from, see :class:`~ditto.runtime.runs.RunRequest`)."""
        request = self.request(plan, run_input, concurrency, timeout, principal)
        request.key_scope = key_scope
        wait = checked_wait(wait)
        if checkpoint is not None:
            request.checkpoint = await self.open_checkpoint(request, checkpoint, wait)
            if request.checkpoint.status == "completed":
                return stored_result(request.plan, request.checkpoint)
        return await self.execute(request)

    async def resume(
        self,
        checkpoint_id: str,
        answer: Any,
        *,
        plan: Graph | None,
        concurrency: int | None,
        timeout: float | None,
        wait: float | None = None,
    ) -> RunResult:
        """``Ditto.resume``."""
        self.life.check_open()
        wait = checked_wait(wait)
        if answer is not NO_ANSWER:  # an answer may come back in another process: plain JSON
            await anyio.to_thread.run_sync(plain_json, answer, "the answer to an interrupt")
        state = GraphCheckpoint(self.checkpoints, checkpoint_id)
        state.lease = await self.lease(checkpoint_id, wait)
        try:
            request = await self._resumable(state, answer, plan, concurrency, timeout)
        except BaseException:
            await state.release()
            raise
        if state.status == "completed":  # its result, and nothing runs
            await state.release()
            return stored_result(request.plan, state)
        return await self.execute(request)

    async def _resumable(
        self,
        state: GraphCheckpoint,
        answer: Any,
        plan: Graph | None,
        concurrency: int | None,
        timeout: float | None,
    ) -> RunRequest:
        """The request that continues ``state`` (its lease held); raises for a checkpoint that
        cannot be resumed as asked."""
        await state.load_existing(self.registry.contracts)
        run_input, principal = state.run_input, state.principal
        request = self.request(
            self.plans.of(state) if plan is None else plan,
            run_input,
            concurrency,
            timeout,
            principal,
        )
        state.check(request.plan, self.plans.remember(request.plan), run_input, principal)
        request.checkpoint = state
        if answer is not NO_ANSWER and (state.status != "interrupted" or not state.interrupts):
            # An answer nothing waits for would be dropped: say so instead of returning the
            # run's old outcome as if the answer had been taken.
            raise InvalidInputError(
                f"checkpoint {state.id!r} is {state.status}: no interrupt waits for an "
                "answer (resume it without one to continue or read its result)"
            )
        if answer is not NO_ANSWER:
            request.answers = {interrupt["task"]: answer for interrupt in state.interrupts}
        return request

    async def loop(
        self,
        definition: LoopDefinition,
        loop_input: Any,
        *,
        concurrency: int | None,
        timeout: float | None,
        principal: str | None,
        checkpoint: str | None,
        on_event: LoopObserver | None,
        wait: float | None = None,
    ) -> Any:
        """``Ditto.loop``."""
        from ditto.runtime.loop_runner import check_loop, run_loop

        self.life.check_open()
        options = check_loop(
            self,
            definition,
            concurrency=concurrency,
            timeout=timeout,
            principal=principal,
            checkpoint=checkpoint,
            wait=wait,
        )
        return await run_loop(self, definition, loop_input, options, on_event)

    # ----------------------------------------------------------------- close

    async def close(self) -> None:
        """``Ditto.close``."""
        await self.life.close(self._stop_watching, self._dispose)

    def _stop_watching(self) -> None:
        if self._watchdog is not None:
            self._watchdog.stop()

    async def _dispose(self) -> list[Exception]:
        failures = await self.registry.dispose_all()
        if self._checkpoints is not None:
            try:
                await self._checkpoints.aclose()
            except Exception as exc:
                exc.add_note("while closing the checkpoint store")
                failures.append(exc)
        return failures
