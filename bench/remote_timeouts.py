"""Remote deadlines under mass timeouts: how late a ``timeout`` result comes back when
thousands of remote calls time out together.

10,000 calls (``--calls``) go at once to a node type whose workers are alive (their heartbeats
are in Redis) but read nothing — as when every worker process is stopped (``SIGSTOP``) or
stuck. Every call times out after ``--timeout`` seconds and each owes the workers a cancel
notice. A call's *lateness* is when its result came back minus its deadline (both on the event
loop's clock of the calling process). Printed per tree: p50, p99 and max lateness, how many
results came back more than 100 ms late, and the caller's event loop's longest stall once the
deadlines start passing (a 10 ms ticker's largest gap).

The trees take turns round by round: ``HEAD`` is today's committed code (``git archive HEAD``
into a temporary folder, run with ``PYTHONPATH``), ``work`` is this working tree. Each round of
each tree runs in a fresh process on its own key prefix. Target: every result within 100 ms of
its deadline on a quiet machine.

    python3 tasks.py bench remote_timeouts    (uses $DITTO_TEST_REDIS_URL or redis://127.0.0.1:6379/0)
    .venv/bin/python bench/remote_timeouts.py --calls 10000 --rounds 3 --base /tmp/base
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
NODE = "BENCH.STUCK"
SECRET = "bench-remote-timeouts-secret-0123456789"
LATE_MS = 100.0


# ------------------------------------------------------------------------ one round (child)


async def one_round(url: str, calls: int, timeout: float) -> dict[str, Any]:
    import redis.asyncio as aioredis

    from ditto import create_ditto
    from ditto.adapters.redis.streams import RedisStreamsTransport
    from ditto.runtime.transports.envelope import Signer

    prefix = f"bench-timeouts:{uuid.uuid4().hex}:"
    signer = Signer(SECRET.encode())
    client = aioredis.Redis.from_url(url)
    # Live heartbeats of a worker that never reads: calls are accepted and never answered.
    forever = 2**50
    await client.zadd(f"{prefix}nodes:{NODE}", {"stuck": forever})
    await client.zadd(f"{prefix}nodes:{NODE}:key:{signer.fingerprint}", {"stuck": forever})
    loop = asyncio.get_running_loop()
    gaps: list[tuple[float, float]] = []
    ticking = True

    async def ticker() -> None:
        last = loop.time()
        while ticking:
            await asyncio.sleep(0.01)
            now = loop.time()
            gaps.append((now, now - last - 0.01))
            last = now

    lateness: list[float] = []
    starts: list[float] = []
    statuses: dict[str, int] = {}
    transport = RedisStreamsTransport.from_url(
        url, signer, prefix=prefix, max_pending=calls + 1_000
    )
    try:
        async with create_ditto() as runtime:
            runtime.register_remote([NODE], transport=transport)
            tick = loop.create_task(ticker())

            async def call(n: int) -> None:
                started = loop.time()
                starts.append(started)
                result = await runtime.invoke(NODE, {"n": n}, timeout=timeout)
                lateness.append(loop.time() - (started + timeout))
                code = result.error.code if result.error is not None else result.status
                statuses[code] = statuses.get(code, 0) + 1

            await asyncio.gather(*(call(n) for n in range(calls)))
            ticking = False
            await tick
    finally:
        keys = [key async for key in client.scan_iter(match=f"{prefix}*")]
        if keys:
            await client.delete(*keys)
        await client.aclose()
    # The loop's longest stall once deadlines start passing (sealing 10,000 calls at the start
    # is the bench's own burst, not what is measured).
    first_deadline = min(starts) + timeout
    blocked = max((gap for at, gap in gaps if at > first_deadline - 0.1), default=0.0)
    return {"lateness": lateness, "statuses": statuses, "blocked": blocked}


# ------------------------------------------------------------------------ the bench (parent)


def run_child(tree: Path, url: str, calls: int, timeout: float) -> dict[str, Any]:
    env = dict(os.environ, PYTHONPATH=str(tree))
    command = [sys.executable, __file__, "--child", "--url", url, "--calls", str(calls)]
    done = subprocess.run(
        [*command, "--timeout", str(timeout)],
        env=env,
        cwd=tempfile.gettempdir(),
        capture_output=True,
        check=True,
        text=True,
    )
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def percentile(samples: list[float], fraction: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


def summary(name: str, rounds: list[dict[str, Any]]) -> str:
    lines = []
    for number, measured in enumerate(rounds, 1):
        late = [value * 1000 for value in measured["lateness"]]
        over = sum(1 for value in late if value > LATE_MS)
        lines.append(
            f"{name:>5} round {number}: p50 {percentile(late, 0.5):8.1f} ms  "
            f"p99 {percentile(late, 0.99):8.1f} ms  max {max(late):8.1f} ms  "
            f"> {LATE_MS:.0f} ms: {over:>6,}/{len(late):,}  "
            f"loop stalled ≤ {measured['blocked'] * 1000:7.1f} ms  {measured['statuses']}"
        )
    return "\n".join(lines)


def main(url: str, calls: int, timeout: float, rounds: int, base: Path | None) -> None:
    with tempfile.TemporaryDirectory(prefix="ditto-bench-base-") as scratch:
        if base is None:
            base = Path(scratch)
            archive = subprocess.run(
                ["git", "archive", "HEAD"], cwd=ROOT, capture_output=True, check=True
            )
            subprocess.run(["tar", "-x", "-C", str(base)], input=archive.stdout, check=True)
        trees = {"HEAD": base, "work": ROOT}
        measured: dict[str, list[dict[str, Any]]] = {name: [] for name in trees}
        names = list(trees)
        for number in range(rounds):
            shift = number % len(names)
            for name in names[shift:] + names[:shift]:
                measured[name].append(run_child(trees[name], url, calls, timeout))
    print(f"{calls:,} remote calls timing out after {timeout:g} s, workers alive but stuck")
    for name in names:
        print(summary(name, measured[name]))
    worst = {name: max(max(r["lateness"]) for r in measured[name]) * 1000 for name in names}
    print(
        f"worst lateness: HEAD {worst['HEAD']:.1f} ms, work {worst['work']:.1f} ms "
        f"({worst['HEAD'] / max(worst['work'], 1e-3):.1f}x less late); target ≤ {LATE_MS:.0f} ms"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--url", default=os.environ.get("DITTO_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")
    )
    parser.add_argument("--calls", type=int, default=10_000)
    parser.add_argument("--timeout", type=float, default=5.0)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--base", type=Path, help="a checkout of the baseline (default: HEAD)")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    arguments = parser.parse_args()
    if arguments.child:
        outcome = asyncio.run(one_round(arguments.url, arguments.calls, arguments.timeout))
        print(json.dumps(outcome))
    else:
        main(arguments.url, arguments.calls, arguments.timeout, arguments.rounds, arguments.base)
