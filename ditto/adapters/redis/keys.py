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
* ``{prefix}seen:{execution id}`` — the calls entry id the execution id was sent as, set by the
  send script in the same step as the ``XADD`` (or, for older callers, by the first worker to
  take it), expiring a margin after the call's deadline: a worker never runs an execution id
  from another entry (a replayed envelope), only that entry, and again only when taken over from
  a dead holder.
* ``{prefix}dead`` — the dead-letter stream: calls that could not be opened or that exhausted
  their deliveries, with the reason, still sealed.

Each call is bound to its stream entry: the caller chooses the entry id (above the last one it
knows for that stream), seals it into the envelope, and :data:`SEND_SCRIPT` adds the call under
that id and records it as the execution id's seen entry. Redis never accepts an id at or below a
stream's last one, so that id is given once: a copy of the envelope added again (a replay) gets
another id, and the seen key names the original. When another caller's entry was newer, the
script adds the call under a Redis-chosen id instead (no error, no second round trip) and records
that one; the worker then checks the call in Redis (:mod:`~ditto.adapters.redis.admission`).
"""

from __future__ import annotations

__all__ = (
    "GROUP",
    "HEARTBEAT_SCRIPT",
    "RENEW_SCRIPT",
    "REPLIES_TTL_MS",
    "SEEN_MARGIN_MS",
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

SEEN_MARGIN_MS = 60_000
"""How long past a call's deadline its execution id stays remembered: a replay that arrives
after that is past its deadline on any worker whose clock is less than this far behind, so it is
never started (workers warn about a clock more than 2 s off Redis's)."""

REPLIES_TTL_MS = 120_000
"""A caller's reply stream expires this long after its caller last refreshed it (about every
second, while it listens): the stream of a caller killed without closing does not stay for
ever, and once it is gone workers drop the replies to it."""

SEND_SCRIPT = f"""
local now = redis.call('TIME')
local now_ms = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
if redis.call('ZCOUNT', KEYS[2], now_ms, '+inf') == 0 then return 'NO_WORKER' end
if redis.call('ZCOUNT', KEYS[4], now_ms, '+inf') == 0 then return 'KEY_MISMATCH' end
if redis.call('XLEN', KEYS[1]) >= tonumber(ARGV[1]) then return 'FULL' end
if redis.call('EXISTS', KEYS[3]) == 0 then
  redis.call('XADD', KEYS[3], 'MAXLEN', '0', '*', 'open', '1')
  redis.call('PEXPIRE', KEYS[3], {REPLIES_TTL_MS})
end
local entry = redis.pcall('XADD', KEYS[1], ARGV[3], 'e', ARGV[2])
if type(entry) == 'table' and entry.err then
  entry = redis.call('XADD', KEYS[1], '*', 'e', ARGV[2])
end
redis.call('SET', KEYS[5], entry, 'PX', ARGV[4], 'NX')
return entry
"""
"""KEYS: the calls stream, the node type's live-worker set, the caller's reply stream, the live
workers with the caller's key, the execution id's seen key. ARGV: the pending cap, the sealed
call, the entry id sealed in it, the seen key's TTL in ms. One round trip answers
"is anyone alive", "can anyone alive verify this call" (a worker with another secret would
drop it unread: the caller would only see a timeout), "is there room",
makes sure the reply stream exists (an empty stream: workers only reply to streams that exist,
so a closed caller's stream is never brought back), sends under the chosen id — or, when Redis
refuses it (at or below the stream's last id: another caller's entry was newer), under one
Redis chooses — and records the entry as the execution id's (``NX``: should the same sealed call
be sent twice, the first entry keeps it and the second is a replay). Returns the entry id used,
or ``NO_WORKER``, ``KEY_MISMATCH``, ``FULL``."""

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
