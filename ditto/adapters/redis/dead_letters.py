"""The dead-letter stream: calls a worker will not run, kept with their reason for an operator.

A call lands in ``{prefix}dead`` when it cannot be opened (forged, malformed, sealed under a
secret no worker holds), names another node type than its stream's, or was delivered more than
``max_deliveries`` times (its workers kept dying on it). Each entry keeps the reason, the node
type and execution id when known, the call's deadline, its delivery count, the worker and time
— and the call *still sealed* (field ``e``): the dead-letter stream never holds an input or a
principal in clear. The stream is capped at about :data:`DEAD_LETTERS_KEPT` entries, so
garbage added to a calls stream cannot fill Redis.

An operator lists, shows, replays (a call whose deadline has not passed goes back to its stream,
its execution id now bound to the new entry so that it runs once more) and purges them:
``ditto worker dead-letters``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

import redis.asyncio as aioredis

from ditto.adapters.redis.keys import SEEN_MARGIN_MS, calls_key, dead_key, seen_key
from ditto.runtime.transports.envelope import CallEnvelope

__all__ = (
    "DEAD_LETTERS_KEPT",
    "DeadLetter",
    "DeadLetterReason",
    "DeadLetters",
    "ReplayOutcome",
    "purge_dead_letters",
    "read_dead_letter",
    "read_dead_letters",
    "replay_dead_letter",
)

DEAD_LETTERS_KEPT = 100_000
"""The dead-letter stream is trimmed to about this many entries (oldest first)."""

_REPLAY_SCRIPT = """
local entry = redis.call('XADD', KEYS[1], '*', 'e', ARGV[1])
redis.call('SET', KEYS[2], entry, 'PX', ARGV[2])
redis.call('XDEL', KEYS[3], ARGV[3])
return entry
"""
"""KEYS: the calls stream, the execution id's seen key, the dead-letter stream. ARGV: the sealed
call, the seen key's TTL in ms, the dead letter's id. Adds the call, binds the execution id to
the new entry (a worker checks it in Redis: its sealed entry id is the old one) and removes the
dead letter, in one step."""


class DeadLetterReason(StrEnum):
    """Why a call was dead-lettered."""

    REJECTED = "rejected"
    """It could not be opened: forged, malformed, or sealed under another secret."""
    MISROUTED = "misrouted"
    """It opened, but names another node type than the stream it was on."""
    EXHAUSTED = "exhausted"
    """It was delivered more than ``max_deliveries`` times (its workers kept dying on it)."""


@dataclass(frozen=True)
class DeadLetter:
    """One dead-letter entry, as an operator sees it (the call stays sealed)."""

    id: str
    reason: str
    detail: str
    node_type: str | None
    execution_id: str | None
    deadline: float | None
    deliveries: int
    worker: str
    at: float
    stream: str
    sealed_bytes: int

    def as_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "reason": self.reason,
            "detail": self.detail,
            "node_type": self.node_type,
            "execution_id": self.execution_id,
            "deadline": self.deadline,
            "deliveries": self.deliveries,
            "worker": self.worker,
            "at": self.at,
            "stream": self.stream,
            "sealed_bytes": self.sealed_bytes,
        }


class DeadLetters:
    """A worker's writer of dead letters under ``prefix``."""

    __slots__ = ("_client", "_key", "_worker_id", "added")

    def __init__(self, client: aioredis.Redis, prefix: str, worker_id: str) -> None:
        self._client = client
        self._key = dead_key(prefix)
        self._worker_id = worker_id
        self.added = 0

    async def add(
        self,
        reason: DeadLetterReason,
        detail: str,
        *,
        stream: str,
        sealed: bytes,
        envelope: CallEnvelope | None,
        deliveries: int,
    ) -> None:
        """Append one dead letter (raises Redis errors: the caller leaves the call pending)."""
        fields: dict[Any, Any] = {
            "reason": reason.value,
            "detail": detail,
            "stream": stream,
            "deliveries": deliveries,
            "worker": self._worker_id,
            "at": repr(time.time()),
            "e": sealed,
        }
        if envelope is not None:
            fields.update(
                node_type=envelope.node_type,
                execution_id=envelope.execution_id,
                deadline=repr(envelope.deadline),
            )
        await self._client.xadd(self._key, fields, maxlen=DEAD_LETTERS_KEPT, approximate=True)
        self.added += 1


