"""A remote worker's answers: reply, acknowledge and delete each finished call, written in
batches (group commit).

The first call to finish while nothing is being written writes at once, and keeps writing, one
pipeline per batch, whatever other calls finished meanwhile: a lone call pays no hand-off, and
under load replies share round trips as a hand-written worker pipelines them. Replies go only to
reply streams that exist (``REPLY_SCRIPT``), so a caller that closed never gets its stream back.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import NamedTuple

import redis.asyncio as aioredis
from redis import exceptions as redis_errors

from ditto.adapters.redis.keys import GROUP, REPLY_SCRIPT
from ditto.runtime.transports.envelope import CallEnvelope

__all__ = ("REPLIES_KEPT", "RETRY_DELAY", "ReplyWriter", "text")

logger = logging.getLogger("ditto.remote")

REPLIES_KEPT = 100_000
"""A reply stream is trimmed to about this many entries (its reader deletes what it read)."""
RETRY_DELAY = 0.2
"""Seconds between attempts when Redis fails."""


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
    ) -> None:
        """Reply (when there is someone to reply to), acknowledge and delete the call; returns
        once that is written. A batch that fails is tried again until each call's deadline plus
        a grace; a call whose reply never got out stays pending, and a live worker runs it again
        after ``claim_idle_ms``."""
        give_up = (envelope.deadline if envelope is not None else time.time()) + 5.0
        written = asyncio.get_running_loop().create_future()
        self._outbox.append(_Outgoing(stream, entry_id, envelope, reply, give_up, written))
        if not self._writing:
            self._writing = True
            try:
                while self._outbox:
                    batch, self._outbox = self._outbox, []
                    await self._write(batch)
            finally:
                self._writing = False
        await written

    async def _write(self, batch: list[_Outgoing]) -> None:
        while batch:
            try:
                # Not a transaction: a worker that dies between the reply and the acknowledgement
                # leaves the call pending, it runs again, and the caller keeps the first reply.
                reply_sha = await self._reply_sha()
                async with self._client.pipeline(transaction=False) as pipe:
                    for item in batch:
                        if item.envelope is not None and item.reply is not None:
                            pipe.evalsha(
                                reply_sha,
                                1,
                                item.envelope.reply_to,
                                item.reply,
                                REPLIES_KEPT,
                            )
                        pipe.xack(item.stream, GROUP, item.entry_id)
                        pipe.xdel(item.stream, item.entry_id)
                    outcomes = await pipe.execute(raise_on_error=False)
                failures = [o for o in outcomes if isinstance(o, BaseException)]
                if failures:
                    if any(isinstance(o, redis_errors.NoScriptError) for o in failures):
                        self._reply_script = None  # Redis lost its scripts: load again
                    raise failures[0]
            except (redis_errors.RedisError, OSError):
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
            self._reply_script = await self._client.script_load(REPLY_SCRIPT)
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
