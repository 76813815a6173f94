"""A state-machine loop's checkpoint: ``{iteration, state}`` saved after each iteration, in the
envelope format of :mod:`ditto.runtime.checkpoints.envelope` (scope ``loop:<loop id>``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ditto.errors import DittoError, ErrorCode, InvalidInputError
from ditto.runtime.checkpoints.envelope import digest, open_envelope, plain_json, seal_envelope

if TYPE_CHECKING:
    from ditto.runtime.checkpoints.holding import HeldLease
    from ditto.runtime.checkpoints.port import CheckpointStore

__all__ = ("LoopCheckpoint",)


class LoopCheckpoint:
    """A state-machine loop's checkpoint: ``{iteration, state}`` after each iteration, with the
    digest of the loop's first input so another loop's checkpoint is never continued.

    Args:
        lease: The lease the loop holds on its checkpoint: every save is fenced by it.
    """

    __slots__ = ("_id", "_input", "_lease", "_principal", "_scope", "_store", "_version")

    def __init__(
        self, store: CheckpointStore, loop_id: str, checkpoint_id: str, lease: HeldLease
    ) -> None:
        if not isinstance(checkpoint_id, str) or not checkpoint_id.strip():
            raise InvalidInputError("a checkpoint id must be a non-empty string")
        self._store = store
        self._lease = lease
        self._id = checkpoint_id
        self._scope = f"loop:{loop_id}"
        self._version = 0
        self._input = ""
        self._principal: str | None = None

    @property
    def id(self) -> str:
        """The checkpoint id."""
        return self._id

    async def load(self, first_input: Any, principal: str | None) -> tuple[int, Any, bool] | None:
        """``(iteration, state, finished)`` of the last saved iteration, or ``None``."""
        self._input = digest(plain_json(first_input, "the loop input"))
        self._principal = principal
        stored = await self._store.load(self._id)
        if stored is None:
            return None
        envelope = open_envelope(stored.envelope, self._id)
        state = envelope.state
        if envelope.scope != self._scope or state.get("input") != self._input:
            raise DittoError(
                f"checkpoint {self._id!r} belongs to another loop or loop input",
                code=ErrorCode.CHECKPOINT_MISMATCH,
            )
        if state.get("principal") != principal:
            raise DittoError(
                f"checkpoint {self._id!r} was written for another principal",
                code=ErrorCode.CHECKPOINT_MISMATCH,
            )
        self._version = envelope.version
        return int(state["iteration"]), state["state"], bool(state["finished"])

    async def save(self, iteration: int, state: Any, finished: bool) -> None:
        plain_json(state, "the loop state")
        self._version += 1
        body = {
            "iteration": iteration,
            "state": state,
            "finished": finished,
            "input": self._input,
            "principal": self._principal,
        }
        await self._store.save(
            self._id,
            self._scope,
            seal_envelope(self._scope, self._version, body),
            fence=self._lease.fence,
        )
