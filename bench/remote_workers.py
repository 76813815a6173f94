"""Remote workers over Redis Streams: what a remote call costs, and how throughput grows with
worker processes.

* **Round trip.** Ditto's remote ``invoke`` (caller in this process, ``ditto worker serve`` in
  another, no-op handler) against raw redis-py doing the same request/reply over streams by
  hand: the caller ``XADD``s a request and waits on its reply stream (``XREAD``); a worker process
  ``XREADGROUP``s, ``XADD``s the reply and ``XACK``s. Sequential calls give the p50 round trip,
  64 calls at once the throughput. Targets: p50 ≤ 1.5× raw, throughput ≥ 70 % of raw.
* **Scaling.** A 2,000-node fan-out whose handler sleeps 5 ms, on 1, 2 and 4 worker processes
  (``--worker-concurrency`` calls each, default 8): throughput must grow with workers (≥ 1.8× at
  2). On a machine with few cores the caller, Redis and the workers share them: read the 4-worker
  figure with the core count in mind.
* **Per-node overhead.** The same fan-out with a no-op handler remote and in-process, per node.

Ditto encrypts and authenticates every message (ChaCha20-Poly1305), checks liveness, the
workers' key and the queue's room in the send script, binds each call to its stream entry and
records its execution id (so a replayed envelope never runs), renews calls in flight and deletes
acknowledged ones; the raw baseline does none of that. Systems take turns round by
round (``timing.alternate``); figures are medians over rounds with the lowest and highest round.

    python3 tasks.py bench remote_workers    (uses $DITTO_TEST_REDIS_URL or redis://127.0.0.1:6379/0)
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
import uuid
from pathlib import Path
from typing import Any

import redis.asyncio as aioredis
from redis import exceptions as redis_errors
from timing import Figure, alternate, timed_async

from ditto import create_ditto, define_worker, graph
from ditto.adapters.redis.streams import RedisStreamsTransport
from ditto.runtime.transports.envelope import Signer

SECRET = uuid.uuid4().hex
P50_TARGET = 1.5
THROUGHPUT_TARGET = 0.70
SCALING_TARGET = 1.8
CONCURRENT = 64

WORKERS_MODULE = """
import asyncio
from ditto import NodeContext, define_worker


async def noop(input: dict, ctx: NodeContext) -> dict:
    return input


async def sleepy(input: dict, ctx: NodeContext) -> dict:
    await asyncio.sleep(0.005)
    return input


bench = define_worker("bench", {"BENCH.NOOP": noop, "BENCH.SLEEP": sleepy})
"""


# ------------------------------------------------------------------------ raw baseline


async def raw_worker(url: str, stream: str) -> None:
    """The hand-written worker: read requests, reply on the caller's stream, acknowledge."""
    client = aioredis.Redis.from_url(url)
    with contextlib.suppress(redis_errors.ResponseError):  # the group exists already
        await client.xgroup_create(stream, "g", id="0", mkstream=True)
    while True:
        answer: Any = await client.xreadgroup("g", "raw", {stream: ">"}, count=256, block=1000)
        for _, entries in answer or ():
            async with client.pipeline(transaction=False) as pipe:
                for entry_id, fields in entries:
                    pipe.xadd(fields[b"r"], {"id": fields[b"id"], "v": fields[b"v"]})
                    pipe.xack(stream, "g", entry_id)
                await pipe.execute()


class RawCaller:
    """The hand-written caller: XADD a request, a listener task hands replies to waiters."""

    def __init__(self, url: str, stream: str) -> None:
        self.client = aioredis.Redis(
            connection_pool=aioredis.BlockingConnectionPool.from_url(url, max_connections=96)
        )
        self.stream = stream
        self.replies = f"{stream}:replies:{uuid.uuid4().hex}"
        self.waiting: dict[bytes, asyncio.Future[bytes]] = {}
        self.listener = asyncio.create_task(self.listen())

    async def listen(self) -> None:
        last = b"0-0"
        while True:
            answer: Any = await self.client.xread({self.replies: last}, count=512, block=1000)
            for _, entries in answer or ():
                for entry_id, fields in entries:
                    last = entry_id
                    waiter = self.waiting.pop(fields[b"id"], None)
                    if waiter is not None:
                        waiter.set_result(fields[b"v"])

    async def call(self, value: bytes) -> bytes:
        call_id = uuid.uuid4().hex.encode()
        waiter = asyncio.get_running_loop().create_future()
        self.waiting[call_id] = waiter
        await self.client.xadd(self.stream, {"id": call_id, "r": self.replies, "v": value})
        return await waiter

    async def close(self) -> None:
        self.listener.cancel()
        await asyncio.gather(self.listener, return_exceptions=True)
        await self.client.aclose()
        await self.client.connection_pool.disconnect()


