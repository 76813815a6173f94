"""The loop-stall watchdog: names the handler that blocked the event loop, and for how long.

While one ``async`` handler computes without awaiting, no other call on the loop runs and their
deadlines pass. The watchdog is a thread that watches a heartbeat the loop beats every
``threshold / 4`` seconds. When the beat is late by more than ``threshold``, it reads the loop
thread's stack, finds the innermost frame of a registered handler and logs a warning naming
it (node type, worker, file and line); when the loop beats again it logs how long the stall
lasted. The cure it points at: a plain ``def`` handler (a thread) or ``cpu_bound=True`` (a
process), see :mod:`ditto.runtime.offload`.
"""

from __future__ import annotations

import asyncio
import logging
import sys
import threading
from collections.abc import Callable
from time import monotonic
from types import CodeType, FrameType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Iterable

    from ditto.runtime.worker import WorkerDefinition

__all__ = ("LoopWatchdog", "code_of", "handler_codes")

logger = logging.getLogger("ditto.runtime.watchdog")


class LoopWatchdog:
    """Watches one event loop for stalls longer than ``threshold`` seconds.

    Args:
        threshold: Seconds without a heartbeat that count as a stall.
        handlers: Code object of each registered handler -> its description
            (``"MEMORY.SEARCH on memory-1"``); read when a stall is found.
    """

    def __init__(self, threshold: float, handlers: Callable[[], dict[CodeType, str]]) -> None:
        self.threshold = threshold
        self._handlers = handlers
        self._interval = threshold / 4
        self._beat = monotonic()
        self._stalled_by: str | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread = 0
        self._timer: asyncio.TimerHandle | None = None

    def start(self) -> None:
        """Start watching the running loop (idempotent; call it on the loop)."""
        if self._thread is not None:
            return
        self._loop = asyncio.get_running_loop()
        self._loop_thread = threading.get_ident()
        self._beat = monotonic()
        self._timer = self._loop.call_later(self._interval, self._on_beat)
        self._thread = threading.Thread(target=self._watch, name="ditto-watchdog", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop watching (idempotent)."""
        self._stop.set()
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._thread = None
        # The thread may take a moment to notice; it must not keep a finished loop alive.
        self._loop = None

    def _on_beat(self) -> None:
        now = monotonic()
        stalled_by, self._stalled_by = self._stalled_by, None
        if stalled_by is not None:
            logger.warning(
                "the event loop was blocked for %.2f s by %s", now - self._beat, stalled_by
            )
        self._beat = now
        if not self._stop.is_set() and self._loop is not None:
            self._timer = self._loop.call_later(self._interval, self._on_beat)

    def _watch(self) -> None:
        while not self._stop.wait(self._interval):
            late = monotonic() - self._beat - self._interval
            if late > self.threshold and self._stalled_by is None:
                frame = sys._current_frames().get(self._loop_thread)
                if frame is None or _idle(frame):
                    # The loop waits for I/O or a timer: nothing blocks it, the process just
                    # was not scheduled (a busy machine). Not a stall, and no handler to blame.
                    continue
                culprit, in_handler = self._culprit(frame)
                self._stalled_by = culprit
                if in_handler:
                    logger.warning(
                        "the event loop has been blocked for %.2f s by %s; make the handler a "
                        "plain def (runs on a thread) or declare it cpu_bound (a process)",
                        late,
                        culprit,
                    )
                else:
                    logger.warning(
                        "the event loop has been blocked for %.2f s by %s", late, culprit
                    )

    def _culprit(self, frame: FrameType) -> tuple[str, bool]:
        """Who holds the loop: a description, and whether it is a registered handler."""
        innermost = frame
        where = f"{innermost.f_code.co_filename}:{innermost.f_lineno}"
        handlers = self._handlers()
        current: FrameType | None = frame
        while current is not None:
            described = handlers.get(current.f_code)
            if described is not None:
                return f"the {described} handler {current.f_code.co_name} (at {where})", True
            current = current.f_back
        return f"code outside any handler (at {where})", False


def _idle(frame: FrameType) -> bool:
    """Whether the loop thread is waiting in its selector (``select``/``poll``/``epoll``)."""
    return frame.f_code.co_name in _WAITS and frame.f_code.co_filename.endswith(
        ("selectors.py", "selector_events.py")
    )


_WAITS = frozenset({"select", "poll", "_poll", "_select"})


def code_of(handler: Any) -> CodeType | None:
    """The code object a handler runs, through wrappers (``__wrapped__``) and bound methods."""
    seen = 0
    while hasattr(handler, "__wrapped__") and seen < 16:
        handler = handler.__wrapped__
        seen += 1
    function = getattr(handler, "__func__", handler)
    code = getattr(function, "__code__", None)
    if code is None:
        code = getattr(getattr(function, "__call__", None), "__code__", None)  # noqa: B004
    return code if isinstance(code, CodeType) else None


def handler_codes(definitions: Iterable[WorkerDefinition]) -> dict[CodeType, str]:
    """What the watchdog names: each registered handler's code, by node type and worker."""
    codes: dict[CodeType, str] = {}
    for definition in definitions:
        for node_type, bound in definition.nodes.items():
            code = code_of(bound.handler)
            if code is not None:
                codes[code] = f"{node_type} (worker {definition.type!r})"
    return codes
