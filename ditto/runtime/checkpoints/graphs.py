"""A graph run's checkpoint: the envelope that says which run it is, and one record per
finished task.

The envelope's state::

    {"plan": <plan digest>, "input": <run input>, "principal": <who the run acts for>,
     "status": "running" | "interrupted" | "completed" | "failed",
     "interrupts": [{"task": <task id>, "payload": <Interrupt payload>}, ...]}

The plan digest covers the graph id and, per task, its id, node type and dependencies (binders
are code and cannot be compared): a checkpoint of another plan is refused with
``CHECKPOINT_MISMATCH`` instead of mixing two runs. A finished task is one that has a result,
whatever its status: on resume it never runs again and its dependents see the stored result.
An interrupted task has no record: it runs again on resume, with the answer.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Literal

import anyio.to_thread
import msgspec

from ditto.contracts.result import NodeResult
from ditto.errors import DittoError, ErrorCode, InvalidInputError
from ditto.runtime.checkpoints.envelope import (
    canonical,
    corrupt,
    digest,
    open_envelope,
    open_record,
    plain_json,
    seal_envelope,
    seal_record,
)

if TYPE_CHECKING:
    from ditto.contracts.node_types import NodeTypeRegistry
    from ditto.graph.plan import Plan
    from ditto.runtime.checkpoints.holding import HeldLease
    from ditto.runtime.checkpoints.port import CheckpointStore, Lease

__all__ = ("GraphCheckpoint", "KnownPlans", "RunStatus", "graph_scope", "plan_digest")

RunStatus = Literal["running", "interrupted", "completed", "failed"]

_encode = msgspec.json.Encoder().encode


def graph_scope(graph_id: str) -> str:
    return f"graph:{graph_id}"


def plan_digest(plan: Plan) -> str:
    """SHA-256 over the graph id and each task's id, node type and dependencies, in order."""
    shape = [plan.graph_id, [[task.id, task.node_type, list(task.deps)] for task in plan.tasks]]
    return digest(canonical(shape))


def mismatch(message: str) -> DittoError:
    return DittoError(message, code=ErrorCode.CHECKPOINT_MISMATCH)


