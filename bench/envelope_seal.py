"""What private envelopes cost: ChaCha20-Poly1305 sealing (encrypted and authenticated) against
the HMAC-SHA256 signing it replaced, per call and per remote round trip.

* **Sealing.** One call's worth of cryptography — the caller seals the call, the worker opens
  it, the worker seals the reply, the caller opens it — with today's ``Signer`` and with the
  HMAC-only ``Signer`` of the baseline tree.
* **Round trip.** Sequential remote ``invoke`` calls through Redis (caller and worker server in
  this process, no-op handler), the same transport and server code with either signer. The issue
  allows encrypted envelopes at most 10 % more per round trip.

The baseline is the ``envelope.py`` of a tree from before the change::

    mkdir -p /tmp/remote-server/base && git archive <commit> | tar -x -C /tmp/remote-server/base

Systems take turns round by round (``timing.alternate``); figures are medians over rounds with
the lowest and highest round.

    python3 bench/envelope_seal.py [--baseline PATH]  (uses $DITTO_TEST_REDIS_URL or redis://127.0.0.1:6379/0)
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import os
import time
import uuid
from pathlib import Path
from typing import Any

import msgspec
import redis.asyncio as aioredis
from timing import alternate, timed, timed_async

from ditto import create_ditto, define_worker
from ditto.adapters.redis.server import RemoteWorkerServer
from ditto.adapters.redis.streams import RedisStreamsTransport
from ditto.runtime.transports.envelope import CallEnvelope, ReplyEnvelope, Signer

SECRET = uuid.uuid4().hex.encode()
TARGET = 0.10
DEFAULT_BASELINE = Path("/tmp/remote-server/base/ditto/runtime/transports/envelope.py")


def load_baseline(path: Path) -> Any:
    spec = importlib.util.spec_from_file_location("baseline_envelope", path)
    if spec is None or spec.loader is None:
        raise SystemExit(f"no baseline envelope.py at {path} (see the module docstring)")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class HmacOnly:
    """The baseline's HMAC signer behind today's ``Signer`` interface (one key, no rotation)."""

    def __init__(self, signer: Any) -> None:
        self._signer = signer
        self.max_bytes = signer.max_bytes
        self.fingerprint = signer.fingerprint
        self.fingerprints = (signer.fingerprint,)

    def seal(self, message: msgspec.Struct, *, key: int = 0) -> bytes:
        return bytes(self._signer.seal(message))

    def open(self, sealed: bytes, kind: type[Any]) -> Any:
        return self._signer.open(sealed, kind)

    def open_keyed(self, sealed: bytes, kind: type[Any]) -> tuple[Any, int]:
        return self._signer.open(sealed, kind), 0


def sample_call() -> CallEnvelope:
    return CallEnvelope(
        uuid.uuid4().hex,
        "MEMORY.SEARCH",
        msgspec.Raw(
            msgspec.msgpack.encode({"query": "what did alice say about redis", "limit": 5})
        ),
        time.time() + 30,
        "alice",
        ("graph", uuid.uuid4().hex, "task"),
        1,
        "ditto:replies:" + uuid.uuid4().hex,
        uuid.uuid4().hex,
    )


def sample_reply() -> ReplyEnvelope:
    output = {"hits": [{"id": uuid.uuid4().hex, "score": 0.5, "content": "x" * 200}] * 5}
    return ReplyEnvelope(
        uuid.uuid4().hex,
        "success",
        msgspec.Raw(msgspec.msgpack.encode(output)),
        None,
        "worker-1",
        1,
        0.5,
        1.5,
    )


def sealing(signers: dict[str, Any], rounds: int, calls: int) -> dict[str, float]:
    call, reply = sample_call(), sample_reply()

    def work(signer: Any) -> Any:
        def once() -> None:
            signer.open(signer.seal(call), CallEnvelope)
            signer.open(signer.seal(reply), ReplyEnvelope)

        return once

    figures = alternate_sync(
        {name: work(signer) for name, signer in signers.items()}, rounds, calls
    )
    print(
        f"sealing, one call's worth (seal+open of a call and of a reply), {calls} x {rounds} (µs):"
    )
    for name, figure in figures.items():
        print(f"  {name:<12} {figure.latency(0.5, 1e6).show(1):>22}")
    return {name: figure.latency(0.5, 1e6).median for name, figure in figures.items()}


def alternate_sync(works: dict[str, Any], rounds: int, calls: int) -> Any:
    return asyncio.run(
        alternate(
            {name: (lambda w=work: timed([w] * calls)) for name, work in works.items()}, rounds
        )
    )


async def round_trips(
    url: str, signers: dict[str, Any], rounds: int, calls: int
) -> dict[str, float]:
    async def noop(input: dict[str, Any], ctx: Any) -> dict[str, Any]:
        return input

    servers: list[tuple[RemoteWorkerServer, asyncio.Task[None]]] = []
    callers: dict[str, Any] = {}
    prefixes = []
    client = aioredis.Redis.from_url(url, decode_responses=False)
    async with create_ditto(workers=[define_worker("bench", {"BENCH.NOOP": noop})]) as local:
        try:
            for name, signer in signers.items():
                prefix = f"bench-seal:{uuid.uuid4().hex[:8]}:"
                prefixes.append(prefix)
                server = RemoteWorkerServer(
                    local.engine.invoke_nested,
                    ["BENCH.NOOP"],
                    client,
                    signer,
                    worker_id=f"bench-{name}",
                    prefix=prefix,
                )
                servers.append((server, asyncio.create_task(server.serve())))
                transport = RedisStreamsTransport(client, signer, prefix=prefix)
                runtime = create_ditto()
                await runtime.__aenter__()
                runtime.register_remote(["BENCH.NOOP"], transport=transport)
                callers[name] = runtime
            await asyncio.sleep(0.5)  # first heartbeats

            def calling(runtime: Any) -> Any:
                async def call() -> None:
                    result = await runtime.invoke("BENCH.NOOP", {"n": 1})
                    assert result.ok, result

                return call

            for runtime in callers.values():
                for _ in range(200):
                    await calling(runtime)()
            figures = await alternate(
                {
                    name: (lambda r=runtime: timed_async([calling(r)] * calls))
                    for name, runtime in callers.items()
                },
                rounds,
            )
        finally:
            for runtime in callers.values():
                await runtime.__aexit__(None, None, None)
            for server, task in servers:
                server.stop()
                await task
            for prefix in prefixes:
                keys = [key async for key in client.scan_iter(match=f"{prefix}*")]
                if keys:
                    await client.delete(*keys)
            await client.aclose()
    print(f"round trip, sequential, caller and worker in one process, {calls} x {rounds} (µs):")
    for name, figure in figures.items():
        print(f"  p50  {name:<12} {figure.latency(0.5, 1e6).show(0):>20}")
    return {name: figure.latency(0.5, 1e6).median for name, figure in figures.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", type=Path, default=DEFAULT_BASELINE)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--calls", type=int, default=2_000)
    parser.add_argument("--round-trips", type=int, default=500)
    args = parser.parse_args()
    url = os.environ.get("DITTO_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")
    baseline = load_baseline(args.baseline)
    signers = {"chacha20": Signer(SECRET), "hmac-only": HmacOnly(baseline.Signer(SECRET))}
    cost = sealing(signers, args.rounds, args.calls)
    trips = asyncio.run(round_trips(url, signers, args.rounds, args.round_trips))
    added = cost["chacha20"] - cost["hmac-only"]
    share = (trips["chacha20"] - trips["hmac-only"]) / trips["hmac-only"]
    print(
        f"encryption adds {added:.1f} µs of sealing per call "
        f"({cost['chacha20'] / cost['hmac-only']:.2f}x the HMAC signing), "
        f"{added / trips['hmac-only']:.1%} of a {trips['hmac-only']:.0f} µs round trip"
    )
    print(
        f"round trip p50, encrypted vs HMAC-only: {share:+.1%}  "
        f"{'ok' if share <= TARGET else 'TARGET MISSED'} (≤ +{TARGET:.0%})"
    )


if __name__ == "__main__":
    main()
