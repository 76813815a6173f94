"""Key names and Lua scripts shared by the Redis Streams caller and worker.

Everything lives under one prefix (default ``ditto:``):

* ``{prefix}calls:{node type}`` — a stream of sealed calls, read by the consumer group
  ``workers``. A worker deletes an entry once it has replied, so the stream's length is the
  number of calls waiting or running: the send script refuses a call over the cap.
* ``{prefix}replies:{caller id}`` — a stream of sealed replies per runtime.
* ``{prefix}nodes:{node type}`` — a sorted set: worker id -> when its heartbeat expires (in the
  Redis server's milliseconds, so callers and workers never compare their own clocks).
* ``{prefix}nodes:{node type}:key:{fingerprint}`` — the same, for the workers holding the
  secret of that fingerprint (:attr:`~ditto.runtime.transports.envelope.Signer.fingerprint`):
  a caller sends only when one of them is alive.
* ``{prefix}worker:{worker id}`` — the worker's self-description, expiring with its heartbeat.
* ``{prefix}cancel`` — a pub/sub channel of abandoned execution ids.
* ``{prefix}seen:{execution id}`` — the calls entry id that first took this execution id,
  expiring a margin after the call's deadline: a worker never runs an execution id a second time
  from another entry (a replayed envelope), only the same entry taken over from a dead holder.
* ``{prefix}dead`` — the dead-letter stream: calls that could not be opened or that exhausted
  their deliveries, with the reason, still sealed.
"""

from __future__ import annotations

__all__ = (
    "GROUP",
    "HEARTBEAT_SCRIPT",
    "RENEW_SCRIPT",
    "SEND_SCRIPT",
    "calls_key",
    "cancel_channel",
    "dead_key",
    "keyed_nodes_key",
    "nodes_key",
    "replies_key",
    "seen_key",
    "worker_key",
    "worker_pattern",
)

GROUP = "workers"

SEND_SCRIPT = """
local now = redis.call('TIME')
local now_ms = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
if redis.call('ZCOUNT', KEYS[2], now_ms, '+inf') == 0 then return 'NO_WORKER' end
if redis.call('ZCOUNT', KEYS[4], now_ms, '+inf') == 0 then return 'KEY_MISMATCH' end
if redis.call('XLEN', KEYS[1]) >= tonumber(ARGV[1]) then return 'FULL' end
if redis.call('EXISTS', KEYS[3]) == 0 then
  redis.call('XADD', KEYS[3], 'MAXLEN', '0', '*', 'open', '1')
end
redis.call('XADD', KEYS[1], '*', 'e', ARGV[2])
return 'OK'
"""
"""KEYS: the calls stream, the node type's live-worker set, the caller's reply stream, the live
workers with the caller's key. ARGV: the pending cap, the sealed call. One round trip answers
"is anyone alive", "can anyone alive verify this call" (a worker with another secret would
drop it unread: the caller would only see a timeout), "is there room",
makes sure the reply stream exists (an empty stream: workers only reply to streams that exist,
so a closed caller's stream is never brought back) and sends."""

HEARTBEAT_SCRIPT = """
local now = redis.call('TIME')
local now_ms = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
local ttl = tonumber(ARGV[2])
for i = 2, #KEYS do
  redis.call('ZADD', KEYS[i], now_ms + ttl, ARGV[1])
  redis.call('ZREMRANGEBYSCORE', KEYS[i], '-inf', now_ms)
end
redis.call('SET', KEYS[1], ARGV[3], 'PX', ttl)
return now_ms
"""
"""KEYS: the worker key, then each served node type's live-worker set. ARGV: worker id, TTL in
ms, the worker's description. Returns the server's time in ms."""


RENEW_SCRIPT = """
local renewed = 0
for i = 3, #ARGV do
  local pending = redis.call('XPENDING', KEYS[1], ARGV[1], ARGV[i], ARGV[i], 1)
  if #pending > 0 and pending[1][2] == ARGV[2] then
    redis.call('XCLAIM', KEYS[1], ARGV[1], ARGV[2], 0, ARGV[i], 'JUSTID')
    renewed = renewed + 1
  end
end
return renewed
"""
"""KEYS: a calls stream. ARGV: the group, this worker's id, then the entry ids it runs. Resets
the idle time of those still pending *for this worker* (never takes one back from a worker
that took it over); returns how many."""


def calls_key(prefix: str, node_type: str) -> str:
    return f"{prefix}calls:{node_type}"


def replies_key(prefix: str, caller_id: str) -> str:
    return f"{prefix}replies:{caller_id}"


def nodes_key(prefix: str, node_type: str) -> str:
    return f"{prefix}nodes:{node_type}"


def keyed_nodes_key(prefix: str, node_type: str, fingerprint: str) -> str:
    return f"{prefix}nodes:{node_type}:key:{fingerprint}"


def worker_key(prefix: str, worker_id: str) -> str:
    return f"{prefix}worker:{worker_id}"


def worker_pattern(prefix: str) -> str:
    return f"{prefix}worker:*"


def cancel_channel(prefix: str) -> str:
    return f"{prefix}cancel"


def seen_key(prefix: str, execution_id: str) -> str:
    return f"{prefix}seen:{execution_id}"


def dead_key(prefix: str) -> str:
    return f"{prefix}dead"
