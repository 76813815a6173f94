"""What only the SQLite store promises about leases: processes sharing one file agree on who
holds a lease and never share a token, a file from before leases gets their tables, and lease
jobs committed in one group are answered each on its own."""

from __future__ import annotations

import json
import sqlite3
import sys
import textwrap
from pathlib import Path
from typing import Any

import anyio
import pytest
from anyio.abc import Process
from anyio.streams.buffered import BufferedByteReceiveStream

from ditto.adapters.sqlite import SqliteCheckpointStore
from ditto.runtime.checkpoints import CheckpointError
from tests.adapters.sqlite.test_sqlite_checkpoint_store import GatedClock

pytestmark = pytest.mark.anyio

REPO = Path(__file__).resolve().parents[3]
PROCESSES = 4
ROUNDS = 25

OPENER = textwrap.dedent(
    """
    import json, sys, anyio
    from ditto.adapters.sqlite import SqliteCheckpointStore
    from ditto.runtime.checkpoints import CheckpointError

    async def main(path, name, rounds):
        store = SqliteCheckpointStore(path)
        print("ready", flush=True)
        sys.stdin.readline()  # every opener starts together
        outcomes = []
        for round_ in range(int(rounds)):
            try:
                lease = await store.acquire(f"round-{round_}", name, 600)
            except CheckpointError as exc:
                if exc.code != "CHECKPOINT_BUSY":
                    raise
                outcomes.append([round_, None, exc.details["holder"]])
            else:
                outcomes.append([round_, lease.token, lease.holder])
        await store.aclose()
        print(json.dumps(outcomes), flush=True)

    anyio.run(main, *sys.argv[1:])
    """
)

# The schema of the files written before leases existed.
OLD_SCHEMA = """
CREATE TABLE checkpoints (
    id TEXT PRIMARY KEY, scope TEXT NOT NULL, envelope BLOB NOT NULL,
    updated_at REAL NOT NULL, records INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX checkpoints_by_scope ON checkpoints (scope);
CREATE TABLE checkpoint_records (
    checkpoint_id TEXT NOT NULL, seq INTEGER NOT NULL, key TEXT NOT NULL, value BLOB NOT NULL
);
CREATE UNIQUE INDEX checkpoint_records_order ON checkpoint_records (checkpoint_id, seq);
INSERT INTO checkpoints VALUES ('old-run', 'graph:g', x'00ff', 1700000000.0, 1);
INSERT INTO checkpoint_records VALUES ('old-run', 0, 'task', x'01');
"""


async def _line(output: BufferedByteReceiveStream) -> str:
    return (await output.receive_until(b"\n", 1 << 20)).decode()


async def test_processes_racing_on_one_file_get_one_lease_per_id_and_distinct_tokens(
    tmp_path: Path,
) -> None:
    path = tmp_path / "shared.sqlite"
    names = [f"process-{n}" for n in range(PROCESSES)]
    processes: list[Process] = []
    outputs: list[BufferedByteReceiveStream] = []
    try:
        for name in names:
            command = [sys.executable, "-c", OPENER, str(path), name, str(ROUNDS)]
            errors = (tmp_path / f"{name}.err").open("wb")
            process = await anyio.open_process(command, cwd=REPO, stderr=errors)
            errors.close()
            processes.append(process)
            assert process.stdout is not None
            outputs.append(BufferedByteReceiveStream(process.stdout))
        with anyio.fail_after(120):
            for output in outputs:
                assert await _line(output) == "ready"
            for process in processes:
                assert process.stdin is not None
                await process.stdin.send(b"go\n")
            reports = []
            for name, output in zip(names, outputs, strict=True):
                try:
                    reports.append(json.loads(await _line(output)))
                except (anyio.EndOfStream, anyio.IncompleteRead):  # it died: show why
                    raise AssertionError((tmp_path / f"{name}.err").read_text()) from None
            assert [await process.wait() for process in processes] == [0] * PROCESSES
    finally:
        for process in processes:
            if process.returncode is None:
                process.kill()
            await process.aclose()
    winners: dict[int, tuple[int, str]] = {}
    for name, report in zip(names, reports, strict=True):
        tokens = [token for _, token, _ in report if token is not None]
        assert tokens == sorted(tokens)  # each process sees its tokens grow
        for round_, token, holder in report:
            if token is not None:
                assert holder == name
                assert round_ not in winners  # exactly one winner per id
                winners[round_] = (token, name)
    assert sorted(winners) == list(range(ROUNDS))
    for report in reports:  # every loser was told the winner's name
        for round_, token, holder in report:
            if token is None:
                assert holder == winners[round_][1]
    # One counter for the file: every acquire that won took the next token, no token twice.
    assert sorted(token for token, _ in winners.values()) == list(range(1, ROUNDS + 1))


