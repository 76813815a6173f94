"""``RedisCheckpointStore``: checkpoints in Redis, shared by every process that uses the prefix.

Keys, under ``prefix``:

* ``checkpoint:<id>`` — a hash: ``scope``, ``envelope`` (raw bytes), ``updated_at`` (unix
  seconds), ``records`` (the count);
* ``checkpoint-records:<id>`` — a list, one element per record: ``(key, value)`` as one
  MessagePack array;
* ``checkpoints`` — a sorted set of ids scored by ``updated_at``: the index :meth:`list` reads.

``save`` and ``delete`` are one ``MULTI``/``EXEC`` each; ``append`` is one Lua script, so the
existence check and the push are atomic (a concurrent ``delete`` lands wholly before or wholly
after it). Every operation touches the shared index, so the keys must live on one node: plain
Redis, or a Cluster with a hash-tagged prefix such as ``"{ditto}:"``.

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

from ditto.errors import ErrorCode, ExceptionMapping, map_exceptions
from ditto.runtime.checkpoints.port import (
    CheckpointError,
    CheckpointInfo,
    StoredCheckpoint,
    checked_bytes,
    checked_id,
    checked_limit,
    checked_records,
    checked_scope,
    closed,
    not_found,
)

__all__ = ("APPEND_SCRIPT", "RedisCheckpointStore")

APPEND_SCRIPT = """
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
if #ARGV > 2 then
  local count = 0
  for first = 3, #ARGV, 4000 do
    count = redis.call('RPUSH', KEYS[2], unpack(ARGV, first, math.min(first + 3999, #ARGV)))
  end
  redis.call('HSET', KEYS[1], 'updated_at', ARGV[2], 'records', count)
  redis.call('ZADD', KEYS[3], ARGV[2], ARGV[1])
end
return 1
"""
"""KEYS: the hash, the records list, the index; ARGV: the id, ``updated_at``, then one encoded
record each. Returns 0 when the checkpoint does not exist (nothing is written), else 1.
``unpack`` goes in slices: Lua's stack holds about 8,000 values."""

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
        self._append = client.register_script(APPEND_SCRIPT)
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

    # ----------------------------------------------------------------- writes

    async def save(self, checkpoint_id: str, scope: str, envelope: bytes) -> None:
        checkpoint_id = checked_id(checkpoint_id)
        scope = checked_scope(scope)
        envelope = checked_bytes(envelope, "an envelope")
        self._check_open()
        key = self.checkpoint_key(checkpoint_id)
        now = float(self._clock())
        with _redis_errors:
            async with self.client.pipeline(transaction=True) as pipe:
                pipe.hset(key, mapping={"scope": scope, "envelope": envelope, "updated_at": now})
                pipe.hsetnx(key, "records", 0)
                pipe.zadd(self.index_key, {checkpoint_id: now})
                await pipe.execute()

    async def append(self, checkpoint_id: str, records: Sequence[tuple[str, bytes]]) -> None:
        checkpoint_id = checked_id(checkpoint_id)
        copied = checked_records(records)
        self._check_open()
        arguments: builtins.list[Any] = [checkpoint_id, float(self._clock())]
        arguments.extend(_encode_record(record) for record in copied)
        keys = [
            self.checkpoint_key(checkpoint_id),
            self.records_key(checkpoint_id),
            self.index_key,
        ]
        with _redis_errors:
            written = await self._append(keys=keys, args=arguments)
        if written == 0:
            raise not_found()

    async def delete(self, checkpoint_id: str) -> bool:
        checkpoint_id = checked_id(checkpoint_id)
        self._check_open()
        with _redis_errors:
            async with self.client.pipeline(transaction=True) as pipe:
                pipe.delete(self.checkpoint_key(checkpoint_id))
                pipe.delete(self.records_key(checkpoint_id))
                pipe.zrem(self.index_key, checkpoint_id)
                existed, _, _ = await pipe.execute()
        return bool(existed)

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


def _info(member: bytes, scope: bytes, score: float, count: bytes | None) -> CheckpointInfo:
    try:
        return CheckpointInfo(member.decode(), scope.decode(), float(score), int(count or b""))
    except ValueError as exc:  # UnicodeDecodeError is one
        raise _corrupt() from exc
