"""``ditto memory history`` by key after a delete, and export / import that restore history
exactly, store all or nothing (per file, or per ``--batch``) and say what they changed."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest

from tests.app.cli.runner import invoke_cli
from workers.memory import MemoryDraft, MemoryPatch, SqliteMemoryStore


def _config(tmp_path: Path, name: str) -> Path:
    config = tmp_path / f"{name}.yaml"
    config.write_text(f"workers:\n  memory:\n    sqlite_path: '{tmp_path / name}.sqlite'\n")
    return config


@pytest.fixture
def changed(tmp_path: Path) -> Path:
    """A store whose ``ops/plan`` was created, updated and deleted, and whose ``ops/keep``
    lives on."""

    async def seed() -> None:
        async with SqliteMemoryStore(tmp_path / "source.sqlite") as store:
            plan, _ = await store.write(
                [
                    MemoryDraft(content="v1", key="plan", namespace="ops"),
                    MemoryDraft(content="kept", key="keep", namespace="ops"),
                ],
                "create",
            )
            await store.update([MemoryPatch(id=plan.id, content="v2")])
            await store.delete([plan.id])

    anyio.run(seed)
    return _config(tmp_path, "source")


def _record(n: int, content: str = "restored") -> str:
    record = {
        "id": f"id-{n}",
        "key": f"k{n}",
        "namespace": "default",
        "content": content,
        "summary": None,
        "category": "core",
        "tags": [],
        "metadata": {},
        "source": None,
        "created_at": "2026-01-01T00:00:00Z",
        "updated_at": "2026-01-01T00:00:00Z",
        "version": 1,
        "usage_count": 0,
        "last_used_at": None,
    }
    return json.dumps({"type": "record", "record": record})


def _import(config: Path, lines: list[str], *options: str) -> Any:
    source = config.with_suffix(".jsonl")
    source.write_text("".join(line + "\n" for line in lines))
    return invoke_cli("memory", "import", str(source), *options, "--config", str(config))


def _count(config: Path) -> int:
    stats = invoke_cli("memory", "stats", "--json", "--config", str(config))
    assert stats.exit_code == 0, stats.stderr
    return int(json.loads(stats.stdout)["records"])


def test_history_of_a_deleted_record_is_found_by_its_key(changed: Path) -> None:
    found = invoke_cli(
        "memory", "history", "plan", "--namespace", "ops", "--json", "--config", str(changed)
    )
    assert found.exit_code == 0, found.stderr
    entries = json.loads(found.stdout)
    assert [(e["change"], e["record"]["content"]) for e in entries] == [
        ("create", "v1"),
        ("update", "v2"),
        ("delete", "v2"),
    ]
    table = invoke_cli("memory", "history", "plan", "--namespace", "ops", "--config", str(changed))
    assert table.exit_code == 0
    assert "delete" in table.stdout
    elsewhere = invoke_cli("memory", "history", "plan", "--config", str(changed))
    assert elsewhere.exit_code == 1  # the key is in namespace ops, not default


def test_export_import_export_restores_deleted_records_history_exactly(
    changed: Path, tmp_path: Path
) -> None:
    first, second = tmp_path / "first.jsonl", tmp_path / "second.jsonl"
    exported = invoke_cli("memory", "export", str(first), "--history", "--config", str(changed))
    assert exported.exit_code == 0, exported.stderr
    assert "4 history entries" in exported.stderr
    lines = [json.loads(line) for line in first.read_text().splitlines()]
    changes = [
        (line["entry"]["record"]["key"], line["entry"]["change"])
        for line in lines
        if line["type"] == "history"
    ]
    assert ("plan", "delete") in changes  # the deleted record's history is exported

    empty = _config(tmp_path, "copy")
    imported = invoke_cli("memory", "import", str(first), "--config", str(empty))
    assert imported.exit_code == 0, imported.stderr
    again = invoke_cli("memory", "export", str(second), "--history", "--config", str(empty))
    assert again.exit_code == 0, again.stderr
    assert second.read_text() == first.read_text()
    history = invoke_cli(
        "memory", "history", "plan", "--namespace", "ops", "--json", "--config", str(empty)
    )
    assert [e["change"] for e in json.loads(history.stdout)] == ["create", "update", "delete"]


def test_a_bad_line_stores_nothing_of_the_file(tmp_path: Path) -> None:
    config = _config(tmp_path, "store")
    result = _import(config, [_record(n) for n in range(1, 601)] + ["{"])
    assert _count(config) == 0
    assert result.exit_code == 2
    assert "INVALID_INPUT: line 601:" in result.stderr
    assert "nothing was imported" in result.stderr


def test_a_key_held_by_another_record_stores_nothing_and_names_the_line(tmp_path: Path) -> None:
    config = _config(tmp_path, "store")
    assert _import(config, [_record(0)]).exit_code == 0
    taken = _record(0).replace('"id-0"', '"someone-else"')
    result = _import(config, [_record(n) for n in range(1, 601)] + [taken])
    assert _count(config) == 1
    assert result.exit_code == 3
    assert "CONFLICT: line 601:" in result.stderr


def test_batches_are_all_or_nothing_and_the_failure_says_where_to_resume(tmp_path: Path) -> None:
    config = _config(tmp_path, "store")
    lines = [_record(n) for n in range(1, 26)]
    broken = [*lines[:11], '{"type": "record"}', *lines[12:]]
    failed = _import(config, broken, "--batch", "5")
    assert failed.exit_code == 2
    assert "line 12:" in failed.stderr
    assert "--resume-from 11" in failed.stderr
    assert _count(config) == 10  # two whole batches, nothing of the third

    resumed = _import(config, lines, "--batch", "5", "--resume-from", "11", "--json")
    assert resumed.exit_code == 0, resumed.stderr
    summary = json.loads(resumed.stdout)
    assert (summary["lines"], summary["new"], summary["unchanged"]) == (15, 15, 0)
    assert _count(config) == 25


@pytest.mark.parametrize("batch", [(), ("--batch", "2")])
def test_resuming_past_the_end_of_the_file_is_a_usage_error(
    tmp_path: Path, batch: tuple[str, ...]
) -> None:
    config = _config(tmp_path, "store")
    lines = [_record(n) for n in range(5)]
    past = _import(config, lines, *batch, "--resume-from", "99")
    assert past.exit_code == 2
    assert past.stderr.strip() == "--resume-from 99 is past the end of the input (5 lines)"
    done = _import(config, lines, *batch, "--resume-from", "6")  # after a complete import
    assert done.exit_code == 0, done.stderr


def _at(n: int, version: int, content: str) -> str:
    """:func:`_record` ``n`` at another version, with other content."""
    line = json.loads(_record(n, content))
    line["record"]["version"] = version
    return json.dumps(line)


def test_the_summary_counts_new_replaced_and_unchanged_records(tmp_path: Path) -> None:
    config = _config(tmp_path, "store")
    lines = [_record(n) for n in range(3)]
    summaries = []
    for batch in (lines, lines, [_at(0, 2, "changed"), *lines[1:]]):
        result = _import(config, batch, "--json")
        assert result.exit_code == 0, result.stderr
        summaries.append(json.loads(result.stdout))
    assert [(s["new"], s["replaced"], s["unchanged"]) for s in summaries] == [
        (3, 0, 0),
        (0, 0, 3),
        (0, 1, 2),
    ]
    text = _import(config, lines, "--overwrite")
    assert "imported 1 records (0 new, 1 replaced, 2 unchanged)" in text.stderr


@pytest.mark.parametrize("batch", [(), ("--batch", "2")])
@pytest.mark.parametrize(
    ("held", "why"),
    [(_at(1, 2, "edited in the store"), "newer than this one"), (_at(1, 1, "other"), "same")],
    ids=["newer version", "same version"],
)
def test_a_record_changed_in_the_store_since_the_export_is_a_conflict(
    tmp_path: Path, held: str, why: str, batch: tuple[str, ...]
) -> None:
    config = _config(tmp_path, "store")
    assert _import(config, [held]).exit_code == 0
    lines = [_record(0), _record(1), _record(2)]
    refused = _import(config, lines, *batch)
    assert refused.exit_code == 3
    assert "CONFLICT: line 2: record id-1:" in refused.stderr
    assert why in refused.stderr
    assert "--overwrite" in refused.stderr
    kept = invoke_cli("memory", "get", "id-1", "--json", "--config", str(config))
    assert json.loads(kept.stdout)["items"][0]["content"] == json.loads(held)["record"]["content"]
    replaced = _import(config, lines, *batch, "--overwrite", "--json")
    assert replaced.exit_code == 0, replaced.stderr
    assert json.loads(replaced.stdout)["replaced"] == 1


def test_a_record_on_two_lines_stores_nothing(tmp_path: Path) -> None:
    config = _config(tmp_path, "store")
    result = _import(config, [_record(1), _record(2), _record(1, "again")])
    assert result.exit_code == 2
    assert "line 3: record id-1 is also on line 1" in result.stderr
    assert _count(config) == 0