# ------------------------------------------------------------------------ processes


def start_workers(folder: Path, url: str, prefix: str, count: int, concurrency: int) -> list[Any]:
    (folder / "bench_workers.py").write_text(textwrap.dedent(WORKERS_MODULE))
    (folder / "ditto.yaml").write_text(
        f"runtime:\n  remote:\n    prefix: '{prefix}'\n    heartbeat_ms: 200\n"
    )
    env = {
        **os.environ,
        "DITTO_REMOTE_SECRET": SECRET,
        "DITTO_RUNTIME_REMOTE_REDIS_URL": url,
    }
    ditto = Path(sys.executable).parent / "ditto"
    return [
        subprocess.Popen(
            [
                *(str(ditto), "worker", "serve", "--worker", "bench_workers:bench"),
                *("--id", f"bench-{n}", "--concurrency", str(concurrency)),
            ],
            cwd=folder,
            env=env,
            stderr=subprocess.DEVNULL,
        )
        for n in range(count)
    ]


def start_raw_worker(url: str, stream: str) -> Any:
    return subprocess.Popen(
        [sys.executable, __file__, "--raw-worker", stream, "--url", url],
        stderr=subprocess.DEVNULL,
    )


def stop(processes: list[Any]) -> None:
    for process in processes:
        process.send_signal(signal.SIGTERM)
    for process in processes:
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()


async def wait_for_workers(url: str, prefix: str, count: int) -> None:
    client = aioredis.Redis.from_url(url)
    try:
        for _ in range(200):
            live = [key async for key in client.scan_iter(match=f"{prefix}worker:*")]
            if len(live) >= count:
                return
            await asyncio.sleep(0.05)
        raise RuntimeError("the workers did not start")
    finally:
        await client.aclose()


async def clean(url: str, prefix: str) -> None:
    client = aioredis.Redis.from_url(url)
    try:
        keys = [key async for key in client.scan_iter(match=f"{prefix}*")]
        if keys:
            await client.delete(*keys)
    finally:
        await client.aclose()


# ------------------------------------------------------------------------ measurements


async def concurrent(call: Any, calls: int) -> list[float]:
    """One sample: the time of ``calls`` calls made ``CONCURRENT`` at a time, per call."""
    gate = asyncio.Semaphore(CONCURRENT)

    async def one() -> None:
        async with gate:
            await call()

    started = time.perf_counter()
    await asyncio.gather(*(one() for _ in range(calls)))
    return [(time.perf_counter() - started) / calls]


async def round_trip(url: str, rounds: int, calls: int) -> None:
    prefix = f"bench-remote:{uuid.uuid4().hex[:8]}:"
    raw_stream = f"{prefix}raw"
    with tempfile.TemporaryDirectory() as folder:
        workers = start_workers(Path(folder), url, prefix, 1, CONCURRENT)
        raw = start_raw_worker(url, raw_stream)
        try:
            await wait_for_workers(url, prefix, 1)
            caller = RawCaller(url, raw_stream)
            transport = RedisStreamsTransport.from_url(url, Signer(SECRET.encode()), prefix=prefix)
            async with create_ditto() as runtime:
                runtime.register_remote(["BENCH.NOOP"], transport=transport)

                async def ditto_call() -> None:
                    result = await runtime.invoke("BENCH.NOOP", {"n": 1})
                    assert result.ok, result

                async def raw_call() -> None:
                    assert await caller.call(b'{"n":1}')

                for _ in range(200):  # warm up both paths
                    await ditto_call()
                    await raw_call()
                figures = await alternate(
                    {
                        "ditto": lambda: timed_async([ditto_call] * calls),
                        "raw": lambda: timed_async([raw_call] * calls),
                    },
                    rounds,
                )
                rates = await alternate(
                    {
                        "ditto": lambda: concurrent(ditto_call, calls * 4),
                        "raw": lambda: concurrent(raw_call, calls * 4),
                    },
                    rounds,
                )
            await caller.close()
        finally:
            stop(workers)
            raw.kill()
            raw.wait()
            await clean(url, prefix)
    mine, theirs = figures["ditto"].latency(0.5, 1e6), figures["raw"].latency(0.5, 1e6)
    p50 = mine.median / theirs.median
    print(f"round trip, sequential, {calls} calls x {rounds} rounds (µs):")
    print(
        f"  p50  Ditto {mine.show(0):>20}   raw redis-py {theirs.show(0):>20}   {p50:.2f}x  "
        f"{'ok' if p50 <= P50_TARGET else 'TARGET MISSED'} (≤ {P50_TARGET}x)"
    )
    mine_rate, raw_rate = _rate(rates["ditto"]), _rate(rates["raw"])
    share = mine_rate.median / raw_rate.median
    print(
        f"  throughput, {CONCURRENT} at once: Ditto {mine_rate.show(0)} calls/s   raw "
        f"{raw_rate.show(0)} calls/s   {share:.0%}  "
        f"{'ok' if share >= THROUGHPUT_TARGET else 'TARGET MISSED'} (≥ {THROUGHPUT_TARGET:.0%})"
    )


