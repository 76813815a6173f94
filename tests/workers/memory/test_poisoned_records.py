"""One bad record never poisons a store: import refuses what a write could not have stored, and
a malformed row already in a file gives a precise error naming it, not a crash."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import anyio
import msgspec
import pytest
from typer.testing import CliRunner

from ditto import create_ditto
from ditto.app.cli.app import app
from workers.memory import MemoryDraft, MemoryItem, SqliteMemoryStore, create_memory_worker

POISON = "9999-12-31T23:59:59-23:59"  # valid ISO 8601, but past the calendar in UTC


def stored_record(path: Path) -> dict[str, Any]:
    """A record as export writes it, from a real store at ``path``."""

    async def write() -> MemoryItem:
        async with SqliteMemoryStore(path) as store:
            (item,) = await store.write([MemoryDraft(content="fine", key="a")], "create")
        return item

    record: dict[str, Any] = msgspec.to_builtins(anyio.run(write))
    return record


@pytest.mark.parametrize("field", ["created_at", "updated_at", "last_used_at", "archived_at"])
def test_import_refuses_a_timestamp_outside_the_calendar(field: str, tmp_path: Path) -> None:
    database = tmp_path / "memory.sqlite"
    record = stored_record(database)
    good = json.dumps({"type": "record", "record": {**record, "id": "good", "key": "g"}})
    bad = json.dumps(
        {"type": "record", "record": {**record, "id": "bad", "key": "b", field: POISON}}
    )
    export = tmp_path / "export.jsonl"
    export.write_text(good + "\n" + bad + "\n")
    config = tmp_path / "ditto.yaml"
    config.write_text(f"workers:\n  memory:\n    sqlite_path: '{database}'\n")

    result = CliRunner().invoke(app, ["memory", "import", str(export), "--config", str(config)])

    assert result.exit_code == 2, result.output
    error = result.stderr.strip().splitlines()[-1]
    assert error.startswith("INVALID_INPUT: line 2: ")
    assert field in error
    assert "nothing was imported" in error
    stats = CliRunner().invoke(app, ["memory", "stats", "--json", "--config", str(config)])
    assert json.loads(stats.stdout)["records"] == 1  # the store still reads, unchanged


@pytest.mark.anyio
async def test_a_malformed_row_is_a_precise_error_and_the_others_still_read(
    tmp_path: Path,
) -> None:
    path = tmp_path / "memory.sqlite"
    async with SqliteMemoryStore(path) as store:
        good, bad = await store.write(
            [MemoryDraft(content="good"), MemoryDraft(content="bad")], "create"
        )
    with sqlite3.connect(path) as raw:  # what an older Ditto's import could have left behind
        raw.execute("UPDATE memories SET created_at = ? WHERE id = ?", (2**62, bad.id))

    async with SqliteMemoryStore(path) as store:
        async with create_ditto(workers=[create_memory_worker(store)]) as runtime:
            listed = await runtime.invoke("MEMORY.QUERY", {})
            one = await runtime.invoke("MEMORY.GET", {"ids": [good.id]})
    assert listed.error is not None
    assert listed.error.code == "STORE_CORRUPT"
    assert bad.id in listed.error.message
    assert [item.id for item in one.unwrap().items] == [good.id]
