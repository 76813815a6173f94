"""The ``Ditto`` runtime: registration, ``invoke``, ``run`` and ``close``."""

from __future__ import annotations

import asyncio
import inspect
import math
from collections.abc import Iterable
from time import perf_counter
from types import TracebackType
from typing import Any, Self

import anyio

from ditto.config.settings import Settings
from ditto.contracts.node_types import NodeTypeRegistry
from ditto.contracts.result import NodeResult
from ditto.errors import (
    InvalidInputError,
    RuntimeClosedError,
    UnknownNodeError,
    WorkerCleanupError,
    WorkerDefinitionError,
)
from ditto.graph.builder import Graph, Task
from ditto.runtime.context import ExecutionScope
from ditto.runtime.invocation import invoke_route, new_execution_id
from ditto.runtime.results import GraphRunError, RunResult
from ditto.runtime.router import Replica, Route, WorkerInfo
from ditto.runtime.scheduler import execute_plan
from ditto.runtime.watchdog import LoopWatchdog, handler_codes
from ditto.runtime.worker import WorkerDefinition

__all__ = ("Ditto", "WorkerHandle", "create_ditto")


class WorkerHandle:
    """What :meth:`Ditto.register` returns: the ids of the new replicas, and a switch to pause
    routing to them."""

    __slots__ = ("_replicas", "ids")

    def __init__(self, replicas: list[Replica]) -> None:
        self._replicas = tuple(replicas)
        self.ids: tuple[str, ...] = tuple(replica.id for replica in replicas)
        """Replica ids, usable as ``worker=`` pins."""

    def set_available(self, available: bool) -> None:
        """Pause (``False``) or resume (``True``) routing to these replicas. Calls already running
        finish normally."""
        for replica in self._replicas:
            replica.available = available


