"""Whether a worker may run a call it took: never an execution id twice, except the one
documented redelivery.

Every call is bound to the stream entry it was sent as. The caller chooses the entry id and
seals it into the envelope (``CallEnvelope.entry_id``); the send script adds the call under that
id and, in the same step, records the entry under ``{prefix}seen:{execution id}`` until a margin
past the call's deadline (:mod:`~ditto.adapters.redis.keys`).

*Admitted locally, no round trip.* An entry this worker *read* (``XREADGROUP >``: its first
delivery) runs at once when its sealed ``entry_id`` is its real id and the read was fresh — from
sending the read to parsing its answer took less than ``claim_idle_ms`` minus two renewal
intervals, so the entry cannot have been idle long enough for another worker to take it over,
and the renewal thread holds it from then on. Why this cannot run a replay: a replay is a copy of
a sealed call added to a stream again, and Redis never gives an id twice on a stream (ids only
grow; ``XDEL`` and ``XTRIM`` do not lower the last one), so the copy's id is never the sealed one;
and the id cannot be edited without the secret (the envelope is authenticated).

*Checked in Redis* (:data:`ADMIT_MANY`): everything else — an entry taken over from a worker
that died, a stale read, an envelope without ``entry_id`` (an older caller) or whose id Redis
refused at send time (another caller's entry was newer), a replay. The script checks that the
entry is still pending for this worker and compares it with the seen key: the entry the call was
sent as runs (first delivery, or again when taken over, with ``ctx.attempt`` = its delivery
count: the one way an execution id runs twice, and what ``ctx.idempotency_key`` is for); any
other entry is a replay — acknowledged and deleted in the same script, counted and logged (a
warning the first time, then at debug level), never run. With no seen key (an older caller's
call) the first entry to be checked takes the execution id, as before.

What defeats it: whoever can delete keys in Redis (``DEL`` of the seen key or the stream, which
resets the stream's last id) or a Redis restart without persistence — then a copy can run again.
The previous scheme (the seen key written by the first worker) fell to exactly the same; anyone
who can do that can also delete or rewrite calls, and must not have Redis access.

Checks are written in batches (group commit, as the replies are): a batch waits one turn of
the event loop, so that every call of the same read joins it, and goes as *one* script call
(the check above for each entry of the batch) — one round trip and one command for a whole
read instead of a pipeline of one script call per entry.
"""

from __future__ import annotations

import asyncio
import logging
from enum import IntEnum
from typing import Any

import redis.asyncio as aioredis
from redis import exceptions as redis_errors

from ditto.adapters.redis.keys import GROUP, SEEN_MARGIN_MS, seen_key
from ditto.runtime.transports.envelope import CallEnvelope

__all__ = ("ADMIT_MANY", "SEEN_MARGIN_MS", "Admission", "Verdict")

logger = logging.getLogger("ditto.remote")


ADMIT_MANY = """
local verdicts = {}
for i = 1, #KEYS, 2 do
  local seen, stream, entry = KEYS[i], KEYS[i + 1], ARGV[i + 2]
  local pending = redis.call('XPENDING', stream, ARGV[1], entry, entry, 1)
  if #pending == 0 or pending[1][2] ~= ARGV[2] then
    verdicts[#verdicts + 1] = 3
    verdicts[#verdicts + 1] = 0
  else
    local deliveries = pending[1][4]
    local held = redis.call('GET', seen)
    if not held then
      redis.call('SET', seen, entry, 'PX', ARGV[i + 3])
      verdicts[#verdicts + 1] = 1
    elseif held == entry then
      verdicts[#verdicts + 1] = deliveries > 1 and 2 or 1
    else
      redis.call('XACK', stream, ARGV[1], entry)
      redis.call('XDEL', stream, entry)
      verdicts[#verdicts + 1] = 0
    end
    verdicts[#verdicts + 1] = deliveries
  end
end
return verdicts
"""
"""The admission of a batch of entries, each checked on its own. KEYS: for each entry, its
execution id's seen key and its calls stream. ARGV: the group, this worker's id, then for each
entry its id and the seen key's TTL in ms (used only when no caller set the key: an older
caller). Returns, for each entry, its verdict (:class:`Verdict`) and its delivery count."""


class Verdict(IntEnum):
    """``ADMIT_MANY``'s answer for one entry:

    * ``FIRST`` — a first delivery of the entry the call was sent as (or, for an older
      caller's call, of the first entry checked: the execution id is now remembered with it);
    * ``REDELIVERED`` — the same entry delivered again (taken over from a worker that died):
      it runs again;
    * ``REPLAY`` — the execution id was already taken from another entry: acknowledged and
      deleted in the same step, so that no worker ever runs it;
    * ``NOT_OURS`` — the entry is no longer this worker's (answered, or taken over while this
      worker's loop was blocked before it even saw the entry): left to its holder.
    """

    REPLAY = 0
    FIRST = 1
    REDELIVERED = 2
    NOT_OURS = 3


