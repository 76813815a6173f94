"""Checkpoints across processes: a run killed with ``kill -9`` resumes in a new process, and an
interrupted run is answered from another process, on SQLite and on Redis.

The child (``tests/reliability/checkpoint_child.py``) appends one line per task side effect to a
file with ``O_APPEND``; the parent counts the lines, so "ran exactly once" is measured on the
effects, not on what the runtime reports.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import anyio
import pytest

from ditto.adapters.redis import RedisCheckpointStore
from ditto.adapters.sqlite import SqliteCheckpointStore
from ditto.runtime.checkpoints import CheckpointStore
from tests.reliability.checkpoint_child import CHAINS, LENGTH
from tests.services import RedisSpace

pytestmark = pytest.mark.anyio

REPO = Path(__file__).resolve().parents[2]
TASKS = CHAINS * LENGTH


@pytest.fixture(params=["sqlite", "redis"])
def store_spec(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:{tmp_path / 'checkpoints.sqlite'}"
    space: RedisSpace = request.getfixturevalue("redis_space")
    return f"redis:{space.url}|{space.prefix}"


def open_store(spec: str) -> CheckpointStore:
    kind, _, where = spec.partition(":")
    if kind == "sqlite":
        return SqliteCheckpointStore(where)
    url, _, prefix = where.rpartition("|")
    return RedisCheckpointStore.from_url(url, prefix=prefix)


def child(*args: str, effects: Path, spec: str, check: bool = True) -> dict[str, Any]:
    done = subprocess.run(
        [
            sys.executable,
            *("-m", "tests.reliability.checkpoint_child", *args),
            *("--store", spec, "--effects", str(effects)),
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    if check:
        assert done.returncode == 0, done.stderr[-2000:]
        return dict(json.loads(done.stdout.splitlines()[-1]))
    return {"returncode": done.returncode, "stderr": done.stderr}


async def recorded_tasks(spec: str, checkpoint_id: str) -> set[str]:
    store = open_store(spec)
    try:
        stored = await store.load(checkpoint_id)
    finally:
        await store.aclose()
    assert stored is not None
    return {key for key, _ in stored.records}


def effects_of(path: Path) -> Counter[str]:
    """How many times each task's side effect happened."""
    lines = path.read_text().split() if path.exists() else []
    return Counter(line.partition("=")[0] for line in lines)


def keys_of(path: Path) -> Counter[str]:
    """How many times a side effect happened under each ``ctx.idempotency_key``."""
    lines = path.read_text().split() if path.exists() else []
    return Counter(line.partition("=")[2] for line in lines)


async def test_a_run_killed_mid_way_resumes_in_a_new_process_running_each_task_once(
    tmp_path: Path, store_spec: str
) -> None:
    effects = tmp_path / "effects.log"
    killed = child(
        "long",
        "--checkpoint",
        "long-1",
        "--kill-at",
        "101",
        effects=effects,
        spec=store_spec,
        check=False,
    )
    assert killed["returncode"] == -signal.SIGKILL
    before = effects_of(effects)
    assert sum(before.values()) == 100
    assert set(before.values()) == {1}

    resumed = child(
        "resume-long",
        *("--checkpoint", "long-1", "--concurrency", "4", "--wait", "30"),
        effects=effects,
        spec=store_spec,
    )
    assert resumed == {"status": "completed", "ok": True, "tasks": TASKS}
    after = effects_of(effects)
    assert len(after) == TASKS, "every task ran"
    assert set(after.values()) == {1}, "no task ran twice"
    keys = keys_of(effects)
    assert len(keys) == TASKS, "one key per task, the same across the kill"
    assert set(keys.values()) == {1}, "exactly once per key"


