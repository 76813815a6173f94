"""Lease renewal on a thread: a worker keeps the calls it runs from looking abandoned even while
a handler blocks its event loop.

A call stays in the group's pending list while its worker runs it; a live worker takes over a
call idle for ``claim_idle_ms``. Renewing on the event loop failed exactly when it mattered: a
handler that computes (or calls ``time.sleep``) without awaiting stops the loop, the renewal
with it, and a second worker ran the call again while the first was still on it. Here a thread
with its own synchronous client renews every ``interval`` (a fifth of ``claim_idle_ms``), the
loop blocked or not: a blocking ``time.sleep`` or C call releases the GIL, and pure Python
computing is interrupted for other threads every few milliseconds.

The renewal only resets calls still pending *for this worker* (``RENEW_SCRIPT``), so a worker
that comes back from a long stall never takes back a call another worker took over.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

import redis
import redis.asyncio as aioredis
from redis import exceptions as redis_errors

from ditto.adapters.redis.keys import GROUP, RENEW_SCRIPT

__all__ = ("LeaseRenewal", "sync_client_like")

logger = logging.getLogger("ditto.remote")

_COPIED = (
    "host",
    "port",
    "db",
    "username",
    "password",
    "path",
    "client_name",
    "ssl_keyfile",
    "ssl_certfile",
    "ssl_cert_reqs",
    "ssl_ca_certs",
    "ssl_ca_data",
    "ssl_check_hostname",
    "ssl_password",
    "ssl_min_version",
    "ssl_ciphers",
)
"""What a synchronous connection needs from an asyncio one (the rest are asyncio internals)."""
_CONNECTIONS = {
    "Connection": redis.Connection,
    "SSLConnection": redis.SSLConnection,
    "UnixDomainSocketConnection": redis.UnixDomainSocketConnection,
}
_SOCKET_TIMEOUT = 2.0
"""A renewal never waits long on an unresponsive Redis: the next one tries again."""


def sync_client_like(client: aioredis.Redis) -> redis.Redis:
    """A synchronous client for the server ``client`` talks to (same address, database and
    credentials), with one connection: what the renewal thread uses."""
    pool: Any = client.connection_pool
    settings = {key: value for key, value in pool.connection_kwargs.items() if key in _COPIED}
    connection_class = _CONNECTIONS.get(pool.connection_class.__name__, redis.Connection)
    return redis.Redis(
        connection_pool=redis.ConnectionPool(
            connection_class=connection_class,
            max_connections=1,
            socket_timeout=_SOCKET_TIMEOUT,
            socket_connect_timeout=_SOCKET_TIMEOUT,
            **settings,
        )
    )


class LeaseRenewal:
    """Renews, every ``interval`` seconds, the calls this worker holds.

    Args:
        client: A synchronous client of its own (the thread's; closed by :meth:`stop`).
        worker_id: The consumer name the calls are pending for.
        interval: Seconds between renewals.
    """

    def __init__(self, client: redis.Redis, worker_id: str, interval: float) -> None:
        self._client = client
        self._worker_id = worker_id
        self.interval = interval
        self._held: dict[tuple[str, bytes], None] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._script: Any = client.register_script(RENEW_SCRIPT)
        self.renewals = 0
        """Rounds that renewed at least one call (for tests and debugging)."""

    def hold(self, stream: str, entry_id: bytes) -> None:
        """Renew this call from now on (called from the event loop when the call is taken)."""
        with self._lock:
            self._held[stream, entry_id] = None

    def release(self, stream: str, entry_id: bytes) -> None:
        """Stop renewing it (the call was answered, or is left to its holder)."""
        with self._lock:
            self._held.pop((stream, entry_id), None)

    def start(self) -> None:
        """Start the thread (idempotent)."""
        if self._thread is None:
            self._thread = threading.Thread(
                target=self._run, name=f"ditto-renewal-{self._worker_id}", daemon=True
            )
            self._thread.start()

    def stop(self) -> None:
        """Stop the thread, wait for it (at most one renewal) and close its client."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=_SOCKET_TIMEOUT * 2)
            self._thread = None
        self._client.close()

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            with self._lock:
                held = list(self._held)
            if held:
                self.renew(held)

    def renew(self, held: list[tuple[str, bytes]]) -> None:
        """One round (also called directly by tests): Redis failures are ridden out."""
        by_stream: dict[str, list[bytes]] = {}
        for stream, entry_id in held:
            by_stream.setdefault(stream, []).append(entry_id)
        try:
            with self._client.pipeline(transaction=False) as pipe:
                for stream, ids in by_stream.items():
                    self._script(keys=[stream], args=[GROUP, self._worker_id, *ids], client=pipe)
                pipe.execute(raise_on_error=False)
        except (redis_errors.RedisError, OSError) as exc:
            logger.debug("renewing the calls in flight failed: %s", type(exc).__name__)
            return
        self.renewals += 1
