"""Node deadlines: cancel an invocation's task when its deadline passes.

Semantics are those of ``asyncio.timeout`` (``cancel`` on expiry, ``uncancel`` when the
cancellation comes back, so the caller's own cancel scopes keep working), with a cheaper timer:
deadlines are grouped into slots and each slot has one loop timer, shared by every call that
ends in it. A per-call ``loop.call_at`` costs a heap push and leaves a cancelled handle in the
heap for every call that finishes in time, which under load was several µs per call of
Python-level heap comparisons. Slots are 1 ms wide for deadlines close at hand and wider (a
power of two of milliseconds, under 1/128 of the time left) for distant ones, so a 30 s
default deadline shares its timer with every call of the next ~128 ms: a deadline fires at most
1 ms or 1% of its duration late, whichever is more.

Stores that commit claim their outcome through :mod:`ditto.contracts.outcomes` (a deadline
means "not done" — a ``timeout`` result promises the work was not committed): the runtime sets
its :data:`~ditto.contracts.outcomes.CURRENT` to the running call's :class:`Deadline`.
"""

from __future__ import annotations

import asyncio
import math
import weakref
from typing import Any
from weakref import WeakKeyDictionary

__all__ = ("Deadline", "arm")

_SLOTS_PER_SECOND = 1000
_PRECISION = 128  # a slot is at most 1/128 of the time left until the deadline


class Deadline:
    """One armed deadline; :attr:`fired` tells whether it cancelled the task."""

    __slots__ = ("_slot", "_wheel", "claimed", "fired", "task")

    def __init__(self, wheel: _Wheel, slot: tuple[int, int], task: asyncio.Task[Any]) -> None:
        self._wheel = wheel
        self._slot = slot
        self.task = task
        self.fired = False
        self.claimed = False
        """The handler reports the real outcome of a commit (see :func:`claim_outcome`)."""

    def fire(self) -> None:
        self.fired = True
        self.task.cancel()

    def disarm(self) -> None:
        """The call ended: never fire (idempotent)."""
        entries = self._wheel.slots.get(self._slot)
        if entries is not None:
            entries.discard(self)


class _Wheel:
    """The armed deadlines of one event loop, by slot."""

    __slots__ = ("loop", "slots")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        # Weak, so a wheel kept in the module's map never keeps a finished loop alive.
        self.loop = weakref.ref(loop)
        self.slots: dict[tuple[int, int], set[Deadline]] = {}

    def arm(
        self, loop: asyncio.AbstractEventLoop, task: asyncio.Task[Any], when: float, now: float
    ) -> Deadline:
        left_ms = (when - now) * _SLOTS_PER_SECOND
        width = 1 << max(0, int(left_ms / _PRECISION).bit_length() - 1)  # ms, a power of two
        slot = (width, math.ceil(when * _SLOTS_PER_SECOND / width))
        entries = self.slots.get(slot)
        if entries is None:
            entries = self.slots[slot] = set()
            loop.call_at(slot[1] * width / _SLOTS_PER_SECOND, self._expire, slot)
        deadline = Deadline(self, slot, task)
        entries.add(deadline)
        return deadline

    def _expire(self, slot: tuple[int, int]) -> None:
        for deadline in self.slots.pop(slot, ()):
            deadline.fire()


_wheels: WeakKeyDictionary[asyncio.AbstractEventLoop, _Wheel] = WeakKeyDictionary()
_current: _Wheel | None = None  # the last loop's wheel: almost every call hits it


def arm(
    loop: asyncio.AbstractEventLoop, task: asyncio.Task[Any], when: float, now: float
) -> Deadline:
    """Cancel ``task`` at ``when`` (``loop.time()`` clock, read as ``now``) unless disarmed."""
    global _current
    wheel = _current
    if wheel is None or wheel.loop() is not loop:
        wheel = _wheels.get(loop)
        if wheel is None:
            wheel = _wheels[loop] = _Wheel(loop)
        _current = wheel
    return wheel.arm(loop, task, when, now)
