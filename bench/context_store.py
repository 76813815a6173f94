"""Scoped CONTEXT calls on Redis against raw redis-py doing the same reads and writes, same run.

For each of UPDATE and SELECT, with 1 client and with 32 concurrent tasks (each on its own
scope, so writers never conflict), it measures calls per second through
``runtime.invoke("CONTEXT.UPDATE" | "CONTEXT.SELECT", {"scope": ...})`` and through raw
redis-py doing the same work by hand:

* UPDATE: ``HMGET`` version and context, decode, replace one item, encode, ``EVALSHA`` the same
  compare-and-set script;
* SELECT: ``HMGET``, decode, take the first items (a read never writes).

The working set holds 10 items of ~100 bytes. Target: Ditto >= 70% of the raw rate.

    python3 tasks.py bench context_store      (uses $DITTO_TEST_REDIS_URL or redis://127.0.0.1:6379/0)
"""

from __future__ import annotations

import argparse
import asyncio
import os
import uuid
from collections.abc import Awaitable, Callable
from time import perf_counter
from typing import Any

import msgspec
import redis.asyncio as aioredis

from ditto import Ditto, create_ditto
from workers.context import ContextScope, RedisContextStore, create_context_worker
from workers.context.contracts import Context, ContextItem
from workers.context.stores.redis import CAS_SCRIPT

ITEMS = 10
TTL_MS = 600_000
TARGET = 0.7
ROUNDS = 9

_encoder = msgspec.json.Encoder()
_decoder = msgspec.json.Decoder(Context)


def item(n: int) -> dict[str, Any]:
    return {"id": f"i{n % ITEMS}", "content": f"observation {n}: " + "x" * 80}


async def rate(calls: int, tasks: int, operation: Callable[[int, int], Awaitable[Any]]) -> float:
    """Calls per second of ``operation(task, n)`` run ``calls`` times by each of ``tasks``."""

    async def worker(task: int) -> None:
        for n in range(calls):
            await operation(task, n)

    started = perf_counter()
    async with asyncio.TaskGroup() as group:
        for task in range(tasks):
            group.create_task(worker(task))
    return calls * tasks / (perf_counter() - started)


class Raw:
    """The same Redis work as the store, written directly against redis-py."""

    def __init__(self, client: aioredis.Redis, prefix: str) -> None:
        self.client = client
        self.prefix = prefix
        self.cas = client.register_script(CAS_SCRIPT)

    def key(self, task: int) -> str:
        return self.prefix + RedisContextStore.key(ContextScope(session_id=f"raw-{task}"))

    async def seed(self, task: int) -> None:
        context = Context([msgspec.convert(item(n), ContextItem) for n in range(ITEMS)])
        await self.client.delete(self.key(task))
        await self.cas(
            keys=[self.key(task)], args=["", str(uuid.uuid4()), _encoder.encode(context), TTL_MS]
        )

    async def update(self, task: int, n: int) -> None:
        version, raw = await self.client.hmget(self.key(task), ["version", "context"])
        context = _decoder.decode(raw)
        items = {entry.id: entry for entry in context.items}
        new = msgspec.convert(item(n), ContextItem)
        items[new.id] = new
        payload = _encoder.encode(Context(list(items.values())))
        written = await self.cas(
            keys=[self.key(task)], args=[version, str(uuid.uuid4()), payload, TTL_MS]
        )
        assert written == 1

    async def select(self, task: int, n: int) -> None:
        _, raw = await self.client.hmget(self.key(task), ["version", "context"])
        context = _decoder.decode(raw)
        assert len(context.items[:5]) == 5


class ThroughDitto:
    def __init__(self, runtime: Ditto) -> None:
        self.runtime = runtime

    @staticmethod
    def scope(task: int) -> dict[str, str]:
        return {"session_id": f"ditto-{task}"}

    async def seed(self, task: int) -> None:
        sources = [item(n) for n in range(ITEMS)]
        result = await self.runtime.invoke(
            "CONTEXT.LOAD", {"scope": self.scope(task), "sources": sources}
        )
        result.unwrap()

    async def update(self, task: int, n: int) -> None:
        result = await self.runtime.invoke(
            "CONTEXT.UPDATE", {"scope": self.scope(task), "add": [item(n)]}
        )
        result.unwrap()

    async def select(self, task: int, n: int) -> None:
        result = await self.runtime.invoke(
            "CONTEXT.SELECT", {"scope": self.scope(task), "purpose": "infer", "limit": 5}
        )
        assert len(result.unwrap().selected_item_ids) == 5


async def main(url: str, calls: int) -> None:
    prefix = f"ditto-bench:{uuid.uuid4().hex}:"
    store = RedisContextStore.from_url(url, ttl_ms=TTL_MS, key_prefix=prefix)
    raw_client = aioredis.Redis.from_url(url)
    raw = Raw(raw_client, prefix)
    rows = []
    try:
        async with create_ditto(workers=[create_context_worker(store=store)]) as runtime:
            ditto = ThroughDitto(runtime)
            for tasks in (1, 32):
                for task in range(tasks):
                    await raw.seed(task)
                    await ditto.seed(task)
                per_task = max(1, calls // tasks)
                for name in ("update", "select"):
                    await rate(20, tasks, getattr(ditto, name))  # warm up both sides
                    await rate(20, tasks, getattr(raw, name))
                    # Alternate short rounds and compare each Ditto round with the raw round next
                    # to it, so drift in machine load hits both sides of every ratio alike.
                    rounds = []
                    for _ in range(ROUNDS):
                        ditto_rate = await rate(per_task // ROUNDS, tasks, getattr(ditto, name))
                        raw_rate = await rate(per_task // ROUNDS, tasks, getattr(raw, name))
                        rounds.append((ditto_rate / raw_rate, ditto_rate, raw_rate))
                    rows.append((name.upper(), tasks, *sorted(rounds)[ROUNDS // 2]))
    finally:
        keys = [key async for key in raw_client.scan_iter(match=f"{prefix}*")]
        if keys:
            await raw_client.delete(*keys)
        await raw_client.aclose()
        await store.aclose()

    header = f"{'operation':10} {'tasks':>5} {'Ditto calls/s':>14} {'raw calls/s':>12} {'ratio':>7}"
    print(f"{header}  target")
    for name, tasks, ratio, ditto_rate, raw_rate in rows:
        verdict = "ok" if ratio >= TARGET else "TARGET MISSED"
        figures = f"{name:10} {tasks:5} {ditto_rate:14.0f} {raw_rate:12.0f} {ratio:6.2f}x"
        print(f"{figures}  {verdict} (>= {TARGET})")
    print(f"(the median of {ROUNDS} paired rounds; ratio = Ditto / raw within a round)")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--url",
        default=os.environ.get("DITTO_TEST_REDIS_URL", "redis://127.0.0.1:6379/0"),
        help="Redis to run against (keys live under a private prefix and are deleted after)",
    )
    parser.add_argument("--calls", type=int, default=9000, help="calls per measurement")
    arguments = parser.parse_args()
    asyncio.run(main(arguments.url, arguments.calls))
