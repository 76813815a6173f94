"""Test workers that record what the runtime did to them (real handlers, no mocks)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import anyio
import msgspec
from anyio.abc import TaskGroup

from ditto import Ditto, DittoError, NodeContext, WorkerDefinition, define_worker


class Work(msgspec.Struct, frozen=True):
    """Input of the probe nodes."""

    name: str
    delay: float = 0.0
    hold: bool = False
    """Wait for :meth:`Probe.release` instead of finishing: the call stays in flight until the
    test lets it go."""
    fail_with: str | None = None


class Done(msgspec.Struct, frozen=True):
    name: str
    worker_id: str


@dataclass
class Probe:
    """Records calls, the order of starts and finishes, and the peak number in flight; a test
    waits for a call to start with :meth:`started` and lets a held one finish with
    :meth:`release`."""

    calls: list[str] = field(default_factory=list)
    finished: list[str] = field(default_factory=list)
    contexts: list[NodeContext] = field(default_factory=list)
    in_flight: int = 0
    peak: int = 0
    cancelled: list[str] = field(default_factory=list)
    disposed: int = 0
    _started: dict[str, anyio.Event] = field(default_factory=dict, repr=False)
    _released: dict[str, anyio.Event] = field(default_factory=dict, repr=False)

    async def started(self, *names: str) -> None:
        """Return once the handler has been called for every one of ``names``."""
        for name in names:
            await self._started.setdefault(name, anyio.Event()).wait()

    async def cancel_once_started(self, scope: anyio.CancelScope, *names: str) -> None:
        """Cancel ``scope`` once the handler has been called for every one of ``names``."""
        await self.started(*names)
        scope.cancel()

    def release(self, *names: str) -> None:
        """Let the held calls (``hold=True``) of ``names`` finish, now or when they arrive."""
        for name in names:
            self._released.setdefault(name, anyio.Event()).set()

    async def work(self, request: Work, ctx: NodeContext) -> Done:
        self.calls.append(request.name)
        self.contexts.append(ctx)
        self.in_flight += 1
        self.peak = max(self.peak, self.in_flight)
        self._started.setdefault(request.name, anyio.Event()).set()
        try:
            if request.hold:
                await self._released.setdefault(request.name, anyio.Event()).wait()
            elif request.delay:
                await anyio.sleep(request.delay)
            else:
                await anyio.lowlevel.checkpoint()
            if request.fail_with is not None:
                raise DittoError(f"{request.name} failed on purpose", code=request.fail_with)
            self.finished.append(request.name)
            return Done(request.name, ctx.worker_id)
        except anyio.get_cancelled_exc_class():
            self.cancelled.append(request.name)
            raise
        finally:
            self.in_flight -= 1

    async def dispose(self) -> None:
        self.disposed += 1

    def worker(
        self, worker_type: str = "probe", *, concurrency: int | None = None
    ) -> WorkerDefinition:
        return define_worker(
            worker_type,
            {"PROBE.WORK": self.work},
            concurrency=concurrency,
            dispose=self.dispose,
        )


def work(name: str, **options: Any) -> dict[str, Any]:
    """A PROBE.WORK input as a plain dict, as an application would pass it."""
    return {"name": name, **options}


async def start_closing(group: TaskGroup, runtime: Ditto) -> None:
    """Start ``runtime.close()`` in ``group``; return once it has begun, so the runtime refuses
    new work and waits on the work it accepted."""
    begun = anyio.Event()

    async def close() -> None:
        begun.set()
        # This task runs on into close() until it blocks on the drain, before the waiter wakes.
        await runtime.close()

    group.start_soon(close)
    await begun.wait()
    assert runtime.closed