def _rate(figure: Figure) -> Any:
    from timing import Spread

    return Spread.of([1 / samples[0] for samples in figure.rounds])


async def scaling(url: str, rounds: int, nodes: int, concurrency: int) -> None:
    plan = graph("fan-out")
    noop_plan = graph("fan-out-noop")
    for n in range(nodes):
        plan = plan.node(f"t{n}", "BENCH.SLEEP", [], lambda _, deps, n=n: {"n": n})
        noop_plan = noop_plan.node(f"t{n}", "BENCH.NOOP", [], lambda _, deps, n=n: {"n": n})
    print(
        f"{nodes:,}-node fan-out, 5 ms handler, {concurrency} calls per worker process "
        f"({os.cpu_count()} CPUs here):"
    )
    base = None
    for count in (1, 2, 4):
        prefix = f"bench-remote:{uuid.uuid4().hex[:8]}:"
        with tempfile.TemporaryDirectory() as folder:
            workers = start_workers(Path(folder), url, prefix, count, concurrency)
            try:
                await wait_for_workers(url, prefix, count)
                transport = RedisStreamsTransport.from_url(
                    url, Signer(SECRET.encode()), prefix=prefix
                )
                async with create_ditto() as runtime:
                    runtime.register_remote(["BENCH.SLEEP", "BENCH.NOOP"], transport=transport)
                    await _checked_run(runtime, plan)
                    figures = await alternate(
                        {"run": lambda: timed_async([lambda: _checked_run(runtime, plan)])},
                        rounds,
                    )
                    if count == 1:
                        noop = await alternate(
                            {
                                "run": lambda: timed_async(
                                    [lambda: _checked_run(runtime, noop_plan)]
                                )
                            },
                            rounds,
                        )
            finally:
                stop(workers)
                await clean(url, prefix)
        rate = Figure(figures["run"].rounds).rate(nodes)
        base = base or rate.median
        growth = rate.median / base
        verdict = ""
        if count == 2:
            verdict = "ok" if growth >= SCALING_TARGET else "TARGET MISSED"
            verdict += f" (≥ {SCALING_TARGET}x)"
        print(f"  {count} worker(s): {rate.show(0):>24} nodes/s   {growth:.2f}x  {verdict}")
        if count == 1:
            remote_us = noop["run"].latency(0.5, 1e6 / nodes)
    local_us = await _local_per_node(noop_plan, rounds)
    print(
        f"per-node overhead, no-op handler: remote {remote_us.show(1)} µs, in-process "
        f"{local_us.show(1)} µs"
    )


async def _local_per_node(plan: Any, rounds: int) -> Any:
    async def noop(input: dict[str, Any], ctx: Any) -> dict[str, Any]:
        return input

    async with create_ditto(workers=[define_worker("bench", {"BENCH.NOOP": noop})]) as runtime:
        await _checked_run(runtime, plan)
        figures = await alternate(
            {"run": lambda: timed_async([lambda: _checked_run(runtime, plan)])}, rounds
        )
    return figures["run"].latency(0.5, 1e6 / len(plan))


async def _checked_run(runtime: Any, plan: Any) -> None:
    result = await runtime.run(plan)
    assert result.ok, {r.error.code for r in result.failed.values() if r.error}


async def main(url: str, rounds: int, calls: int, nodes: int, concurrency: int) -> None:
    await round_trip(url, rounds, calls)
    await scaling(url, rounds, nodes, concurrency)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--url", default=os.environ.get("DITTO_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")
    )
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--calls", type=int, default=500)
    parser.add_argument("--nodes", type=int, default=2_000)
    parser.add_argument("--worker-concurrency", type=int, default=8)
    parser.add_argument("--raw-worker", help=argparse.SUPPRESS)
    arguments = parser.parse_args()
    if arguments.raw_worker:
        asyncio.run(raw_worker(arguments.url, arguments.raw_worker))
    else:
        asyncio.run(
            main(
                arguments.url,
                arguments.rounds,
                arguments.calls,
                arguments.nodes,
                arguments.worker_concurrency,
            )
        )
