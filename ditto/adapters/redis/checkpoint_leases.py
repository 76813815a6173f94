"""The leases of :class:`~ditto.adapters.redis.checkpoints.RedisCheckpointStore`: their keys, Lua
scripts, and how their replies become leases and errors.

Keys, under the store's prefix:

* ``checkpoint-lease:<id>`` — a hash: ``holder``, ``token``, ``expires_at`` (microseconds of
  the server's ``TIME``). It also gets a Redis expiry one second after ``expires_at``, so
  abandoned leases do not pile up; liveness is always decided by comparing ``expires_at`` with
  ``TIME`` inside the script, never by the key's expiry.
* ``checkpoint-lease-token`` — the store's one counter of fencing tokens (``INCR``), so tokens
  strictly increase over every acquire of the prefix and are never reused.

Every check and the write it guards run in one script: a lease is taken, renewed or released
atomically, and a fenced write (:data:`FENCE_LUA`, spliced into the store's write scripts)
checks its token in the same script that writes. Times are the server's, so callers on hosts
whose clocks disagree still agree on who holds a lease. Numbers go through Lua as strings
(``%.0f``): a number returned from Lua is truncated to an integer, and ``tostring`` keeps only
14 digits.
"""

from __future__ import annotations

from typing import Any

import redis.asyncio as aioredis

from ditto.runtime.checkpoints.leases import busy, lease_lost
from ditto.runtime.checkpoints.port import CheckpointError, Lease

__all__ = (
    "ACQUIRE_SCRIPT",
    "FENCE_LUA",
    "RELEASE_SCRIPT",
    "RENEW_SCRIPT",
    "RedisLeases",
    "busy_from_reply",
)

FENCE_LUA = """
local function now_us()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000000 + tonumber(t[2])
end
local function lease_of(key)
  local held = redis.call('HMGET', key, 'holder', 'token', 'expires_at')
  if held[2] and (tonumber(held[3]) or 0) > now_us() then return held end
  return nil
end
local function fenced(key, token)
  local held = lease_of(key)
  return held ~= nil and held[2] == token
end
"""
"""Lua helpers: the server's time in microseconds; the live lease of a lease key (``holder``,
``token``, ``expires_at``) or nil; whether a lease key is live with a token."""

ACQUIRE_SCRIPT = (
    FENCE_LUA
    + """
local now = now_us()
local held = lease_of(KEYS[1])
if held then return {0, held[1], held[3], string.format('%.0f', now)} end
local token = redis.call('INCR', KEYS[2])
local expires = now + tonumber(ARGV[2])
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[1], 'holder', ARGV[1], 'token', string.format('%.0f', token),
  'expires_at', string.format('%.0f', expires))
redis.call('PEXPIRE', KEYS[1], math.floor(tonumber(ARGV[2]) / 1000) + 1000)
return {1, token, string.format('%.0f', expires)}
"""
)
"""KEYS: the lease, the token counter. ARGV: holder, ttl in microseconds. Returns ``{1, token,
expires_at}`` or, while held, ``{0, holder, expires_at, now}``."""

RENEW_SCRIPT = (
    FENCE_LUA
    + """
if not fenced(KEYS[1], ARGV[1]) then return false end
local expires = now_us() + tonumber(ARGV[2])
redis.call('HSET', KEYS[1], 'expires_at', string.format('%.0f', expires))
redis.call('PEXPIRE', KEYS[1], math.floor(tonumber(ARGV[2]) / 1000) + 1000)
return {redis.call('HGET', KEYS[1], 'holder'), string.format('%.0f', expires)}
"""
)
"""KEYS: the lease. ARGV: token, ttl in microseconds. Returns ``{holder, expires_at}``, or nil
when the lease is not live with this token."""

RELEASE_SCRIPT = """
if redis.call('HGET', KEYS[1], 'token') == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"""
"""KEYS: the lease. ARGV: token. Deletes the lease only if it is still this token's."""


def _us(seconds: float) -> int:
    return max(1, round(seconds * 1_000_000))


def busy_from_reply(holder: bytes, expires_us: bytes, now_us: bytes) -> CheckpointError:
    """``CHECKPOINT_BUSY`` from a script's ``holder, expires_at, now``."""
    return busy(holder.decode(), (int(expires_us) - int(now_us)) / 1_000_000)


class RedisLeases:
    """The lease calls of one store (its key names and registered scripts; ``EVALSHA``, with
    the script sent again when the server lost it)."""

    def __init__(self, client: aioredis.Redis, prefix: str) -> None:
        self._prefix = prefix
        self.token_key = prefix + "checkpoint-lease-token"
        self._acquire = client.register_script(ACQUIRE_SCRIPT)
        self._renew = client.register_script(RENEW_SCRIPT)
        self._release = client.register_script(RELEASE_SCRIPT)

    def key(self, checkpoint_id: str) -> str:
        """The lease hash of ``checkpoint_id``."""
        return f"{self._prefix}checkpoint-lease:{checkpoint_id}"

    async def acquire(self, checkpoint_id: str, holder: str, ttl: float) -> Lease:
        reply: list[Any] = await self._acquire(
            keys=[self.key(checkpoint_id), self.token_key], args=[holder, _us(ttl)]
        )
        if reply[0] == 0:
            raise busy_from_reply(reply[1], reply[2], reply[3])
        return Lease(checkpoint_id, holder, int(reply[1]), int(reply[2]) / 1_000_000)

    async def renew(self, lease: Lease, ttl: float) -> Lease:
        reply: list[Any] | None = await self._renew(
            keys=[self.key(lease.checkpoint_id)], args=[str(lease.token), _us(ttl)]
        )
        if reply is None:
            raise lease_lost()
        return Lease(lease.checkpoint_id, reply[0].decode(), lease.token, int(reply[1]) / 1_000_000)

    async def release(self, lease: Lease) -> None:
        await self._release(keys=[self.key(lease.checkpoint_id)], args=[str(lease.token)])