class GraphCheckpoint:
    """One graph run's checkpoint in a store: opened (or created) before the run, a record per
    finished task during it, the envelope again at its end.

    Args:
        lease: The lease this run holds on the checkpoint (see
            :mod:`~ditto.runtime.checkpoints.holding`): every write is fenced by it, and
            :meth:`release` gives it up. ``None`` for a checkpoint no other run can know yet
            (an interrupted run checkpointed under its own new run id).
    """

    __slots__ = (
        "_decoders",
        "_recorded",
        "_version",
        "finished",
        "id",
        "interrupts",
        "lease",
        "principal",
        "run_input",
        "state",
        "status",
        "store",
    )

    def __init__(
        self, store: CheckpointStore, checkpoint_id: str, lease: HeldLease | None = None
    ) -> None:
        if not isinstance(checkpoint_id, str) or not checkpoint_id.strip():
            raise InvalidInputError("a checkpoint id must be a non-empty string")
        self.store = store
        self.id = checkpoint_id
        self.lease = lease
        self.state: dict[str, Any] = {}
        self.status: RunStatus = "running"
        self.finished: dict[str, NodeResult[Any]] = {}
        """Results of the tasks that finished in earlier attempts, by task id."""
        self.interrupts: list[dict[str, Any]] = []
        """The interrupts the last attempt ended with: ``{"task", "payload"}``."""
        self.run_input: Any = None
        self.principal: str | None = None
        self._version = 0
        self._decoders: dict[str, msgspec.json.Decoder[Any]] = {}
        self._recorded: set[str] = set()

    async def load(self, contracts: NodeTypeRegistry) -> bool:
        """Read the checkpoint if it exists (True), checking every digest.

        Raises:
            DittoError: ``CHECKPOINT_CORRUPT`` for a digest that does not match, or a record of
                a task the plan does not have.
        """
        stored = await self.store.load(self.id)
        if stored is None:
            return False
        envelope = open_envelope(stored.envelope, self.id)
        self._version = envelope.version
        self.state = envelope.state
        self.status = self.state.get("status", "running")
        self.interrupts = list(self.state.get("interrupts", ()))
        self.run_input = self.state.get("input")
        self.principal = self.state.get("principal")
        for key, value in stored.records:
            payload = open_record(self.id, key, value)
            node_type = msgspec.json.decode(payload, type=_NodeOnly).node
            self.finished[key] = self._decoder(node_type, contracts).decode(payload)
        missing = sorted(set(self.state.get("recorded", ())) - self.finished.keys())
        if missing:
            raise corrupt(f"checkpoint {self.id!r} has lost the record of task {missing[0]!r}")
        self._recorded = set(self.finished)
        return True

    def _decoder(self, node_type: str, contracts: NodeTypeRegistry) -> msgspec.json.Decoder[Any]:
        decoder = self._decoders.get(node_type)
        if decoder is None:
            contract = contracts.get(node_type)
            output = Any if contract is None else contract.output_type
            decoder = self._decoders[node_type] = msgspec.json.Decoder(NodeResult[output])  # type: ignore[valid-type]
        return decoder

    async def load_existing(self, contracts: NodeTypeRegistry) -> None:
        """:meth:`load`, for a checkpoint that must exist.

        Raises:
            DittoError: ``CHECKPOINT_NOT_FOUND``, or as :meth:`load`.
        """
        if not await self.load(contracts):
            raise DittoError(
                f"no checkpoint has id {self.id!r}", code=ErrorCode.CHECKPOINT_NOT_FOUND
            )

    def check(self, plan: Plan, digest_of_plan: str, run_input: Any, principal: str | None) -> None:
        """Refuse a checkpoint of another plan, graph, input or principal.

        Raises:
            DittoError: ``CHECKPOINT_MISMATCH``.
        """
        scope = graph_scope(plan.graph_id)
        if self.state.get("scope", scope) != scope or self.state.get("plan") != digest_of_plan:
            raise mismatch(
                f"checkpoint {self.id!r} belongs to another plan: the tasks, dependencies or "
                f"node types of graph {plan.graph_id!r} changed since it was written"
            )
        if canonical(run_input) != canonical(self.run_input):
            raise mismatch(f"checkpoint {self.id!r} was written for another run input")
        if self.principal != principal:
            raise mismatch(f"checkpoint {self.id!r} was written for another principal")
        known = {task.id for task in plan.tasks}
        strangers = sorted(self.finished.keys() - known)
        if strangers:
            raise mismatch(f"checkpoint {self.id!r} records unknown task {strangers[0]!r}")

    async def open(
        self,
        lease: HeldLease,
        plan: Plan,
        digest_of_plan: str,
        run_input: Any,
        principal: str | None,
        contracts: NodeTypeRegistry,
    ) -> None:
        """Hold ``lease`` and open the checkpoint for a run of ``plan``: the existing one
        (checked against the run) or a new one. A completed one gives the lease up at once
        (nothing will run); on an error the lease is given up too.

        Raises:
            DittoError: ``CHECKPOINT_MISMATCH``, ``CHECKPOINT_CORRUPT``, or a store failure.
        """
        self.lease = lease
        try:
            if await self.load(contracts):
                self.check(plan, digest_of_plan, run_input, principal)
            else:
                await self.begin(graph_scope(plan.graph_id), digest_of_plan, run_input, principal)
        except BaseException:
            await self.release()
            raise
        if self.status == "completed":
            await self.release()

    async def begin(
        self, scope: str, digest_of_plan: str, run_input: Any, principal: str | None
    ) -> None:
        """Write the envelope of a new run (status ``running``)."""
        # Off the event loop: an input may be large, and encoding it holds the loop.
        encoded = await anyio.to_thread.run_sync(plain_json, run_input, "a checkpointed run input")
        self.run_input = run_input
        self.principal = principal
        self.state = {
            "scope": scope,
            "plan": digest_of_plan,
            "input": msgspec.json.decode(encoded),
            "principal": principal,
            "status": "running",
            "interrupts": [],
            "recorded": [],
        }
        await self._save(scope)

    def _fence(self) -> Lease | None:
        return None if self.lease is None else self.lease.fence

    async def release(self) -> None:
        """Give up the lease, if this run holds one (idempotent)."""
        if self.lease is not None:
            await self.lease.release()

    async def record(self, task_id: str, result: NodeResult[Any]) -> None:
        """Append one finished task (durable when this returns).

        Raises:
            DittoError: ``CHECKPOINT_LEASE_LOST`` when another run took the checkpoint over
                (nothing is written), ``CHECKPOINT_STORE_UNAVAILABLE``.
        """
        await self.store.append(
            self.id,
            [(task_id, seal_record(self.id, task_id, _encode(result)))],
            fence=self._fence(),
        )
        self._recorded.add(task_id)

    async def record_all(self, results: Mapping[str, NodeResult[Any]]) -> None:
        """Append many finished tasks at once (an interrupted run without a checkpoint)."""
        if results:
            await self.store.append(
                self.id,
                [
                    (task_id, seal_record(self.id, task_id, _encode(result)))
                    for task_id, result in results.items()
                ],
                fence=self._fence(),
            )
            self._recorded.update(results)

    async def end(self, status: RunStatus, interrupts: list[dict[str, Any]]) -> None:
        """Write the envelope again with the run's outcome."""
        self.status = status
        self.interrupts = interrupts
        self.state = {
            **self.state,
            "status": status,
            "interrupts": interrupts,
            # Every task recorded so far: a record missing later is seen, not taken for a
            # task that never ran.
            "recorded": sorted(self._recorded),
        }
        await self._save(self.state["scope"])

    async def _save(self, scope: str) -> None:
        self._version += 1
        # Off the event loop: interrupt payloads and inputs may be large (100 MB held the loop
        # for seconds), and plain_json refuses what would not come back equal.
        sealed = await anyio.to_thread.run_sync(_seal, scope, self._version, self.state)
        await self.store.save(self.id, scope, sealed, fence=self._fence())


