"""Fair timing for the benches: systems take turns, the first one rotates, every figure is a
median over rounds with its spread.

A machine's load drifts while a bench runs (other processes, CPU frequency, caches). Timing
system A for a minute and then system B for a minute charges the drift to whichever ran at
the bad moment. Here every round runs each system once, in an order that rotates round by
round, and a figure is reported as the median of the rounds with the lowest and highest round
beside it, so a reader sees how much the figure moved.
"""

from __future__ import annotations

import inspect
import statistics
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from time import perf_counter
from typing import Any

__all__ = ("Figure", "Spread", "alternate", "percentile", "timed", "timed_async")

Round = Callable[[], Awaitable[list[float]] | list[float]]
"""One round of one system: runs its work and returns per-call durations in seconds."""


def percentile(samples: Sequence[float], fraction: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


@dataclass(frozen=True)
class Spread:
    """A figure over rounds: the median, and the lowest and highest round."""

    median: float
    low: float
    high: float

    @classmethod
    def of(cls, values: Sequence[float]) -> Spread:
        return cls(statistics.median(values), min(values), max(values))

    def show(self, digits: int = 2) -> str:
        return f"{self.median:.{digits}f} [{self.low:.{digits}f}-{self.high:.{digits}f}]"


@dataclass(frozen=True)
class Figure:
    """What one system measured: per-call durations of every round."""

    rounds: list[list[float]]

    def latency(self, fraction: float = 0.5, scale: float = 1e3) -> Spread:
        """A percentile of the call durations, per round (``scale`` 1e3: milliseconds)."""
        return Spread.of([percentile(samples, fraction) * scale for samples in self.rounds])

    def rate(self, items_per_call: int = 1) -> Spread:
        """Items per second, per round (total items over total time)."""
        return Spread.of(
            [items_per_call * len(samples) / sum(samples) for samples in self.rounds if samples]
        )


async def alternate(systems: dict[str, Round], rounds: int) -> dict[str, Figure]:
    """Run ``rounds`` rounds; in round ``r`` the systems start at the ``r``-th one."""
    names = list(systems)
    collected: dict[str, list[list[float]]] = {name: [] for name in names}
    for number in range(rounds):
        shift = number % len(names)
        for name in names[shift:] + names[:shift]:
            result: Any = systems[name]()
            if inspect.isawaitable(result):
                result = await result
            collected[name].append(list(result))
    return {name: Figure(samples) for name, samples in collected.items()}


def timed(calls: Sequence[Callable[[], Any]]) -> list[float]:
    """Durations of synchronous calls, one by one."""
    samples = []
    for call in calls:
        started = perf_counter()
        call()
        samples.append(perf_counter() - started)
    return samples


async def timed_async(calls: Sequence[Callable[[], Awaitable[Any]]]) -> list[float]:
    """Durations of awaited calls, one by one."""
    samples = []
    for call in calls:
        started = perf_counter()
        await call()
        samples.append(perf_counter() - started)
    return samples