def test_two_processes_resuming_one_checkpoint_at_once_run_each_task_once(tmp_path: Path) -> None:
    """The issue's case: a 200-task run killed after 40 tasks, then two resumes at the same
    time (a cron job and a crash handler). One runs the rest; the other waits for the lease and
    gets the completed result (or, without ``--wait``, ``CHECKPOINT_BUSY``)."""
    spec = f"sqlite:{tmp_path / 'checkpoints.sqlite'}"
    effects = tmp_path / "effects.log"
    child(
        "long", "--checkpoint", "twice", "--kill-at", "41", effects=effects, spec=spec, check=False
    )
    assert sum(effects_of(effects).values()) == 40

    def resumer(checkpoint: str, *extra: str) -> subprocess.Popen[str]:
        return subprocess.Popen(
            [
                sys.executable,
                *("-m", "tests.reliability.checkpoint_child", "resume-long"),
                *("--checkpoint", checkpoint, "--concurrency", "4", *extra),
                *("--store", spec, "--effects", str(effects)),
            ],
            cwd=REPO,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

    # Both wait out the killed run's lease, then race for it.
    processes = [resumer("twice", "--wait", "30"), resumer("twice", "--wait", "30")]
    outcomes = []
    for process in processes:
        stdout, stderr = process.communicate(timeout=120)
        assert process.returncode == 0, stderr[-2000:]
        outcomes.append(json.loads(stdout.splitlines()[-1]))
    assert outcomes == [{"status": "completed", "ok": True, "tasks": TASKS}] * 2
    keys = keys_of(effects)
    assert len(keys) == TASKS
    assert set(keys.values()) == {1}, "every side effect once"

    # Without waiting, a resume while another process runs the checkpoint is told who does.
    effects = tmp_path / "busy.log"
    child(
        "long", "--checkpoint", "busy", "--kill-at", "41", effects=effects, spec=spec, check=False
    )
    running = resumer("busy", "--wait", "30", "--sleep", "0.02")
    deadline = time.monotonic() + 60
    while sum(effects_of(effects).values()) < 45:  # the resume holds the checkpoint now
        assert running.poll() is None
        assert time.monotonic() < deadline
        time.sleep(0.005)
    refused = child("resume-long", "--checkpoint", "busy", effects=effects, spec=spec)
    stdout, stderr = running.communicate(timeout=120)
    assert running.returncode == 0, stderr[-2000:]
    assert json.loads(stdout.splitlines()[-1])["ok"]
    assert refused["error"] == "CHECKPOINT_BUSY"
    assert refused["details"]["holder"].split(":")[1] == str(running.pid)


def test_a_kill_at_a_random_moment_reruns_only_the_tasks_in_flight(tmp_path: Path) -> None:
    """With eight tasks in flight a kill can land between a task's effect and its record: such
    a task runs again on resume (at-least-once for work in flight), and nothing else does."""
    spec = f"sqlite:{tmp_path / 'checkpoints.sqlite'}"
    effects = tmp_path / "effects.log"
    process = subprocess.Popen(
        [
            sys.executable,
            *("-m", "tests.reliability.checkpoint_child", "long", "--checkpoint", "long-2"),
            *("--concurrency", "8", "--sleep", "0.003"),
            *("--store", spec, "--effects", str(effects)),
        ],
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    target = random.Random(os.getpid()).randrange(30, 150)
    deadline = time.monotonic() + 60
    while sum(effects_of(effects).values()) < target:
        assert process.poll() is None, process.stderr.read() if process.stderr else ""
        assert time.monotonic() < deadline
        time.sleep(0.001)
    process.send_signal(signal.SIGKILL)
    process.wait(timeout=30)
    if process.stderr is not None:
        process.stderr.close()

    recorded = anyio.run(recorded_tasks, spec, "long-2")
    before = effects_of(effects)

    resumed = child(
        "resume-long",
        *("--checkpoint", "long-2", "--concurrency", "8", "--wait", "30"),
        effects=effects,
        spec=spec,
    )
    assert resumed["ok"]
    assert resumed["tasks"] == TASKS
    after = effects_of(effects)
    assert len(after) == TASKS
    assert all(after[task] == 1 for task in recorded), "a recorded task never runs again"
    again = [task for task, count in after.items() if count > 1]
    assert set(again) <= set(before) - recorded, "only effects without a record repeat"
    assert len(again) <= 8, "at most the tasks in flight at the kill"


@pytest.mark.parametrize("answer", ["approve", "reject"])
async def test_an_interrupt_is_answered_from_another_process(
    tmp_path: Path, store_spec: str, answer: str
) -> None:
    effects = tmp_path / "effects.log"
    asked = child("ask", "--checkpoint", "approval-1", effects=effects, spec=store_spec)
    assert asked == {
        "status": "interrupted",
        "checkpoint_id": "approval-1",
        "interrupts": [["approve", {"question": "send the draft?"}]],
    }
    assert effects_of(effects) == Counter({"draft": 1})

    answered = child(
        "answer",
        "--checkpoint",
        "approval-1",
        "--answer",
        answer,
        effects=effects,
        spec=store_spec,
    )
    sent = "send" if answer == "approve" else "discard"
    assert answered == {"status": "completed", "ok": True, "send": {"done": sent}}
    assert effects_of(effects) == Counter({"draft": 1, f"answered:{answer}": 1, sent: 1})

    # Answering again is refused and changes nothing: the run is complete.
    again = child(
        "answer",
        "--checkpoint",
        "approval-1",
        "--answer",
        "approve",
        effects=effects,
        spec=store_spec,
        check=False,
    )
    assert again["returncode"] != 0
    assert "no interrupt waits for an answer" in again["stderr"]
    assert effects_of(effects) == Counter({"draft": 1, f"answered:{answer}": 1, sent: 1})


async def test_a_tampered_checkpoint_is_refused_in_the_new_process(
    tmp_path: Path, store_spec: str
) -> None:
    effects = tmp_path / "effects.log"
    child("ask", "--checkpoint", "approval-2", effects=effects, spec=store_spec)
    store = open_store(store_spec)
    try:
        stored = await store.load("approval-2")
        assert stored is not None
        forged = stored.envelope.replace(b"send the draft?", b"wire the money")
        assert forged != stored.envelope
        await store.save("approval-2", stored.scope, forged)
    finally:
        await store.aclose()

    refused = child(
        "answer",
        "--checkpoint",
        "approval-2",
        "--answer",
        "approve",
        effects=effects,
        spec=store_spec,
        check=False,
    )
    assert refused["returncode"] != 0
    assert "CHECKPOINT_CORRUPT" in refused["stderr"]
    assert effects_of(effects) == Counter({"draft": 1}), "nothing ran"


async def test_a_loop_resumes_from_its_last_iteration_in_a_new_runtime_on_the_same_store(
    tmp_path: Path, store_spec: str
) -> None:
    from ditto import DittoError, create_ditto, define_worker, graph, loop

    runs: list[int] = []
    fail_at: list[int] = [3]

    async def step(value: int, ctx: object) -> int:
        runs.append(value)
        return value + 1

    def update(state: int, run: object) -> int:
        if fail_at and state == fail_at[0]:
            fail_at.clear()
            raise RuntimeError("the process dies here")
        return int(run["next"].unwrap())  # type: ignore[index]

    counting = loop(
        graph=graph("count").node("next", "LOOP.STEP", [], lambda state, deps: state),
        update=update,
        done=lambda state, run: state >= 6,
        id="counter",
    )
    worker = define_worker("loop", {"LOOP.STEP": step})
    async with create_ditto(workers=[worker], checkpoints=open_store(store_spec)) as first:
        with pytest.raises(RuntimeError):
            await first.loop(counting, 0, checkpoint="count-1")
    assert runs == [0, 1, 2, 3]
    async with create_ditto(workers=[worker], checkpoints=open_store(store_spec)) as second:
        assert await second.loop(counting, 0, checkpoint="count-1") == 6
        assert runs == [0, 1, 2, 3, 3, 4, 5], "iterations 0-2 are not run again"
        assert await second.loop(counting, 0, checkpoint="count-1") == 6
        assert runs == [0, 1, 2, 3, 3, 4, 5], "a finished loop returns its state"
        with pytest.raises(DittoError) as refused:
            await second.loop(counting, 1, checkpoint="count-1")
        assert refused.value.code == "CHECKPOINT_MISMATCH"
