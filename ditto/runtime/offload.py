"""Handlers that must not run on the event loop: plain functions on threads, CPU-bound work in
processes.

An ``async def`` handler that computes for seconds blocks every other call on the loop — their
deadlines pass while nothing runs. So:

* a plain (``def``) handler runs on a worker thread (anyio's, at most 40 at once per loop),
  taking ``(input, ctx)``; ``ctx``'s fields can be read there, ``ctx.invoke`` cannot be awaited;
* a node declared CPU-bound (``NodeSpec(handler, cpu_bound=True)``) runs ``handler(input)`` in a
  process pool the worker owns (``concurrency`` processes, default the CPU count), so it never
  holds the interpreter lock the loop needs. The handler must be a module-level function and
  its input and output picklable.

Neither a thread nor a process can be stopped from outside: a handler past its deadline is
abandoned (its result reported as ``timeout``) and keeps its thread or process until it
returns; a call still queued for a process when its deadline passes never starts.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Awaitable, Callable
from concurrent.futures import ProcessPoolExecutor
from typing import TYPE_CHECKING, Any

import anyio.to_thread

if TYPE_CHECKING:
    from ditto.runtime.context import NodeContext

__all__ = ("ProcessPool", "threaded")

AsyncHandler = Callable[[Any, "NodeContext"], Awaitable[Any]]


def threaded(handler: Callable[[Any, NodeContext], Any]) -> AsyncHandler:
    """``handler`` run on a worker thread; a cancelled call abandons the thread's result."""

    async def run(input: Any, ctx: NodeContext) -> Any:
        return await anyio.to_thread.run_sync(handler, input, ctx, abandon_on_cancel=True)

    run.__wrapped__ = handler  # type: ignore[attr-defined]  # for stall reports and contracts
    return run


class ProcessPool:
    """A worker's process pool, created at its first call and shut down with the worker."""

    def __init__(self, processes: int | None) -> None:
        self.processes = processes or os.cpu_count() or 1
        self._executor: ProcessPoolExecutor | None = None

    def wrap(self, handler: Callable[[Any], Any]) -> AsyncHandler:
        """``handler(input)`` run in the pool (``ctx`` stays in this process)."""

        async def run(input: Any, ctx: NodeContext) -> Any:
            if self._executor is None:
                self._executor = ProcessPoolExecutor(self.processes)
            future = self._executor.submit(handler, input)
            try:
                return await asyncio.wrap_future(future)
            finally:
                future.cancel()  # still queued when the call ended: it never starts

        run.__wrapped__ = handler  # type: ignore[attr-defined]
        return run

    def shutdown(self) -> None:
        """Stop the processes (queued calls are dropped; running ones end with the process)."""
        executor, self._executor = self._executor, None
        if executor is not None:
            executor.shutdown(wait=False, cancel_futures=True)
