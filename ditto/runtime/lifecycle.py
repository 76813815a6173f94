"""A runtime's admission and shutdown: count the top-level work it accepted, refuse new work
once closing, wait for the accepted work to drain, then release resources exactly once.

``close()`` is idempotent: later and concurrent calls wait for the first and share its outcome.
A ``close()`` cancelled while draining has released nothing, so the next one starts over. The
release runs shielded from cancellation, so resources are always let go.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import anyio

from ditto.errors import RuntimeClosedError, WorkerCleanupError

__all__ = ("Lifecycle",)


class Lifecycle:
    """Admission counting and the close protocol of one runtime."""

    __slots__ = ("_close_error", "_closed", "_drained", "_inflight", "closing")

    def __init__(self) -> None:
        self.closing = False
        """True once ``close()`` started: no new top-level work is accepted."""
        self._inflight = 0
        self._drained: anyio.Event | None = None
        self._closed: anyio.Event | None = None
        self._close_error: BaseException | None = None

    def check_open(self) -> None:
        """Raises:
        RuntimeClosedError: The runtime is closing or closed."""
        if self.closing:
            raise RuntimeClosedError()

    def admit(self) -> None:
        """Count one accepted piece of top-level work (pair with :meth:`release`)."""
        self._inflight += 1

    def release(self) -> None:
        self._inflight -= 1
        if self._inflight == 0 and self._drained is not None:
            self._drained.set()

    async def close(
        self, stop: Callable[[], None], release: Callable[[], Awaitable[list[Exception]]]
    ) -> None:
        """Refuse new work, call ``stop``, wait for accepted work to drain, then ``release``
        resources once (its failures are raised together).

        Raises:
            WorkerCleanupError: ``release`` reported failures; every one is in the group.
        """
        pending = self._closed
        if pending is not None:
            await pending.wait()
            if self._closed is not pending:  # that close() was cancelled before releasing
                await self.close(stop, release)
            elif self._close_error is not None:
                raise self._close_error
            return
        self.closing = True
        closed = self._closed = anyio.Event()
        stop()
        try:
            if self._inflight:
                self._drained = anyio.Event()
                await self._drained.wait()
        except BaseException:
            # Cancelled while draining: nothing was released yet, so a later close() must
            # start over instead of reporting success.
            self._closed = None
            closed.set()
            raise
        try:
            with anyio.CancelScope(shield=True):
                failures = await release()
            if failures:
                self._close_error = WorkerCleanupError("worker cleanup failed", failures)
                raise self._close_error
        finally:
            closed.set()
