"""Module-level handlers for the offload tests: a process pool can only run functions it can
import by name."""

from __future__ import annotations

import time


def cpu_double(request: int) -> int:
    """Busy for 50 ms of CPU, then the double: the work a process pool is for."""
    end = time.process_time() + 0.05
    while time.process_time() < end:
        pass
    return request * 2


def cpu_forever(request: int) -> int:
    """Computes well past any test deadline (bounded, so the process ends by itself)."""
    end = time.monotonic() + 3
    while time.monotonic() < end:
        pass
    return request
