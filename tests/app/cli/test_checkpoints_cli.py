"""``ditto checkpoints list | show | prune`` on a real SQLite checkpoint file: what a run left,
what an interrupt waits for, and pruning that keeps the newest and honours --dry-run."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import anyio
import pytest

from ditto import NodeContext, create_ditto, define_worker, graph
from ditto.adapters.sqlite import SqliteCheckpointStore
from tests.app.cli.runner import invoke_cli

DAY = 86_400.0


async def _ask(value: Any, ctx: NodeContext) -> Any:
    return {"answer": ctx.interrupt({"question": "send it?"})}


def _seed(path: Path) -> None:
    """Three old checkpoints (10, 20, 30 days) and one interrupted run of today."""

    async def main() -> None:
        for age in (30, 20, 10):
            old = SqliteCheckpointStore(path, clock=lambda age=age: time.time() - age * DAY)
            await old.save(f"old-{age}", "graph:old", b"{}")
            await old.aclose()
        worker = define_worker("w", {"W.ASK": _ask})
        plan = graph("review").node("ask", "W.ASK", [], lambda i, d: {})
        store = SqliteCheckpointStore(path)
        async with create_ditto(workers=[worker], checkpoints=store) as runtime:
            result = await runtime.run(plan, {"to": "bob"}, checkpoint="email-1")
            assert result.status == "interrupted"

    anyio.run(main)


@pytest.fixture
def store(tmp_path: Path) -> Path:
    path = tmp_path / "runs.sqlite"
    _seed(path)
    return path


def _json(*args: str) -> Any:
    done = invoke_cli("checkpoints", *args, "--json")
    assert done.exit_code == 0, done.stderr
    return json.loads(done.stdout)


def test_list_shows_the_newest_first(store: Path) -> None:
    rows = _json("list", "--store", str(store))
    assert [row["id"] for row in rows] == ["email-1", "old-10", "old-20", "old-30"]
    assert rows[0]["scope"] == "graph:review"


def test_show_says_what_an_interrupted_run_waits_for(store: Path) -> None:
    shown = _json("show", "email-1", "--store", str(store))
    assert shown["status"] == "interrupted"
    assert shown["interrupts"] == [{"task": "ask", "payload": {"question": "send it?"}}]
    missing = invoke_cli("checkpoints", "show", "nope", "--store", str(store))
    assert missing.exit_code == 1
    assert missing.stderr.startswith("CHECKPOINT_NOT_FOUND")


def test_prune_dry_run_then_for_real_keeping_the_newest(store: Path) -> None:
    args = ("prune", "--store", str(store), "--older-than", "15d", "--keep-last", "3")
    would = _json(*args, "--dry-run")
    assert would["dry_run"] is True
    assert [row["id"] for row in would["deleted"]] == ["old-30"]  # old-20 is among the newest 3
    assert len(_json("list", "--store", str(store))) == 4
    done = _json(*args)
    assert [row["id"] for row in done["deleted"]] == ["old-30"]
    assert [row["id"] for row in _json("list", "--store", str(store))] == [
        "email-1",
        "old-10",
        "old-20",
    ]


def test_prune_keeps_a_checkpoint_a_run_holds_and_says_so(store: Path) -> None:
    async def hold() -> None:
        opened = SqliteCheckpointStore(store)
        await opened.acquire("old-20", "host:42:run", 600)  # a run is on it right now
        await opened.aclose()

    anyio.run(hold)
    done = _json("prune", "--store", str(store), "--older-than", "15d")
    assert [row["id"] for row in done["deleted"]] == ["old-30"]
    assert [row["id"] for row in done["busy"]] == ["old-20"]
    shown = invoke_cli("checkpoints", "prune", "--store", str(store), "--older-than", "15d")
    assert shown.exit_code == 0, shown.stderr
    assert "kept 1 checkpoints a run holds" in shown.stdout
    assert "old-20" in shown.stdout


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (("prune",), "pass --older-than, --keep-last or both"),
        (("prune", "--older-than", "soon"), "not an age"),
    ],
)
def test_bad_arguments_are_usage_errors(store: Path, args: tuple[str, ...], expected: str) -> None:
    done = invoke_cli("checkpoints", *args, "--store", str(store))
    assert done.exit_code == 2
    assert expected in done.stdout + done.stderr


def test_a_missing_store_is_reported_and_not_created(tmp_path: Path) -> None:
    path = tmp_path / "typo.sqlite"
    done = invoke_cli("checkpoints", "list", "--store", str(path))
    assert done.exit_code == 3
    assert done.stderr.startswith("STORE_UNAVAILABLE")
    assert not path.exists()
