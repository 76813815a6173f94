"""``RedisCheckpointStore``: checkpoints in Redis, shared by every process that uses the prefix.

Keys, under ``prefix``:

* ``checkpoint:<id>`` — a hash: ``scope``, ``envelope`` (raw bytes), ``updated_at`` (unix
  seconds), ``records`` (the count);
* ``checkpoint-records:<id>`` — a list, one element per record: ``(key, value)`` as one
  MessagePack array;
* ``checkpoints`` — a sorted set of ids scored by ``updated_at``: the index :meth:`list` reads;
* ``checkpoint-lease:<id>`` and ``checkpoint-lease-token`` — the leases
  (:mod:`~ditto.adapters.redis.checkpoint_leases`).

``save``, ``append`` and ``delete`` are one Lua script each, so the checks and the write are
atomic: an append's existence check and its push (a concurrent ``delete`` lands wholly before
or wholly after it), and a fenced write's lease check (on the server's clock) and its write, so
a stale holder never writes after a takeover. Every operation touches the shared index, so the
keys must live on one node: plain Redis, or a Cluster with a hash-tagged prefix such as
``"{ditto}:"``.

Durability is Redis's: with AOF ``appendfsync everysec`` (or better) a returned call survives a
Redis restart; without persistence it does not.
"""

from __future__ import annotations

import builtins
import time
from collections.abc import Callable, Sequence
from typing import Any, Self, cast

import msgspec
import redis.asyncio as aioredis
from redis import exceptions as redis_errors

from ditto.adapters.redis.checkpoint_leases import FENCE_LUA, RedisLeases, busy_from_reply
from ditto.errors import ErrorCode, ExceptionMapping, map_exceptions
from ditto.runtime.checkpoints.leases import (
    checked_fence,
    checked_holder,
    checked_lease,
    checked_ttl,
    lease_lost,
)
from ditto.runtime.checkpoints.port import (
    CheckpointError,
    CheckpointInfo,
    Lease,
    StoredCheckpoint,
    checked_bytes,
    checked_id,
    checked_limit,
    checked_records,
    checked_scope,
    closed,
    not_found,
)

__all__ = ("APPEND_SCRIPT", "DELETE_SCRIPT", "SAVE_SCRIPT", "RedisCheckpointStore")

SAVE_SCRIPT = (
    FENCE_LUA
    + """
if ARGV[5] ~= '' and not fenced(KEYS[3], ARGV[5]) then return 0 end
redis.call('HSET', KEYS[1], 'scope', ARGV[2], 'envelope', ARGV[3], 'updated_at', ARGV[4])
redis.call('HSETNX', KEYS[1], 'records', 0)
redis.call('ZADD', KEYS[2], ARGV[4], ARGV[1])
return 1
"""
)
"""KEYS: the hash, the index, the lease; ARGV: the id, scope, envelope, ``updated_at``, the
fencing token (``""``: none). Returns 0 when the fence is not held (nothing is written)."""

APPEND_SCRIPT = (
    FENCE_LUA
    + """
if ARGV[3] ~= '' and not fenced(KEYS[4], ARGV[3]) then return -1 end
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
if #ARGV > 3 then
  local count = 0
  for first = 4, #ARGV, 4000 do
    count = redis.call('RPUSH', KEYS[2], unpack(ARGV, first, math.min(first + 3999, #ARGV)))
  end
  redis.call('HSET', KEYS[1], 'updated_at', ARGV[2], 'records', count)
  redis.call('ZADD', KEYS[3], ARGV[2], ARGV[1])
end
return 1
"""
)
"""KEYS: the hash, the records list, the index, the lease; ARGV: the id, ``updated_at``, the
fencing token (``""``: none), then one encoded record each. Returns -1 when the fence is not
held, 0 when the checkpoint does not exist (nothing is written either way), else 1.
``unpack`` goes in slices: Lua's stack holds about 8,000 values."""

DELETE_SCRIPT = (
    FENCE_LUA
    + """
local held = lease_of(KEYS[4])
if ARGV[2] ~= '' then
  if held == nil or held[2] ~= ARGV[2] then return {-1} end
elseif held then
  return {-2, held[1], held[3], string.format('%.0f', now_us())}
end
local existed = redis.call('DEL', KEYS[1])
redis.call('DEL', KEYS[2], KEYS[4])
redis.call('ZREM', KEYS[3], ARGV[1])
return {existed}
"""
)
"""KEYS: the hash, the records list, the index, the lease; ARGV: the id, the fencing token
(``""``: none). Returns ``{-1}`` when the fence is not held, ``{-2, holder, expires_at, now}``
without a fence while a lease is live (nothing is deleted either way), else ``{existed}``; the
lease goes with the checkpoint (released, or expired)."""

_LIST_PAGE = 100

_encode_record = msgspec.msgpack.Encoder().encode
_decode_record = msgspec.msgpack.Decoder(tuple[str, bytes]).decode


def _unavailable(exc: BaseException) -> CheckpointError:
    # Never the driver's text: it can carry the host and, with some URLs, credentials.
    return CheckpointError(
        ErrorCode.CHECKPOINT_STORE_UNAVAILABLE,
        "the checkpoint store is unreachable",
        retryable=True,
    )


