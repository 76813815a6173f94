"""Test workers that record what the runtime did to them (real handlers, no mocks)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import anyio
import msgspec

from ditto import DittoError, NodeContext, WorkerDefinition, define_worker


class Work(msgspec.Struct, frozen=True):
    """Input of the probe nodes."""

    name: str
    delay: float = 0.0
    fail_with: str | None = None


class Done(msgspec.Struct, frozen=True):
    name: str
    worker_id: str


@dataclass
class Probe:
    """Records calls, the order of starts and finishes, and the peak number in flight."""

    calls: list[str] = field(default_factory=list)
    finished: list[str] = field(default_factory=list)
    contexts: list[NodeContext] = field(default_factory=list)
    in_flight: int = 0
    peak: int = 0
    cancelled: list[str] = field(default_factory=list)
    disposed: int = 0

    async def work(self, request: Work, ctx: NodeContext) -> Done:
        self.calls.append(request.name)
        self.contexts.append(ctx)
        self.in_flight += 1
        self.peak = max(self.peak, self.in_flight)
        try:
            if request.delay:
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
