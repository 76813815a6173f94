"""Quickstart: define a worker, invoke a node, run a graph.

    python3 tasks.py run examples/quickstart.py

The graph fans out one weather lookup per city, then writes a report that depends on all of
them. One lookup fails (no station), one times out (too slow); the report's binder checks each
dependency's ``.ok`` and reports what it skipped instead of crashing.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import anyio
import msgspec

from ditto import DittoError, NodeContext, NodeResult, create_ditto, define_worker, graph

CITIES = {"Lisbon": 21.5, "Oslo": 4.0, "Atlantis": None, "Slowtown": 15.0}


class Lookup(msgspec.Struct, frozen=True):
    city: str


class Weather(msgspec.Struct, frozen=True):
    city: str
    celsius: float


class ReportRequest(msgspec.Struct, frozen=True):
    readings: list[Weather]
    missing: list[str]


async def look_up(request: Lookup, ctx: NodeContext) -> Weather:
    """WEATHER.LOOKUP — the input and output types come from the annotations."""
    celsius = CITIES.get(request.city)
    if celsius is None:
        raise DittoError(f"no weather station in {request.city}", code="NOT_FOUND")
    if request.city == "Slowtown":
        await anyio.sleep(5)  # longer than the task's timeout below
    return Weather(request.city, celsius)


async def report(request: ReportRequest, ctx: NodeContext) -> str:
    """WEATHER.REPORT — one line per reading, plus what is missing."""
    lines = [f"{w.city}: {w.celsius:.1f} °C" for w in request.readings]
    return "\n".join([*lines, f"missing: {', '.join(request.missing) or 'none'}"])


def bind_report(_: Any, deps: Mapping[str, NodeResult[Any]]) -> ReportRequest:
    readings = [result.unwrap() for result in deps.values() if result.ok]
    missing = [f"{task} ({result.status})" for task, result in deps.items() if not result.ok]
    return ReportRequest(readings, missing)


async def main() -> None:
    worker = define_worker("weather", {"WEATHER.LOOKUP": look_up, "WEATHER.REPORT": report})

    plan = graph("weather-report")
    for city in CITIES:  # fan-out: the lookups are independent, so they run concurrently
        timeout = 0.2 if city == "Slowtown" else None
        plan = plan.node(
            city, "WEATHER.LOOKUP", [], lambda _, deps, c=city: {"city": c}, timeout=timeout
        )
    plan = plan.node("report", "WEATHER.REPORT", list(CITIES), bind_report)  # the dependency

    async with create_ditto(workers=[worker]) as runtime:
        single = await runtime.invoke("WEATHER.LOOKUP", {"city": "Oslo"})
        print("invoke:", single.status, single.output)
        invalid = await runtime.invoke("WEATHER.LOOKUP", {"town": "Oslo"})
        print("invalid input:", invalid.status, invalid.error.code if invalid.error else None)

        run = await runtime.run(plan)
        for task_id, result in run.items():
            detail = result.error.code if result.error else ""
            print(f"{task_id:>9}: {result.status:<8} {detail}")
        print(run["report"].unwrap())


if __name__ == "__main__":
    anyio.run(main)
