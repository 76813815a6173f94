"""Which workers a runtime has: registration, replica ids, the route of each node type, and
disposal when the runtime closes.

The runtime asks the registry for a node type's :class:`~ditto.runtime.router.Route` on every
call; everything else here runs at set-up and shutdown only.
"""

from __future__ import annotations

import inspect
from collections.abc import Iterable
from typing import TYPE_CHECKING

from ditto.contracts.node_types import NodeContract, NodeTypeRegistry
from ditto.errors import UnknownNodeError, WorkerDefinitionError
from ditto.runtime.router import Replica, Route, WorkerInfo
from ditto.runtime.worker import WorkerDefinition

if TYPE_CHECKING:
    from ditto.runtime.transports.port import Transport

__all__ = ("WorkerHandle", "WorkerRegistry")


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


class WorkerRegistry:
    """The registered worker definitions, their replicas and one route per node type."""

    __slots__ = ("_id_counters", "contracts", "definitions", "replicas", "routes")

    def __init__(self) -> None:
        self.contracts = NodeTypeRegistry()
        self.routes: dict[str, Route] = {}
        """Node type -> route; read on every call."""
        self.replicas: dict[str, Replica] = {}
        self.definitions: list[WorkerDefinition] = []
        """Each registered definition once, in registration order."""
        self._id_counters: dict[str, int] = {}

    def register(
        self, worker: WorkerDefinition, *, replicas: int = 1, id: str | None = None
    ) -> WorkerHandle:
        """Add ``replicas`` instances of ``worker`` (see :meth:`Ditto.register`).

        Raises:
            WorkerDefinitionError: ``INVALID_WORKER`` for a bad replica count, a duplicate id or
                a node type already registered with another contract. Nothing changes then.
        """
        if not isinstance(worker, WorkerDefinition):
            raise WorkerDefinitionError("register() takes a definition from define_worker()")
        if isinstance(replicas, bool) or not isinstance(replicas, int) or replicas < 1:
            raise WorkerDefinitionError("replicas must be a positive integer")
        if id is not None and (not isinstance(id, str) or not id.strip()):
            raise WorkerDefinitionError("a worker id must be a non-empty string")
        ids = self._replica_ids(worker.type, replicas, id)
        for replica_id in ids:
            if replica_id in self.replicas:
                raise WorkerDefinitionError(f"worker id {replica_id!r} is already registered")
        for bound in worker.nodes.values():
            self.contracts.check(bound.contract)  # every contract before anything changes
        self._check_retry(worker)
        for bound in worker.nodes.values():
            self.contracts.add(bound.contract)
        created = [Replica(replica_id, worker) for replica_id in ids]
        for replica in created:
            self.replicas[replica.id] = replica
            for node_type, bound in worker.nodes.items():
                route = self.routes.get(node_type)
                if route is None:
                    route = self.routes[node_type] = Route(bound.contract)
                route.add(replica, bound.handler)
                if worker.retry is not None:
                    route.retry = worker.retry
        if not any(known is worker for known in self.definitions):
            self.definitions.append(worker)
        return WorkerHandle(created)

    def register_remote(
        self,
        nodes: Iterable[str | NodeContract],
        *,
        transport: Transport,
        concurrency: int | None,
        id: str,
    ) -> WorkerHandle:
        """Add a remote pool (see :meth:`Ditto.register_remote`)."""
        from ditto.runtime.remote import remote_definition

        if not isinstance(id, str) or not id.strip():
            raise WorkerDefinitionError("a worker id must be a non-empty string")
        if id in self.replicas:
            raise WorkerDefinitionError(f"worker id {id!r} is already registered")
        definition = remote_definition(nodes, self.contracts, transport, concurrency)
        for bound in definition.nodes.values():
            self.contracts.check(bound.contract)
        for bound in definition.nodes.values():
            self.contracts.add(bound.contract)
        pool = Replica(id, definition, transport)
        self.replicas[id] = pool
        for node_type, bound in definition.nodes.items():
            route = self.routes.get(node_type)
            if route is None:
                route = self.routes[node_type] = Route(bound.contract)
            route.add(pool, bound.handler)
        self.definitions.append(definition)
        return WorkerHandle([pool])

    def _check_retry(self, worker: WorkerDefinition) -> None:
        """A node type has one default retry policy, whichever replica a call lands on: a
        worker declaring another one than an earlier worker of the same node type is refused
        (a worker declaring none keeps the route's)."""
        if worker.retry is None:
            return
        for node_type in worker.nodes:
            route = self.routes.get(node_type)
            if route is not None and route.retry is not None and route.retry != worker.retry:
                raise WorkerDefinitionError(
                    f"worker {worker.type!r}: {node_type} already has another default retry "
                    f"policy ({route.retry!r}); declare the same one, or none"
                )

    def _replica_ids(self, worker_type: str, replicas: int, given: str | None) -> list[str]:
        if given is not None:
            return [given] if replicas == 1 else [f"{given}-{n}" for n in range(1, replicas + 1)]
        ids = []
        for _ in range(replicas):
            self._id_counters[worker_type] = self._id_counters.get(worker_type, 0) + 1
            ids.append(f"{worker_type}-{self._id_counters[worker_type]}")
        return ids

    def route(self, node_type: str) -> Route:
        """Raises:
        UnknownNodeError: No registered worker implements ``node_type``."""
        route = self.routes.get(node_type)
        if route is None:
            raise UnknownNodeError(node_type)
        return route

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
            for replica in self.replicas.values()
        ]

    async def dispose_all(self) -> list[Exception]:
        """Run every definition's ``dispose`` once, newest first; return what failed."""
        return await _dispose_all(reversed(self.definitions))


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