def _seal(scope: str, version: int, state: dict[str, Any]) -> bytes:
    """The envelope, after checking its state is plain JSON (it must come back equal)."""
    plain_json(state, "a checkpoint's state (its input and interrupt payloads)")
    return seal_envelope(scope, version, state)


class KnownPlans:
    """The plans a runtime ran with a checkpoint, by digest (the newest ``size``), so that
    ``resume`` in the same process needs no ``plan=``."""

    __slots__ = ("_plans", "_size")

    def __init__(self, size: int = 256) -> None:
        self._plans: OrderedDict[str, Plan] = OrderedDict()
        self._size = size

    def remember(self, plan: Plan) -> str:
        """The plan's digest; the plan is kept."""
        digest_of_plan = plan_digest(plan)
        self._plans[digest_of_plan] = plan
        self._plans.move_to_end(digest_of_plan)
        while len(self._plans) > self._size:
            self._plans.popitem(last=False)
        return digest_of_plan

    def of(self, checkpoint: GraphCheckpoint) -> Plan:
        """The plan ``checkpoint`` was written by.

        Raises:
            InvalidInputError: This process has not run it (``resume`` needs ``plan=``).
        """
        plan = self._plans.get(str(checkpoint.state.get("plan")))
        if plan is None:
            raise InvalidInputError(
                f"checkpoint {checkpoint.id!r} is a run of a plan this process has not run: "
                "pass plan="
            )
        return plan


class _NodeOnly(msgspec.Struct):
    node: str
