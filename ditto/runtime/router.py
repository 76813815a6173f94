"""Replicas and the router that picks one per invocation.

Routing is fail-fast: an available replica with free capacity is chosen round-robin per node
type; a pinned replica is honoured with no fallback; when nothing has capacity the call fails at
once with ``NO_WORKER_AVAILABLE`` (the runtime is not a queue) — except for a remote pool at its
own ``concurrency`` limit, where the call waits for a slot (first come, first served, within its
deadline): the workers behind it have a queue anyway. Replicas in this process rank
before remote ones (the reference's rank): a remote pool is used only when no local replica of
the node type has free capacity.
"""

from __future__ import annotations

import asyncio
from collections import deque
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ditto.contracts.node_types import NodeContract
from ditto.contracts.retry import RetryPolicy
from ditto.errors import NoWorkerAvailableError, UnknownWorkerError
from ditto.runtime.worker import Handler, WorkerDefinition

if TYPE_CHECKING:
    from ditto.runtime.transports.port import Transport

__all__ = ("Replica", "Route", "WorkerInfo")


class Replica:
    """One registered instance of a worker definition, with its own capacity; or, with a
    ``transport``, the pool of remote workers reached through it (``limit`` then caps this
    runtime's calls in flight to them)."""

    __slots__ = ("active", "available", "definition", "id", "limit", "transport", "waiting")

    def __init__(
        self,
        replica_id: str,
        definition: WorkerDefinition,
        transport: Transport | None = None,
    ) -> None:
        self.id = replica_id
        self.definition = definition
        self.limit = definition.concurrency
        self.active = 0
        self.available = True
        self.transport = transport
        self.waiting: deque[asyncio.Future[None]] = deque()
        """A remote pool's calls waiting for one of its ``limit`` slots, oldest first (see
        :mod:`ditto.runtime.remote`)."""

    def has_capacity(self) -> bool:
        return self.available and (self.limit is None or self.active < self.limit)


class Route:
    """Everything needed to run one node type: its contract and the replicas implementing it."""

    __slots__ = (
        "_cursor",
        "by_id",
        "contract",
        "handlers",
        "node_type",
        "remote",
        "replicas",
        "retry",
    )

    def __init__(self, contract: NodeContract) -> None:
        self.node_type = contract.node_type
        self.contract = contract
        self.replicas: list[Replica] = []
        """Replicas in this process."""
        self.remote: list[Replica] = []
        """Remote pools (replicas with a transport), used when no local replica has room."""
        self.by_id: dict[str, Replica] = {}
        self.handlers: dict[str, Handler] = {}
        self.retry: RetryPolicy | None = None
        """The default retry policy of the node type: the one its worker declared
        (``define_worker(..., retry=...)``); a call's or a task's own policy wins."""
        self._cursor = 0

    def add(self, replica: Replica, handler: Handler) -> None:
        (self.replicas if replica.transport is None else self.remote).append(replica)
        self.by_id[replica.id] = replica
        self.handlers[replica.id] = handler

    def check_pin(self, worker_id: str) -> None:
        """Raises:
        UnknownWorkerError: ``worker_id`` is not a replica implementing this node type."""
        if worker_id not in self.by_id:
            raise UnknownWorkerError(worker_id, self.node_type)

    def pick(self, pinned: str | None) -> Replica:
        """Choose the replica for one invocation.

        Raises:
            UnknownWorkerError: ``pinned`` does not implement this node type.
            NoWorkerAvailableError: No eligible replica has free capacity (retryable).
        """
        if pinned is not None:
            replica = self.by_id.get(pinned)
            if replica is None:
                raise UnknownWorkerError(pinned, self.node_type)
            if not replica.has_capacity():
                raise NoWorkerAvailableError(self.node_type, pinned)
            return replica
        replicas = self.replicas
        count = len(replicas)
        if count == 1:  # the common single-replica case, without the rotation arithmetic
            only = replicas[0]
            if only.available and (only.limit is None or only.active < only.limit):
                return only
        elif count:
            start = self._cursor
            for offset in range(count):
                index = (start + offset) % count
                replica = replicas[index]
                if replica.has_capacity():
                    self._cursor = (index + 1) % count
                    return replica
        for pool in self.remote:
            if pool.has_capacity():
                return pool
        for pool in self.remote:
            if pool.available:
                return pool  # at its limit: the call waits there for a slot, within its deadline
        raise NoWorkerAvailableError(self.node_type)


@dataclass(frozen=True, slots=True)
class WorkerInfo:
    """A snapshot of one replica, from ``Ditto.workers()``."""

    id: str
    type: str
    node_types: frozenset[str]
    available: bool
    active: int
    concurrency: int | None