def _text(value: Any) -> str:
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)


def _letter(entry_id: Any, fields: dict[bytes, bytes]) -> DeadLetter:
    def get(name: str) -> str | None:
        value = fields.get(name.encode())
        return None if value is None else _text(value)

    deadline = get("deadline")
    return DeadLetter(
        id=_text(entry_id),
        reason=get("reason") or "",
        detail=get("detail") or "",
        node_type=get("node_type"),
        execution_id=get("execution_id"),
        deadline=None if deadline is None else float(deadline),
        deliveries=int(get("deliveries") or 0),
        worker=get("worker") or "",
        at=float(get("at") or 0.0),
        stream=get("stream") or "",
        sealed_bytes=len(fields.get(b"e", b"")),
    )


async def read_dead_letters(
    client: aioredis.Redis, prefix: str, *, limit: int = 100
) -> tuple[list[DeadLetter], int]:
    """The newest ``limit`` dead letters (newest first) and how many there are in all."""
    entries: Any = await client.xrevrange(dead_key(prefix), count=limit)
    total = int(await client.xlen(dead_key(prefix)))
    return [_letter(entry_id, fields) for entry_id, fields in entries], total


async def read_dead_letter(
    client: aioredis.Redis, prefix: str, letter_id: str
) -> DeadLetter | None:
    """One dead letter by its id (``None`` when there is none)."""
    entries: Any = await client.xrange(dead_key(prefix), min=letter_id, max=letter_id, count=1)
    return _letter(*entries[0]) if entries else None


class ReplayOutcome(StrEnum):
    """What :func:`replay_dead_letter` did."""

    REPLAYED = "replayed"
    NOT_FOUND = "not-found"
    EXPIRED = "expired"
    """The call's deadline has passed: a worker would only answer it ``timeout``."""
    UNOPENED = "unopened"
    """It could not be opened (no node type, no deadline): nothing to replay it to."""


async def replay_dead_letter(
    client: aioredis.Redis, prefix: str, letter_id: str, *, now: float | None = None
) -> tuple[ReplayOutcome, DeadLetter | None]:
    """Put a dead call back on its stream, still sealed, if its deadline has not passed.

    In one script: the call is added to its node type's stream, its execution id is bound to the
    new entry (or a worker would drop it as a replay of the entry it was first sent as), and the
    dead letter is removed (if it fails again, it comes back). Its caller may have had its
    answer already (an exhausted call is answered ``DEAD_LETTERED``): a replay runs the side
    effects, it answers nobody new."""
    letter = await read_dead_letter(client, prefix, letter_id)
    if letter is None:
        return ReplayOutcome.NOT_FOUND, None
    if letter.node_type is None or letter.deadline is None or letter.execution_id is None:
        return ReplayOutcome.UNOPENED, letter
    remaining = letter.deadline - (time.time() if now is None else now)
    if remaining <= 0:
        return ReplayOutcome.EXPIRED, letter
    entries: Any = await client.xrange(dead_key(prefix), min=letter_id, max=letter_id, count=1)
    sealed = entries[0][1].get(b"e", b"")
    await client.eval(
        _REPLAY_SCRIPT,
        3,
        calls_key(prefix, letter.node_type),
        seen_key(prefix, letter.execution_id),
        dead_key(prefix),
        sealed,
        int(remaining * 1000) + SEEN_MARGIN_MS,
        letter_id,
    )
    return ReplayOutcome.REPLAYED, letter


async def purge_dead_letters(
    client: aioredis.Redis, prefix: str, *, older_than: float | None = None
) -> int:
    """Delete every dead letter, or those added more than ``older_than`` seconds ago; how many
    were deleted (entry ids are their times, so this is one ``XTRIM MINID``)."""
    key = dead_key(prefix)
    if older_than is None:
        count = int(await client.xlen(key))
        await client.delete(key)
        return count
    cutoff_ms = int((time.time() - older_than) * 1000)
    return int(await client.xtrim(key, minid=f"{cutoff_ms}-0", approximate=False))