def _corrupt() -> CheckpointError:
    return CheckpointError(
        ErrorCode.CHECKPOINT_CORRUPT,
        "the checkpoint store holds a value it did not write or cannot read",
    )


def _refused(exc: redis_errors.ResponseError) -> CheckpointError:
    """WRONGTYPE (a key this store did not write) is corrupt data; any other refusal (READONLY
    after a failover, OOM, LOADING, NOPERM) is an outage too."""
    return _corrupt() if "WRONGTYPE" in str(exc) else _unavailable(exc)


_REDIS_ERRORS: ExceptionMapping = {
    redis_errors.ResponseError: _refused,
    (redis_errors.RedisError, OSError): _unavailable,
}
"""The store's one driver-error boundary: Redis failures as coded checkpoint errors, the
driver's exception kept as the cause for the log."""
_redis_errors = map_exceptions(_REDIS_ERRORS)


class RedisCheckpointStore:
    """A :class:`~ditto.runtime.checkpoints.port.CheckpointStore` in Redis.

    Args:
        client: A ``redis.asyncio.Redis`` with ``decode_responses=False``. The application owns
            it (this store never closes an injected client). Each concurrent call holds one of
            its connections while it runs: give it a pool sized for the concurrency (see
            :meth:`from_url`).
        prefix: Prefix of every key (non-empty).
        clock: Unix seconds for ``updated_at`` (default :func:`time.time`).
    """

    def __init__(
        self,
        client: aioredis.Redis,
        *,
        prefix: str = "ditto:",
        clock: Callable[[], float] = time.time,
    ) -> None:
        if not isinstance(prefix, str) or not prefix:
            raise CheckpointError(ErrorCode.INVALID_INPUT, "prefix must be a non-empty string")
        self.client = client
        self.prefix = prefix
        self.index_key = prefix + "checkpoints"
        self._clock = clock
        self._save = client.register_script(SAVE_SCRIPT)
        self._append = client.register_script(APPEND_SCRIPT)
        self._delete = client.register_script(DELETE_SCRIPT)
        self._leases = RedisLeases(client, prefix)
        self._owns_client = False
        self._closed = False

    @classmethod
    def from_url(
        cls,
        url: str,
        *,
        prefix: str = "ditto:",
        max_connections: int = 32,
        clock: Callable[[], float] = time.time,
    ) -> Self:
        """A store with its own client for ``url`` (closed by :meth:`aclose`). No connection
        is opened until the first call. At most ``max_connections`` are opened; a call that
        finds them all busy waits for one (up to 20 s, then ``CHECKPOINT_STORE_UNAVAILABLE``)
        instead of opening one socket per concurrent append.

        Raises:
            CheckpointError: ``INVALID_INPUT`` for a malformed URL (the message does not
                repeat it) or a ``max_connections`` below 1.
        """
        if type(max_connections) is not int or max_connections < 1:
            raise CheckpointError(
                ErrorCode.INVALID_INPUT, "max_connections must be a positive integer"
            )
        try:
            pool = aioredis.BlockingConnectionPool.from_url(url, max_connections=max_connections)
        except (ValueError, TypeError) as exc:
            raise CheckpointError(ErrorCode.INVALID_INPUT, "the Redis URL is malformed") from exc
        store = cls(aioredis.Redis.from_pool(pool), prefix=prefix, clock=clock)
        store._owns_client = True
        return store

    def checkpoint_key(self, checkpoint_id: str) -> str:
        """The hash of ``checkpoint_id``."""
        return f"{self.prefix}checkpoint:{checkpoint_id}"

    def records_key(self, checkpoint_id: str) -> str:
        """The records list of ``checkpoint_id``."""
        return f"{self.prefix}checkpoint-records:{checkpoint_id}"

    def lease_key(self, checkpoint_id: str) -> str:
        """The lease hash of ``checkpoint_id``."""
        return self._leases.key(checkpoint_id)

    # ----------------------------------------------------------------- writes

    async def save(
        self, checkpoint_id: str, scope: str, envelope: bytes, *, fence: Lease | None = None
    ) -> None:
        checkpoint_id = checked_id(checkpoint_id)
        scope = checked_scope(scope)
        envelope = checked_bytes(envelope, "an envelope")
        token = checked_fence(checkpoint_id, fence)
        self._check_open()
        keys = [self.checkpoint_key(checkpoint_id), self.index_key, self.lease_key(checkpoint_id)]
        arguments: builtins.list[Any] = [checkpoint_id, scope, envelope, float(self._clock())]
        arguments.append(_token(token))
        with _redis_errors:
            written = await self._save(keys=keys, args=arguments)
        if written == 0:
            raise lease_lost()

    async def append(
        self,
        checkpoint_id: str,
        records: Sequence[tuple[str, bytes]],
        *,
        fence: Lease | None = None,
    ) -> None:
        checkpoint_id = checked_id(checkpoint_id)
        copied = checked_records(records)
        token = checked_fence(checkpoint_id, fence)
        self._check_open()
        arguments: builtins.list[Any] = [checkpoint_id, float(self._clock()), _token(token)]
        arguments.extend(_encode_record(record) for record in copied)
        with _redis_errors:
            written = await self._append(keys=self._keys(checkpoint_id), args=arguments)
        if written == 0:
            raise not_found()
        if written == -1:
            raise lease_lost()

    async def delete(self, checkpoint_id: str, *, fence: Lease | None = None) -> bool:
        checkpoint_id = checked_id(checkpoint_id)
        token = checked_fence(checkpoint_id, fence)
        self._check_open()
        with _redis_errors:
            reply = await self._delete(
                keys=self._keys(checkpoint_id), args=[checkpoint_id, _token(token)]
            )
        if reply[0] == -1:
            raise lease_lost()
        if reply[0] == -2:
            raise busy_from_reply(reply[1], reply[2], reply[3])
        return bool(reply[0])

    def _keys(self, checkpoint_id: str) -> builtins.list[str]:
        return [
            self.checkpoint_key(checkpoint_id),
            self.records_key(checkpoint_id),
            self.index_key,
            self.lease_key(checkpoint_id),
        ]

    # ----------------------------------------------------------------- leases

    async def acquire(self, checkpoint_id: str, holder: str, ttl: float) -> Lease:
        checkpoint_id = checked_id(checkpoint_id)
        holder = checked_holder(holder)
        ttl = checked_ttl(ttl)
        self._check_open()
        with _redis_errors:
            return await self._leases.acquire(checkpoint_id, holder, ttl)

    async def renew(self, lease: Lease, ttl: float) -> Lease:
        lease = checked_lease(lease)
        ttl = checked_ttl(ttl)
        self._check_open()
        with _redis_errors:
            return await self._leases.renew(lease, ttl)

    async def release(self, lease: Lease) -> None:
        lease = checked_lease(lease)
        self._check_open()
        with _redis_errors:
            await self._leases.release(lease)

    # ----------------------------------------------------------------- reads

    async def load(self, checkpoint_id: str) -> StoredCheckpoint | None:
        checkpoint_id = checked_id(checkpoint_id)
        self._check_open()
        with _redis_errors:
            async with self.client.pipeline(transaction=True) as pipe:
                pipe.hmget(self.checkpoint_key(checkpoint_id), ["scope", "envelope", "updated_at"])
                pipe.lrange(self.records_key(checkpoint_id), 0, -1)
                (scope, envelope, updated_at), raw_records = await pipe.execute()
        if scope is None and envelope is None and updated_at is None:
            return None
        if scope is None or envelope is None or updated_at is None:
            raise _corrupt()
        try:
            records = tuple(_decode_record(raw) for raw in raw_records)
            return StoredCheckpoint(
                checkpoint_id, scope.decode(), envelope, records, float(updated_at)
            )
        except (msgspec.DecodeError, msgspec.ValidationError, ValueError) as exc:
            raise _corrupt() from exc

    async def list(
        self, *, scope: str | None = None, limit: int = 100
    ) -> builtins.list[CheckpointInfo]:
        if scope is not None:
            scope = checked_scope(scope)
        limit = checked_limit(limit)
        self._check_open()
        # Without a filter one page usually suffices; with one, read the index newest first in
        # pages until enough match. An id deleted between the two reads has no hash: skipped.
        page = limit if scope is None else max(limit, _LIST_PAGE)
        found: builtins.list[CheckpointInfo] = []
        seen: set[bytes] = set()
        start = 0
        with _redis_errors:
            while len(found) < limit:
                entries = cast(
                    builtins.list[tuple[bytes, float]],
                    await self.client.zrevrange(
                        self.index_key, start, start + page - 1, withscores=True
                    ),
                )
                if not entries:
                    break
                async with self.client.pipeline(transaction=False) as pipe:
                    for member, _ in entries:
                        pipe.hmget(self.checkpoint_key(member.decode()), ["scope", "records"])
                    fields = await pipe.execute()
                for (member, score), (stored_scope, count) in zip(entries, fields, strict=True):
                    if stored_scope is None or member in seen:
                        continue
                    seen.add(member)
                    info = _info(member, stored_scope, score, count)
                    if scope is None or info.scope == scope:
                        found.append(info)
                        if len(found) == limit:
                            break
                if len(entries) < page:
                    break
                start += page
        return found

    # ----------------------------------------------------------------- lifecycle

    async def aclose(self) -> None:
        """Close the client if :meth:`from_url` built it (idempotent)."""
        if self._closed:
            return
        self._closed = True
        if self._owns_client:
            await self.client.aclose()

    def _check_open(self) -> None:
        if self._closed:
            raise closed()


def _token(token: int | None) -> str:
    return "" if token is None else str(token)


def _info(member: bytes, scope: bytes, score: float, count: bytes | None) -> CheckpointInfo:
    try:
        return CheckpointInfo(member.decode(), scope.decode(), float(score), int(count or b""))
    except ValueError as exc:  # UnicodeDecodeError is one
        raise _corrupt() from exc
