"""``timeout`` means "not written": work that passes its deadline before its commit is stopped
and rolled back; a commit already under way is reported as what it was. Checked on real
stores, against what is stored afterwards."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from time import monotonic

import anyio
import pytest

from ditto import create_ditto
from tests.workers.memory.conftest import MemoryHarness, requires
from workers.memory import (
    MemoryFilter,
    MemoryStore,
    OrderBy,
    SqliteMemoryStore,
    create_memory_worker,
)

pytestmark = pytest.mark.anyio


async def stored_keys(memory: MemoryHarness) -> set[str]:
    await memory.store.flush()
    items = await memory.store.query(MemoryFilter(archived="include"), OrderBy(), 100_000, None)
    return {item.key for item in items if item.key is not None}


@requires(MemoryStore)  # the core alone: every store
async def test_a_write_or_its_timeout_never_both(memory: MemoryHarness) -> None:
    """Deadlines from well before to well after a batch's commit: every ``timeout`` left
    nothing behind, every success is stored."""
    outcomes: set[str] = set()
    trial = -1
    # 0.2 ms up to ~1.2 s, then on until a write succeeds (a busy machine needs longer).
    while (trial := trial + 1) < 40 or ("success" not in outcomes and trial < 60):
        deadline = 0.0002 * (1.25**trial)
        drafts = [{"key": f"t{trial}:{n}", "content": "x" * 200} for n in range(300)]
        result = await memory.call("MEMORY.WRITE", {"memories": drafts}, timeout=deadline)
        outcomes.add(result.status)
        stored = {key for key in await stored_keys(memory) if key.startswith(f"t{trial}:")}
        if result.status == "timeout":
            assert stored == set(), f"trial {trial}: reported timeout, yet {len(stored)} stored"
        else:
            assert result.status == "success", result.error
            assert len(stored) == 300
    # The shortest deadlines pass before the call starts, the longest after it ends; the
    # in-process store never yields while it works, so it may never see one mid-write.
    assert "success" in outcomes


@requires(MemoryStore)
async def test_an_update_or_delete_or_its_timeout_never_both(memory: MemoryHarness) -> None:
    written = await memory.write(*({"key": f"r{n}", "content": n} for n in range(400)))
    ids = [item.id for item in written]
    for trial in range(30):
        deadline = 0.0002 * (1.3**trial)
        chunk = ids[trial * 10 : trial * 10 + 10]
        updated = await memory.call(
            "MEMORY.UPDATE",
            {"updates": [{"id": i, "tags": [f"u{trial}"]} for i in chunk]},
            timeout=deadline,
        )
        got = (await memory.ok("MEMORY.GET", {"ids": chunk})).items
        changed = [item for item in got if item.tags == [f"u{trial}"]]
        assert len(changed) == (0 if updated.status == "timeout" else len(chunk)), updated
        deleted = await memory.call("MEMORY.DELETE", {"ids": chunk}, timeout=deadline)
        left = (await memory.ok("MEMORY.GET", {"ids": chunk})).items
        assert len(left) == (len(chunk) if deleted.status == "timeout" else 0), deleted


async def test_a_write_waiting_for_another_process_s_lock_stops_at_its_deadline(
    tmp_path: Path,
) -> None:
    path = tmp_path / "memory.sqlite"
    async with SqliteMemoryStore(path, busy_timeout_ms=10_000) as store:
        async with create_ditto(workers=[create_memory_worker(store)]) as runtime:
            holder = sqlite3.connect(path, isolation_level=None)
            holder.execute("BEGIN IMMEDIATE")
            try:
                result = await runtime.invoke(
                    "MEMORY.WRITE", {"memories": [{"key": "late", "content": 1}]}, timeout=0.2
                )
            finally:
                holder.execute("ROLLBACK")
                holder.close()
            started = monotonic()
            after = await runtime.invoke(
                "MEMORY.WRITE", {"memories": [{"key": "next", "content": 2}]}, timeout=5
            )
            waited = monotonic() - started
            keys = {item.key for item in (await runtime.invoke("MEMORY.QUERY", {})).unwrap().items}
    assert result.status == "timeout"
    assert after.ok
    assert keys == {"next"}  # the abandoned write never committed, not even later
    # The writer thread was freed at the deadline, not after the 10 s busy timeout.
    assert waited < 5


async def test_a_commit_under_way_is_reported_as_what_it_was(tmp_path: Path) -> None:
    """Whatever the deadline, a call either wrote everything it reported or nothing: run many
    short-deadline writes concurrently and compare the reports with the file."""
    path = tmp_path / "memory.sqlite"
    reports: dict[str, str] = {}
    async with SqliteMemoryStore(path) as store:
        async with create_ditto(workers=[create_memory_worker(store)]) as runtime:

            async def one(n: int) -> None:
                result = await runtime.invoke(
                    "MEMORY.WRITE",
                    {"memories": [{"key": f"c{n}:{i}", "content": i} for i in range(50)]},
                    timeout=0.0005 * (n % 20 + 1),
                )
                reports[f"c{n}"] = result.status

            async with anyio.create_task_group() as group:
                for n in range(60):
                    group.start_soon(one, n)
    with sqlite3.connect(path) as raw:
        keys = [row[0] for row in raw.execute("SELECT key FROM memories")]
    counts: dict[str, int] = {}
    for key in keys:
        counts[key.split(":")[0]] = counts.get(key.split(":")[0], 0) + 1
    for call, status in reports.items():
        assert counts.get(call, 0) == (0 if status == "timeout" else 50), (call, status)
