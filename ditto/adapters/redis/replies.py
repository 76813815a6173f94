"""A remote worker's answers: reply, acknowledge and delete each finished call, written in
batches (group commit).

The first call to finish while nothing is being written waits one turn of the event loop (the
calls finishing in the same turn join it) — unless it is the worker's only call in flight, which
nothing could join — writes, and keeps writing whatever other calls finished meanwhile: under
load replies share round trips as a hand-written worker pipelines them. A batch is one script
call (``REPLY_MANY``: reply, acknowledge and delete each call), not three commands per call: the
worker's loop packs and parses one command per batch. Replies go
only to reply streams that exist, so a caller that closed never gets its stream back.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any, NamedTuple

import redis.asyncio as aioredis
from redis import exceptions as redis_errors

from ditto.adapters.redis.keys import GROUP
from ditto.runtime.transports.envelope import CallEnvelope

__all__ = ("REPLIES_KEPT", "REPLY_MANY", "RETRY_DELAY", "ReplyWriter", "text")

logger = logging.getLogger("ditto.remote")

REPLIES_KEPT = 100_000
"""A reply stream is trimmed to about this many entries (its reader deletes what it read)."""
RETRY_DELAY = 0.2
"""Seconds between attempts when Redis fails."""

REPLY_MANY = """
for i = 1, #KEYS, 2 do
  local entry, reply = ARGV[i + 2], ARGV[i + 3]
  if reply ~= '' and redis.call('EXISTS', KEYS[i + 1]) == 1 then
    redis.call('XADD', KEYS[i + 1], 'MAXLEN', '~', ARGV[2], '*', 'e', reply)
  end
  redis.call('XACK', KEYS[i], ARGV[1], entry)
  redis.call('XDEL', KEYS[i], entry)
end
return #KEYS / 2
"""
"""KEYS: for each finished call, its calls stream and the caller's reply stream (the calls stream
again when there is nobody to answer). ARGV: the group, the reply streams' approximate cap, then
for each call its entry id and its sealed reply (empty: none). A reply to a caller that is gone
(its stream deleted on close) is dropped; every call is acknowledged and deleted. One script, so
a reply is never written without its acknowledgement (nor the other way round)."""


class ReplyWriter:
    """Writes a worker's answers through ``client``, batching those that finish together."""

    __slots__ = ("_client", "_outbox", "_reply_script", "_writing")

    def __init__(self, client: aioredis.Redis) -> None:
        self._client = client
        self._outbox: list[_Outgoing] = []
        self._reply_script: str | None = None
        self._writing = False

    async def send(
        self,
        stream: str,
        entry_id: bytes,
        envelope: CallEnvelope | None,
        reply: bytes | None,
        *,
        alone: bool = False,
    ) -> None:
        """Reply (when there is someone to reply to), acknowledge and delete the call; returns
        once that is written (``alone``: no other call is in flight, so none can join this
        batch: it is written without waiting a turn). A batch that fails is tried again until
        each call's deadline plus a grace; a call whose reply never got out stays pending, and a
        live worker runs it again after ``claim_idle_ms``."""
        give_up = (envelope.deadline if envelope is not None else time.time()) + 5.0
        written = asyncio.get_running_loop().create_future()
        self._outbox.append(_Outgoing(stream, entry_id, envelope, reply, give_up, written))
        if not self._writing:
            self._writing = True
            try:
                if not alone:
                    await asyncio.sleep(0)  # the calls finishing in this turn join the batch
                while self._outbox:
                    batch, self._outbox = self._outbox, []
                    await self._write(batch)
            finally:
                self._writing = False
        await written

    async def _write(self, batch: list[_Outgoing]) -> None:
        reloaded = False
        while batch:
            keys: list[str] = []
            arguments: list[Any] = [GROUP, REPLIES_KEPT]
            for item in batch:
                envelope, reply = item.envelope, item.reply
                if envelope is not None and reply is not None:
                    keys += (item.stream, envelope.reply_to)
                    arguments += (item.entry_id, reply)
                else:
                    keys += (item.stream, item.stream)
                    arguments += (item.entry_id, b"")
            try:
                sha = await self._reply_sha()
                await self._client.evalsha(sha, len(keys), *keys, *arguments)
            except (redis_errors.RedisError, OSError) as exc:
                if isinstance(exc, redis_errors.NoScriptError):
                    self._reply_script = None  # Redis lost its scripts: load again
                    if not reloaded:
                        reloaded = True
                        continue
                now = time.time()
                for item in batch:
                    if now > item.give_up:
                        logger.warning("could not answer %s %s", item.stream, text(item.entry_id))
                        _settle(item.written)
                batch = [item for item in batch if not item.written.done()]
                await asyncio.sleep(RETRY_DELAY)
                continue
            for item in batch:
                _settle(item.written)
            return

    async def _reply_sha(self) -> str:
        if self._reply_script is None:
            self._reply_script = await self._client.script_load(REPLY_MANY)
        return self._reply_script


class _Outgoing(NamedTuple):
    """A finished call waiting to be answered and acknowledged."""

    stream: str
    entry_id: bytes
    envelope: CallEnvelope | None
    reply: bytes | None
    give_up: float
    written: asyncio.Future[None]


def _settle(written: asyncio.Future[None]) -> None:
    if not written.done():
        written.set_result(None)


def text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value