class Ditto:
    """A runtime: routes node invocations to registered workers and runs graphs.

    Create it with :func:`create_ditto` and use it as an async context manager, which closes it.
    """

    def __init__(self, settings: Settings | None = None) -> None:
        self.settings = settings if settings is not None else Settings()
        """The effective configuration (library defaults when none was given)."""
        self._contracts = NodeTypeRegistry()
        self._routes: dict[str, Route] = {}
        self._replicas: dict[str, Replica] = {}
        self._definitions: list[WorkerDefinition] = []
        self._id_counters: dict[str, int] = {}
        self._default_timeout = self.settings.runtime.timeout_ms / 1000.0
        self._inflight = 0
        self._drained: anyio.Event | None = None
        self._closing = False
        self._closed: anyio.Event | None = None
        self._close_error: BaseException | None = None
        stall_ms = self.settings.runtime.stall_warning_ms
        self._watchdog = (
            None
            if stall_ms is None
            else LoopWatchdog(stall_ms / 1000, lambda: handler_codes(self._definitions))
        )
        self._watching = self._watchdog is None  # started by the first call (it needs the loop)

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.close()

    # ----------------------------------------------------------------- registration

    def register(
        self, worker: WorkerDefinition, *, replicas: int = 1, id: str | None = None
    ) -> WorkerHandle:
        """Register ``replicas`` instances of ``worker``.

        Each replica has its own concurrency limit; all share the definition's handlers, and the
        definition's ``dispose`` runs once when the runtime closes.

        Args:
            worker: A definition from :func:`~ditto.runtime.worker.define_worker`.
            replicas: How many replicas to add (>= 1).
            id: Replica id for one replica, or the prefix ``id-1``, ``id-2``... for several;
                default ``<type>-<n>``.

        Raises:
            RuntimeClosedError: The runtime is closing.
            WorkerDefinitionError: ``INVALID_WORKER`` for a bad replica count, a duplicate id or
                a node type already registered with another contract.
        """
        if self._closing:
            raise RuntimeClosedError()
        if not isinstance(worker, WorkerDefinition):
            raise WorkerDefinitionError("register() takes a definition from define_worker()")
        if isinstance(replicas, bool) or not isinstance(replicas, int) or replicas < 1:
            raise WorkerDefinitionError("replicas must be a positive integer")
        if id is not None and (not isinstance(id, str) or not id.strip()):
            raise WorkerDefinitionError("a worker id must be a non-empty string")
        ids = self._replica_ids(worker.type, replicas, id)
        for replica_id in ids:
            if replica_id in self._replicas:
                raise WorkerDefinitionError(f"worker id {replica_id!r} is already registered")
        for bound in worker.nodes.values():
            self._contracts.check(bound.contract)  # every contract before anything changes
        for bound in worker.nodes.values():
            self._contracts.add(bound.contract)
        created = [Replica(replica_id, worker) for replica_id in ids]
        for replica in created:
            self._replicas[replica.id] = replica
            for node_type, bound in worker.nodes.items():
                route = self._routes.get(node_type)
                if route is None:
                    route = self._routes[node_type] = Route(bound.contract)
                route.add(replica, bound.handler)
        if not any(known is worker for known in self._definitions):
            self._definitions.append(worker)
        return WorkerHandle(created)

    def _replica_ids(self, worker_type: str, replicas: int, given: str | None) -> list[str]:
        if given is not None:
            return [given] if replicas == 1 else [f"{given}-{n}" for n in range(1, replicas + 1)]
        ids = []
        for _ in range(replicas):
            self._id_counters[worker_type] = self._id_counters.get(worker_type, 0) + 1
            ids.append(f"{worker_type}-{self._id_counters[worker_type]}")
        return ids

    def workers(self) -> list[WorkerInfo]:
        """A snapshot of every replica: id, type, node types, availability and load."""
        return [
            WorkerInfo(
                replica.id,
                replica.definition.type,
                replica.definition.node_types,
                replica.available,
                replica.active,
                replica.limit,
            )
            for replica in self._replicas.values()
        ]

    @property
    def node_types(self) -> frozenset[str]:
        """Every node type some registered worker implements."""
        return frozenset(self._routes)

    # ----------------------------------------------------------------- invoke

    async def invoke(
        self,
        node_type: str,
        input: Any,
        *,
        timeout: float | None = None,
        principal: str | None = None,
        worker: str | None = None,
    ) -> NodeResult[Any]:
        """Invoke one node and return its result.

        Args:
            node_type: e.g. ``"MEMORY.WRITE"``.
            input: The node input, as its Struct or as a dict / JSON-like value.
            timeout: Seconds the node may take; default ``runtime.timeout_ms``.
            principal: Who the call acts for; handlers see it as ``ctx.principal``.
            worker: Pin the call to this replica id (no fallback to another replica).

        Returns:
            A :class:`NodeResult`: ``success``; ``failed`` (``INVALID_INPUT`` without calling the
            handler, ``NO_WORKER_AVAILABLE``, a handler's ``DittoError`` code, or
            ``INTERNAL_ERROR``); ``timeout``; or ``cancelled``. The caller's own cancellation
            propagates and is never turned into a result.

        Raises:
            RuntimeClosedError: The runtime is closing or closed.
            UnknownNodeError: No registered worker implements ``node_type``.
            UnknownWorkerError: ``worker`` is not a replica implementing ``node_type``.
            InvalidInputError: ``timeout`` is not a positive number.
        """
        if self._closing:
            raise RuntimeClosedError()
        route, deadline = self._prepare(node_type, timeout, worker, None)
        self._inflight += 1
        try:
            return await invoke_route(
                self,
                route,
                input,
                deadline=deadline,
                principal=principal,
                worker=worker,
                execution=None,
            )
        finally:
            self._release()

    def _prepare(
        self,
        node_type: str,
        timeout: float | None,
        worker: str | None,
        outer_deadline: float | None,
    ) -> tuple[Route, float]:
        """The route and the absolute deadline of one call (raises for misuse)."""
        if not self._watching:
            assert self._watchdog is not None
            self._watchdog.start()
            self._watching = True
        route = self._routes.get(node_type)
        if route is None:
            raise UnknownNodeError(node_type)
        if worker is not None:
            route.check_pin(worker)
        deadline = asyncio.get_running_loop().time() + (
            self._default_timeout if timeout is None else _seconds(timeout, "timeout")
        )
        if outer_deadline is not None and outer_deadline < deadline:
            deadline = outer_deadline
        return route, deadline

    async def _invoke(
        self,
        node_type: str,
        input: Any,
        *,
        timeout: float | None,
        principal: str | None,
        worker: str | None,
        execution: ExecutionScope | None,
        outer_deadline: float | None,
    ) -> NodeResult[Any]:
        """A nested call (``ctx.invoke``): accepted even while the runtime drains."""
        route, deadline = self._prepare(node_type, timeout, worker, outer_deadline)
        return await invoke_route(
            self,
            route,
            input,
            deadline=deadline,
            principal=principal,
            worker=worker,
            execution=execution,
        )

    # ----------------------------------------------------------------- run

    async def run(
        self,
        plan: Graph,
        run_input: Any = None,
        *,
        concurrency: int | None = None,
        timeout: float | None = None,
        principal: str | None = None,
    ) -> RunResult:
        """Run a graph: every task once, each after all of its dependencies.

        Independent tasks run concurrently, at most ``concurrency`` at a time (this argument,
        else ``runtime.graph_concurrency``, else unlimited). A failed node does not stop the run:
        its dependents' binders see the failed result and decide. A binder that *raises* does:
        no new task is admitted, started tasks finish, and :class:`GraphRunError` carries the
        partial result.

        Args:
            plan: The graph to run.
            run_input: Passed to every binder as its first argument.
            concurrency: Most tasks in flight at once (a positive integer).
            timeout: Seconds for the whole run: no node's deadline lies beyond it, and tasks
                that start after it get status ``timeout`` without running.
            principal: Who the run acts for (every node's ``ctx.principal``).

        Returns:
            A :class:`RunResult`: task id -> :class:`NodeResult`, plus ``run_id`` and ``ok``.

        Raises:
            RuntimeClosedError: The runtime is closing or closed.
            UnknownNodeError: A task's node type has no worker (checked before anything runs).
            UnknownWorkerError: A task is pinned to a replica that does not implement its node
                type (checked before anything runs).
            InvalidInputError: ``concurrency`` or ``timeout`` is invalid.
            GraphRunError: A binder raised.
        """
        if self._closing:
            raise RuntimeClosedError()
        if not isinstance(plan, Graph):
            raise InvalidInputError("run() takes a graph built with graph()")
        compiled = plan.compile()
        for node_type in sorted(compiled.node_types):
            if node_type not in self._routes:
                raise UnknownNodeError(node_type)
        for task in compiled.tasks:
            if task.worker is not None:
                self._routes[task.node_type].check_pin(task.worker)
        limit = concurrency if concurrency is not None else self.settings.runtime.graph_concurrency
        if limit is not None and (
            isinstance(limit, bool) or not isinstance(limit, int) or limit < 1
        ):
            raise InvalidInputError("concurrency must be a positive integer")
        run_deadline = (
            None
            if timeout is None
            else asyncio.get_running_loop().time() + _seconds(timeout, "timeout")
        )

        run_id = new_execution_id()
        graph_id = compiled.graph_id
        started = perf_counter()

        routes = self._routes
        default_timeout = self._default_timeout
        loop = asyncio.get_running_loop()

        async def call(task: Task, node_input: Any) -> NodeResult[Any]:
            # The graph's hot path: routes and pins were checked above, so go straight to the
            # invocation instead of through _invoke's lookups.
            deadline = loop.time() + (default_timeout if task.timeout is None else task.timeout)
            if run_deadline is not None and run_deadline < deadline:
                deadline = run_deadline
            return await invoke_route(
                self,
                routes[task.node_type],
                node_input,
                deadline=deadline,
                principal=principal,
                worker=task.worker,
                execution=ExecutionScope(graph_id, run_id, task.id),
            )

        self._inflight += 1
        try:
            results, failure = await execute_plan(compiled, run_input, call, limit)
        finally:
            self._release()
        outcome = RunResult(
            graph_id,
            run_id,
            {
                task.id: result
                for task, result in zip(compiled.tasks, results, strict=True)
                if result is not None
            },
            (perf_counter() - started) * 1000.0,
            len(compiled.tasks),
        )
        if failure is not None:
            task_id, cause = failure
            raise GraphRunError(task_id, cause, outcome) from cause
        return outcome

    # ----------------------------------------------------------------- close

    def _release(self) -> None:
        self._inflight -= 1
        if self._inflight == 0 and self._drained is not None:
            self._drained.set()

    @property
    def closed(self) -> bool:
        """True once :meth:`close` has started; no new top-level work is accepted."""
        return self._closing

    async def close(self) -> None:
        """Refuse new work, wait for accepted work to finish, then dispose each worker once.

        Idempotent: later and concurrent calls wait for the first and share its outcome. Nested
        ``ctx.invoke`` calls from accepted work still run during the drain. Disposal runs
        shielded from cancellation so resources are always released.

        Raises:
            WorkerCleanupError: One or more ``dispose`` callbacks failed; every failure is in
                the group, not only the first.
        """
        pending = self._closed
        if pending is not None:
            await pending.wait()
            if self._closed is not pending:  # that close() was cancelled before disposing
                await self.close()
            elif self._close_error is not None:
                raise self._close_error
            return
        self._closing = True
        closed = self._closed = anyio.Event()
        if self._watchdog is not None:
            self._watchdog.stop()
        try:
            if self._inflight:
                self._drained = anyio.Event()
                await self._drained.wait()
        except BaseException:
            # Cancelled while draining: nothing was disposed yet, so a later close() must
            # start over instead of reporting success.
            self._closed = None
            closed.set()
            raise
        try:
            with anyio.CancelScope(shield=True):
                failures = await _dispose_all(reversed(self._definitions))
            if failures:
                self._close_error = WorkerCleanupError("worker cleanup failed", failures)
                raise self._close_error
        finally:
            closed.set()


async def _dispose_all(definitions: Iterable[WorkerDefinition]) -> list[Exception]:
    failures: list[Exception] = []
    for definition in definitions:
        if definition.dispose is None:
            continue
        try:
            outcome = definition.dispose()
            if inspect.isawaitable(outcome):
                await outcome
        except Exception as exc:
            exc.add_note(f"while disposing worker {definition.type!r}")
            failures.append(exc)
    return failures


def _seconds(value: float, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise InvalidInputError(f"{name} must be a positive number of seconds")
    if value <= 0:
        raise InvalidInputError(f"{name} must be a positive number of seconds")
    return float(value)


def create_ditto(
    *, config: Settings | None = None, workers: Iterable[WorkerDefinition] = ()
) -> Ditto:
    """Create a runtime with ``workers`` registered (one replica each).

    Args:
        config: Settings from :func:`ditto.config.load_config`; ``None`` uses library defaults
            and reads no file and no environment.
        workers: Worker definitions to register.

    Example::

        async with create_ditto(workers=[echo_worker]) as runtime:
            result = await runtime.invoke("ECHO.SAY", {"text": "hi"})
    """
    runtime = Ditto(config)
    for worker in workers:
        runtime.register(worker)
    return runtime