class Admission:
    """One worker's admission of the calls it took."""

    __slots__ = (
        "_client",
        "_outbox",
        "_prefix",
        "_sending",
        "_sha",
        "_worker_id",
        "admitted_locally",
        "checked",
        "replays_dropped",
    )

    def __init__(self, client: aioredis.Redis, prefix: str, worker_id: str) -> None:
        self._client = client
        self._prefix = prefix
        self._worker_id = worker_id
        self._sha: str | None = None
        self._outbox: list[_Queued] = []
        self._sending = False
        self.replays_dropped = 0
        """Envelopes refused because their execution id was already taken from another entry."""
        self.admitted_locally = 0
        """Entries admitted without a round trip (:meth:`admits_locally`)."""
        self.checked = 0
        """Entries checked in Redis (:data:`ADMIT_MANY`)."""

    def admits_locally(self, entry_id: bytes, envelope: CallEnvelope, fresh: bool) -> bool:
        """Whether ``entry_id`` may run without a check in Redis (verdict ``FIRST``, delivery
        1): it was read (not taken over) in a fresh read (``fresh``) and is the entry the caller
        bound the call to. Anything else goes through :meth:`admit`."""
        bound = envelope.entry_id
        if fresh and bound is not None and bound.encode() == entry_id:
            self.admitted_locally += 1
            return True
        return False

    async def admit(
        self, stream: str, entry_id: bytes, envelope: CallEnvelope, remaining: float
    ) -> tuple[Verdict, int]:
        """The verdict on one entry and its delivery count (raises Redis errors: the call is
        then left pending, and taken over after ``claim_idle_ms``)."""
        ttl = max(0, int(remaining * 1000)) + SEEN_MARGIN_MS
        self.checked += 1
        verdict, deliveries = await self._run(
            (seen_key(self._prefix, envelope.execution_id), stream), (entry_id, ttl)
        )
        outcome = Verdict(int(verdict))
        if outcome is Verdict.REPLAY:
            self.replays_dropped += 1
            log = logger.debug if self.replays_dropped > 1 else logger.warning
            log(
                "dropped a replayed call on %s: execution %s was already taken from another "
                "entry (%d replays dropped by this worker; later ones are logged at debug level)",
                stream,
                envelope.execution_id,
                self.replays_dropped,
            )
        return outcome, int(deliveries)

    async def _run(self, keys: tuple[str, str], arguments: tuple[bytes, int]) -> Any:
        """One entry's verdict and delivery count from ``ADMIT_MANY``, batched with the
        admissions of the calls taken in the same turn of the loop (and meanwhile)."""
        answer: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._outbox.append((keys, arguments, answer))
        if not self._sending:
            self._sending = True
            try:
                await asyncio.sleep(0)  # the other calls of the same read join this batch
                while self._outbox:
                    batch, self._outbox = self._outbox, []
                    await self._send(batch)
            except BaseException:
                # The sender was cancelled: nobody is left to send what queued meanwhile.
                for *_, queued in self._outbox:
                    queued.set_exception(redis_errors.ConnectionError("admission failed"))
                self._outbox = []
                raise
            finally:
                self._sending = False
        return await answer

    async def _send(self, batch: list[_Queued]) -> None:
        keys: list[str] = []
        arguments: list[Any] = [GROUP, self._worker_id]
        for entry_keys, entry_arguments, _answer in batch:
            keys.extend(entry_keys)
            arguments.extend(entry_arguments)
        try:
            for _ in range(2):
                try:
                    if self._sha is None:
                        self._sha = await self._client.script_load(ADMIT_MANY)
                    verdicts: Any = await self._client.evalsha(
                        self._sha, len(keys), *keys, *arguments
                    )
                    break
                except redis_errors.NoScriptError:
                    self._sha = None  # Redis lost its scripts (a restart): load and send again
            else:
                raise redis_errors.NoScriptError("the admission script could not be loaded")
            for index, (*_, answer) in enumerate(batch):
                answer.set_result((verdicts[2 * index], verdicts[2 * index + 1]))
        except BaseException as exc:
            # Every call of the batch is left pending (a live worker takes it over), also when
            # the task that happened to send it was cancelled.
            for *_, answer in batch:
                if not answer.done():
                    answer.set_exception(redis_errors.ConnectionError("admission failed"))
            if not isinstance(exc, redis_errors.RedisError | OSError):
                raise


_Queued = tuple[tuple[str, str], tuple[bytes, int], "asyncio.Future[Any]"]
"""An entry waiting for its verdict: its keys, its arguments, where its verdict goes."""
