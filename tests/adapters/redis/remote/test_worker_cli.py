"""``ditto worker serve`` refuses to start unconfigured; ``ditto worker list`` shows the live
workers and what is pending."""

from __future__ import annotations

import json
import socket
import subprocess
import time
from typing import Any

import anyio
import pytest

from tests.adapters.redis.remote.processes import (
    MEASURE,
    WORK,
    Cluster,
    ditto_executable,
    eventually,
    free_port,
)

pytestmark = [pytest.mark.anyio, pytest.mark.redis]


async def ditto(
    cluster: Cluster, *args: str, **env: str | None
) -> subprocess.CompletedProcess[bytes]:
    """Run ``ditto ARGS`` in the cluster's directory with its environment (``env`` overrides)."""
    with anyio.fail_after(60):
        return await anyio.run_process(
            [ditto_executable(), *args, "--config", str(cluster.config)],
            cwd=cluster.directory,
            env=cluster.environment(overrides=env),
            check=False,
        )


def assert_one_line_refusal(outcome: subprocess.CompletedProcess[bytes], *names: str) -> None:
    """Exit 2, the usual ``invalid configuration:`` header and one line naming ``names``, and no
    traceback."""
    stderr = outcome.stderr.decode()
    assert outcome.returncode == 2, stderr
    assert "Traceback" not in stderr
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    assert lines[0] == "invalid configuration:", stderr
    assert len(lines) == 2, f"expected one line after the header:\n{stderr}"
    for name in names:
        assert name in lines[1], stderr


SERVE = ("worker", "serve", "--worker", "probe_worker:probe", "--id", "w1")


async def test_serve_without_the_secret_exits_2(cluster: Cluster) -> None:
    outcome = await ditto(cluster, *SERVE, DITTO_REMOTE_SECRET=None)
    assert_one_line_refusal(outcome, "DITTO_REMOTE_SECRET")


async def test_serve_with_a_short_secret_exits_2(cluster: Cluster) -> None:
    outcome = await ditto(cluster, *SERVE, DITTO_REMOTE_SECRET="too-short")
    assert_one_line_refusal(outcome, "DITTO_REMOTE_SECRET", "16 bytes")
    assert "too-short" not in outcome.stderr.decode()


async def test_serve_without_the_redis_url_exits_2(cluster: Cluster) -> None:
    outcome = await ditto(cluster, *SERVE, DITTO_RUNTIME_REMOTE_REDIS_URL=None)
    assert_one_line_refusal(outcome, "DITTO_RUNTIME_REMOTE_REDIS_URL")


async def test_serve_with_an_unknown_worker_exits_2(cluster: Cluster) -> None:
    outcome = await ditto(cluster, "worker", "serve", "--worker", "no_such_module:probe")
    assert_one_line_refusal(outcome, "no_such_module")


async def test_list_shows_live_workers_and_pending_calls(cluster: Cluster) -> None:
    await cluster.start_all(["w1", "w2"], concurrency=2)
    async with cluster.caller() as runtime:
        with anyio.CancelScope() as scope:
            async with anyio.create_task_group() as group:

                async def hold() -> None:
                    await runtime.invoke(WORK, {"sleep": 30})

                group.start_soon(hold)
                (running,) = await eventually(cluster.runs, message="the call started")
                view: dict[str, Any] = {}

                async def listed_busy() -> bool:
                    outcome = await ditto(cluster, "worker", "list", "--json")
                    assert outcome.returncode == 0, outcome.stderr.decode()
                    view.update(json.loads(outcome.stdout))
                    by_id = {worker["id"]: worker for worker in view["workers"]}
                    return bool(by_id.get(running.worker, {}).get("in_flight") == 1)

                await eventually(listed_busy, message="the running worker shows in_flight 1")
                scope.cancel()
    workers = {worker["id"]: worker for worker in view["workers"]}
    assert set(workers) == {"w1", "w2"}
    now = time.time()
    for worker_id, worker in workers.items():
        busy = worker_id == running.worker
        assert worker["host"] == socket.gethostname()
        assert worker["node_types"] == sorted([MEASURE, WORK])
        assert worker["in_flight"] == (1 if busy else 0)
        assert worker["free"] == (1 if busy else 2)
        assert now - 10 < worker["heartbeat_at"] <= now + 1
    assert view["pending"] == {
        WORK: {"queued": 0, "running": 1},
        MEASURE: {"queued": 0, "running": 0},
    }


@pytest.mark.parametrize(
    ("worker", "expected"), [("probe_worker:limited", 3), ("probe_worker:probe", 16)]
)
async def test_serve_takes_its_concurrency_from_the_worker_it_serves(
    cluster: Cluster, worker: str, expected: int
) -> None:
    """Without --concurrency a process takes as many calls at once as its workers declare
    (it used to take 16 whatever they declared, and failed the rest NO_WORKER_AVAILABLE), or
    16 for a worker that declares no limit."""
    cluster.spawn("w1", concurrency=None, worker=worker)
    await cluster.wait_serving("w1")
    outcome = await ditto(cluster, "worker", "list", "--json")
    assert outcome.returncode == 0, outcome.stderr.decode()
    (listed,) = json.loads(outcome.stdout)["workers"]
    assert listed["concurrency"] == expected


async def test_list_with_no_worker_is_empty(cluster: Cluster) -> None:
    outcome = await ditto(cluster, "worker", "list", "--json")
    assert outcome.returncode == 0, outcome.stderr.decode()
    assert json.loads(outcome.stdout) == {"workers": [], "pending": {}}


async def test_list_without_redis_exits_3_without_a_traceback(cluster: Cluster) -> None:
    unreachable = f"redis://127.0.0.1:{free_port()}/0"
    outcome = await ditto(
        cluster, "worker", "list", "--json", DITTO_RUNTIME_REMOTE_REDIS_URL=unreachable
    )
    stderr = outcome.stderr.decode()
    assert outcome.returncode == 3, stderr
    assert "TRANSPORT_UNAVAILABLE" in stderr
    assert "Traceback" not in stderr
    assert str(unreachable) not in stderr
