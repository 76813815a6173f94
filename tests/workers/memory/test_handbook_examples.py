"""The handbook's memory examples: each behaves as its chapter says, also when run again."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

HANDBOOK = Path(__file__).resolve().parents[3] / "examples" / "handbook"


def run_example(name: str, directory: Path) -> str:
    completed = subprocess.run(
        [sys.executable, str(HANDBOOK / f"{name}.py"), str(directory)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert completed.returncode == 0, completed.stderr
    return completed.stdout


def test_memory_sqlite_survives_reopen_and_reruns_add_nothing(tmp_path: Path) -> None:
    first = run_example("memory_sqlite", tmp_path)
    second = run_example("memory_sqlite", tmp_path)
    assert "read back {'language': 'zh-CN'}" in first
    assert first.splitlines()[0] == second.splitlines()[0]  # same id: replayed, not re-created
    assert "records in namespace 'alice': 1" in second


def test_memory_ranking_puts_the_newer_record_first(tmp_path: Path) -> None:
    expected = ["1. handbook:newer  score=0.500", f"2. handbook:older  score={1 / 244:.3f}"]
    assert run_example("memory_ranking", tmp_path).splitlines() == expected
    assert run_example("memory_ranking", tmp_path).splitlines() == expected


@pytest.mark.anyio
async def test_memory_ranking_rerun_creates_no_duplicate(tmp_path: Path) -> None:
    from workers.memory import MemoryFilter, OrderBy, SqliteMemoryStore

    run_example("memory_ranking", tmp_path)
    run_example("memory_ranking", tmp_path)
    async with SqliteMemoryStore(tmp_path / "ranking.sqlite") as store:
        records = await store.query(MemoryFilter(), OrderBy(), 100, None)
    assert sorted(record.key or "" for record in records) == ["handbook:newer", "handbook:older"]


def test_plan_then_execute_advances_one_record_and_keeps_its_usage(tmp_path: Path) -> None:
    first = run_example("plan_then_execute", tmp_path)
    second = run_example("plan_then_execute", tmp_path)
    assert "done: collect requirements" in first
    assert "plan:current: version 1, used 0 times" in first
    assert "done: draft the schema" in second
    assert "plan:current: version 2, used 1 times" in second
