"""The lease a run holds on its checkpoint while it runs: taken before the checkpoint is read,
renewed in the background, handed to every write as its fence, released at the end.

Two processes resuming one checkpoint (a cron job and a crash handler, two hosts) would both
run every unfinished task. The store's lease (:meth:`CheckpointStore.acquire`) lets only one of
them in: the second gets ``CHECKPOINT_BUSY`` naming the holder, or waits for it with ``wait=``.
The lease is time-bounded so that a holder killed with ``kill -9`` does not keep its checkpoint
for ever: it expires ``ttl`` after the last renewal, and the next opener takes it. A holder that
stalled past its lease (a blocked event loop, a long GC pause, a network partition) and came back
cannot write any more: every write carries the lease as its fence, and the store refuses a
fence that is no longer current with ``CHECKPOINT_LEASE_LOST`` — so a stale process never
overwrites the one that took over.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
from secrets import token_hex
from typing import TYPE_CHECKING

from ditto.errors import DittoError, ErrorCode

if TYPE_CHECKING:
    from ditto.runtime.checkpoints.port import CheckpointStore, Lease

__all__ = ("HeldLease", "hold", "holder_name")

logger = logging.getLogger("ditto.runtime.checkpoints")

_FIRST_POLL = 0.02
"""Seconds before a waiting opener first asks again; doubled each time up to ``_LAST_POLL``."""
_LAST_POLL = 0.5


def holder_name() -> str:
    """Who this process is, as a second opener sees it: ``host:pid:<random>`` (the random part
    tells two runs of one process apart)."""
    return f"{socket.gethostname()}:{os.getpid()}:{token_hex(4)}"


class HeldLease:
    """A checkpoint lease this process holds: renewed every third of its ``ttl`` by a task of
    its own until :meth:`release`.

    A renewal the store refuses (the lease expired and another run took it) marks the lease
    :attr:`lost` and stops renewing; the next fenced write then fails with
    ``CHECKPOINT_LEASE_LOST`` and the run stops. A store that cannot be reached is asked again
    at the next tick: the lease may still be renewed in time.
    """

    __slots__ = ("_lease", "_lost", "_released", "_renewing", "_store", "_ttl")

    def __init__(self, store: CheckpointStore, lease: Lease, ttl: float) -> None:
        self._store = store
        self._lease = lease
        self._ttl = ttl
        self._lost = False
        self._released = False
        self._renewing = asyncio.create_task(
            self._renew(), name=f"ditto-lease:{lease.checkpoint_id}"
        )

    @property
    def fence(self) -> Lease:
        """The lease as last renewed: what every write of the checkpoint passes as ``fence``."""
        return self._lease

    @property
    def lost(self) -> bool:
        """Whether the store refused a renewal (another run holds the checkpoint now)."""
        return self._lost

    async def _renew(self) -> None:
        interval = self._ttl / 3
        while True:
            await asyncio.sleep(interval)
            try:
                self._lease = await self._store.renew(self._lease, self._ttl)
            except DittoError as exc:
                if exc.code == ErrorCode.CHECKPOINT_LEASE_LOST:
                    self._lost = True
                    logger.warning(
                        "lost the lease of checkpoint %r: another run holds it now; this run "
                        "writes nothing more to it",
                        self._lease.checkpoint_id,
                    )
                    return
                logger.warning(
                    "could not renew the lease of checkpoint %r (%s); trying again",
                    self._lease.checkpoint_id,
                    exc.code,
                )

    async def release(self) -> None:
        """Stop renewing and give the lease up (idempotent).

        The release goes through even when the caller is being cancelled (a run abandoned by
        a timeout or a closed stream hands its checkpoint on at once, not a ``ttl`` later). A
        store that cannot be reached is logged, not raised: the lease then lapses by itself.
        """
        self._renewing.cancel()  # never awaited: that would swallow the caller's cancellation
        if self._lost or self._released:
            return
        self._released = True
        releasing = asyncio.ensure_future(self._store.release(self._lease))
        releasing.add_done_callback(self._released_or_logged)
        with contextlib.suppress(DittoError):  # logged by the callback
            await asyncio.shield(releasing)

    def _released_or_logged(self, releasing: asyncio.Future[None]) -> None:
        if releasing.cancelled():
            return
        exc = releasing.exception()
        if exc is not None:
            code = exc.code if isinstance(exc, DittoError) else type(exc).__name__
            logger.warning(
                "could not release the lease of checkpoint %r (%s): it lapses within %.1f s",
                self._lease.checkpoint_id,
                code,
                self._ttl,
            )


async def hold(
    store: CheckpointStore, checkpoint_id: str, *, ttl: float, wait: float | None
) -> HeldLease:
    """Take the lease of ``checkpoint_id`` and keep it renewed.

    Args:
        ttl: Seconds the lease outlives its last renewal (how long a killed holder keeps the
            checkpoint from the next opener).
        wait: Seconds to wait for a lease another run holds; ``None`` or ``0``: do not wait.

    Raises:
        DittoError: ``CHECKPOINT_BUSY`` (retryable; ``details`` name the ``holder`` and when
            its lease ``expires_in``) when another run still holds it after ``wait``;
            ``CHECKPOINT_STORE_UNAVAILABLE``.
    """
    holder = holder_name()
    loop = asyncio.get_running_loop()
    give_up = loop.time() + (wait or 0.0)
    poll = _FIRST_POLL
    while True:
        try:
            lease = await store.acquire(checkpoint_id, holder, ttl)
        except DittoError as exc:
            left = give_up - loop.time()
            if exc.code != ErrorCode.CHECKPOINT_BUSY or left <= 0:
                raise
            # Ask again soon (the holder may release it at any moment), and no later than
            # when its lease lapses.
            expires_in = (exc.details or {}).get("expires_in")
            delay = min(poll, left)
            if isinstance(expires_in, int | float) and expires_in >= 0:
                delay = min(delay, expires_in + 0.001)
            await asyncio.sleep(delay)
            poll = min(poll * 2, _LAST_POLL)
            continue
        return HeldLease(store, lease, ttl)
