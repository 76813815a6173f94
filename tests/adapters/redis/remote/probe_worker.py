"""The worker that ``ditto worker serve --worker probe_worker:probe`` runs in the remote tests.

:mod:`tests.adapters.redis.remote.processes` copies this file into each test's directory, so a
worker process imports it from its working directory. Every run of a handler appends JSON lines
to the file named by ``DITTO_PROBE_EFFECTS`` — ``run`` when the handler starts (with
``PROBE.WORK``'s ``sleep``), then ``done`` or ``cancelled`` — each written with one ``write`` on an
``O_APPEND`` descriptor, so lines from concurrent processes never interleave.
``DITTO_PROBE_WORKER`` is the ``--id`` of the process.
"""

from __future__ import annotations

import asyncio
import json
import os
import time

import msgspec

from ditto import DittoError, NodeContext, define_worker

EFFECTS = os.environ["DITTO_PROBE_EFFECTS"]
WORKER_ID = os.environ["DITTO_PROBE_WORKER"]


class Work(msgspec.Struct, frozen=True):
    """``PROBE.WORK``'s input: a number to echo, how long to take (``sleep`` awaits, ``block``
    blocks the worker's event loop with ``time.sleep``), how to fail (``"ditto"``: a
    ``DittoError`` with code ``PROBE_FAILED``; ``"crash"``: a ``RuntimeError``) and how many
    bytes of padding to return."""

    n: int = 0
    sleep: float = 0.0
    block: float = 0.0
    fail: str = ""
    pad: int = 0


class Worked(msgspec.Struct, frozen=True, omit_defaults=True):
    n: int
    worker: str
    attempt: int
    pad: str = ""


class Measure(msgspec.Struct, frozen=True):
    """``PROBE.MEASURE``'s input."""

    text: str
    repeat: int = 1


class Measured(msgspec.Struct, frozen=True):
    text: str
    length: int


def _record(event: str, ctx: NodeContext, sleep: float | None = None) -> None:
    line = json.dumps(
        {
            "event": event,
            "sleep": sleep,
            "execution_id": ctx.execution_id,
            "attempt": ctx.attempt,
            "worker": WORKER_ID,
            "principal": ctx.principal,
            "execution": None if ctx.execution is None else list(ctx.execution),
            "node": ctx.node,
            "idempotency_key": ctx.idempotency_key,
        }
    )
    descriptor = os.open(EFFECTS, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(descriptor, f"{line}\n".encode())
    finally:
        os.close(descriptor)


async def work(request: Work, ctx: NodeContext) -> Worked:
    _record("run", ctx, request.sleep)
    time.sleep(request.block)  # noqa: ASYNC251 - the point: a handler that blocks its loop
    try:
        await asyncio.sleep(request.sleep)
    except asyncio.CancelledError:
        _record("cancelled", ctx)
        raise
    _record("done", ctx)
    if request.fail == "ditto":
        raise DittoError("the probe was asked to fail", code="PROBE_FAILED")
    if request.fail == "crash":
        raise RuntimeError("the probe was asked to crash")
    return Worked(request.n, WORKER_ID, ctx.attempt, "x" * request.pad)


async def measure(request: Measure, ctx: NodeContext) -> Measured:
    _record("run", ctx)
    text = request.text * request.repeat
    return Measured(text, len(text))


probe = define_worker("probe", {"PROBE.WORK": work, "PROBE.MEASURE": measure})
limited = define_worker("probe", {"PROBE.WORK": work, "PROBE.MEASURE": measure}, concurrency=3)
"""The probe declaring how many calls it runs at once (``ditto worker serve`` takes that)."""