async def test_a_file_from_before_leases_opens_and_gets_the_lease_tables(tmp_path: Path) -> None:
    path = tmp_path / "old.sqlite"
    with sqlite3.connect(path) as connection:
        connection.executescript(OLD_SCHEMA)
    connection.close()
    store = SqliteCheckpointStore(path)
    try:
        old = await store.load("old-run")
        assert old is not None
        assert (old.envelope, old.records) == (b"\x00\xff", (("task", b"\x01"),))
        lease = await store.acquire("old-run", "resumer", 60)
        await store.append("old-run", [("next", b"\x02")], fence=lease)
        with pytest.raises(CheckpointError) as raised:
            await store.delete("old-run")
        assert raised.value.code == "CHECKPOINT_BUSY"
        assert await store.delete("old-run", fence=lease) is True
    finally:
        await store.aclose()
    with sqlite3.connect(path) as connection:
        tables = {row[0] for row in connection.execute("SELECT name FROM sqlite_master")}
    connection.close()
    assert {"checkpoint_leases", "checkpoint_lease_tokens"} <= tables


async def test_a_read_only_opening_writes_no_lease_row(tmp_path: Path) -> None:
    """Opening the file (the reader's connection too) creates the tables but no counter row:
    that would make every opening a write."""
    path = tmp_path / "cp.sqlite"
    store = SqliteCheckpointStore(path)
    try:
        assert await store.load("run") is None
    finally:
        await store.aclose()
    with sqlite3.connect(path) as connection:
        assert connection.execute("SELECT count(*) FROM checkpoint_lease_tokens").fetchone() == (0,)
    connection.close()


async def test_lease_jobs_in_one_group_are_answered_each_in_queue_order(tmp_path: Path) -> None:
    """Jobs queued while the writer is busy commit in one transaction, each seeing the jobs
    before it: a release frees the lease for the next acquire, the released holder's fenced
    write fails alone, and the new holder's lands."""
    clock = GatedClock()
    store = SqliteCheckpointStore(tmp_path / "cp.sqlite", clock=clock)
    outcomes: dict[str, Any] = {}

    async def run(name: str, call: Any) -> None:
        try:
            outcomes[name] = await call
        except CheckpointError as exc:
            outcomes[name] = exc.code

    try:
        first = await store.acquire("run", "first", 60)
        await store.save("run", "graph:g", b"first", fence=first)
        clock.open.clear()
        async with anyio.create_task_group() as group:
            group.start_soon(run, "blocker", store.save("blocker", "graph:b", b""))
            await anyio.to_thread.run_sync(clock.entered.wait, 30)  # the writer is held
            for name, call in (
                ("busy", store.acquire("run", "second", 60)),
                ("release", store.release(first)),
                ("acquire", store.acquire("run", "second", 60)),
                ("stale append", store.append("run", [("stale", b"")], fence=first)),
                ("unfenced delete", store.delete("run")),
            ):
                group.start_soon(run, name, call)
            await anyio.wait_all_tasks_blocked()  # every job is queued behind the blocker
            clock.open.set()
        second = outcomes.pop("acquire")
        assert (second.holder, second.token) == ("second", first.token + 1)
        assert outcomes == {
            "blocker": None,
            "busy": "CHECKPOINT_BUSY",
            "release": None,
            "stale append": "CHECKPOINT_LEASE_LOST",
            "unfenced delete": "CHECKPOINT_BUSY",
        }
        await store.append("run", [("t", b"second")], fence=second)
        stored = await store.load("run")
        assert stored is not None
        assert (stored.envelope, stored.records) == (b"first", (("t", b"second"),))
    finally:
        clock.open.set()
        await store.aclose()
