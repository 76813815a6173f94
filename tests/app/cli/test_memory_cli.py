"""``ditto memory``: the configured store seen from the command line (one test through the
real entry point)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.app.cli.runner import invoke_cli, run_cli
from workers.memory import MemoryDraft, SqliteMemoryStore


@pytest.fixture
def seeded(tmp_path: Path) -> Path:
    """A ditto.yaml whose SQLite memory file holds a few records."""
    import anyio

    database = tmp_path / "cli-memory.sqlite"
    config = tmp_path / "ditto.yaml"
    config.write_text(f"workers:\n  memory:\n    sqlite_path: '{database}'\n")

    async def seed() -> None:
        async with SqliteMemoryStore(database) as store:
            await store.write(
                [
                    MemoryDraft(
                        content="espresso machine is broken",
                        key="note:1",
                        namespace="ops",
                        tags=["kitchen"],
                    ),
                    MemoryDraft(
                        content="tea is fine", key="note:2", namespace="ops", category="daily"
                    ),
                    MemoryDraft(content={"language": "zh-CN"}, key="pref:lang", namespace="alice"),
                ],
                "create",
            )

    anyio.run(seed)
    return config


def test_stats_counts_per_namespace_and_category(seeded: Path) -> None:
    completed = invoke_cli("memory", "stats", "--json", "--config", str(seeded))
    assert completed.exit_code == 0, completed.stderr
    report = json.loads(completed.stdout)
    assert report["records"] == 3
    assert report["backend"] == "sqlite"
    assert report["by_namespace_category"] == [
        {"namespace": "alice", "category": "core", "records": 1, "archived": 0},
        {"namespace": "ops", "category": "core", "records": 1, "archived": 0},
        {"namespace": "ops", "category": "daily", "records": 1, "archived": 0},
    ]
    assert report["archived"] == 0
    assert report["pinned"] == 0
    assert report["index_health"]["keyword_index_in_sync"] is True
    assert report["index_health"]["integrity"] == "ok"
    assert report["size_bytes"] > 0
    assert report["oldest"] <= report["newest"]
    table = invoke_cli("memory", "stats", "--config", str(seeded))
    assert "3 records (sqlite)" in table.stdout


def test_list_filters_and_pages(seeded: Path) -> None:
    first = invoke_cli(
        "memory", "list", "--namespace", "ops", "--limit", "1", "--json", "--config", str(seeded)
    )
    assert first.exit_code == 0, first.stderr
    page = json.loads(first.stdout)
    assert len(page["items"]) == 1
    second = invoke_cli(
        "memory",
        "list",
        "--namespace",
        "ops",
        "--limit",
        "1",
        "--json",
        "--cursor",
        page["next_cursor"],
        "--config",
        str(seeded),
    )
    keys = {page["items"][0]["key"], json.loads(second.stdout)["items"][0]["key"]}
    assert keys == {"note:1", "note:2"}
    tagged = invoke_cli("memory", "list", "--tag", "kitchen", "--json", "--config", str(seeded))
    assert [item["key"] for item in json.loads(tagged.stdout)["items"]] == ["note:1"]
    table = invoke_cli("memory", "list", "--config", str(seeded))
    assert "3 records" in table.stdout


def test_get_by_key_or_id_and_exit_1_when_missing(seeded: Path) -> None:
    found = invoke_cli(
        "memory", "get", "pref:lang", "--namespace", "alice", "--json", "--config", str(seeded)
    )
    assert found.exit_code == 0, found.stderr
    (item,) = json.loads(found.stdout)["items"]
    by_id = invoke_cli("memory", "get", item["id"], "--json", "--config", str(seeded))
    assert json.loads(by_id.stdout)["items"][0]["content"] == {"language": "zh-CN"}
    missing = invoke_cli("memory", "get", "nope", "--config", str(seeded))
    assert missing.exit_code == 1
    assert missing.stderr.strip() == "not found in namespace 'default': 'nope'"


def test_get_names_each_ref_it_did_not_find(seeded: Path) -> None:
    partly = invoke_cli(
        "memory",
        "get",
        "pref:lang",
        "nope",
        "--namespace",
        "alice",
        "--json",
        "--config",
        str(seeded),
    )
    assert partly.exit_code == 1
    assert [item["key"] for item in json.loads(partly.stdout)["items"]] == ["pref:lang"]
    assert partly.stderr.strip() == "not found in namespace 'alice': 'nope'"


def test_get_shows_a_hidden_record_when_included(tmp_path: Path) -> None:
    import anyio

    from workers.memory.model.planning import WriteRules

    database = tmp_path / "held.sqlite"

    async def seed() -> None:
        async with SqliteMemoryStore(database) as store:
            rules = WriteRules(quarantined=frozenset({0}))
            await store.write([MemoryDraft(content="held back", key="note")], "create", rules=rules)

    anyio.run(seed)
    config = tmp_path / "ditto.yaml"
    config.write_text(f"workers:\n  memory:\n    sqlite_path: '{database}'\n")
    hidden = invoke_cli("memory", "get", "note", "--config", str(config))
    assert hidden.exit_code == 1
    shown = invoke_cli(
        "memory", "get", "note", "--include", "quarantined", "--json", "--config", str(config)
    )
    assert shown.exit_code == 0, shown.stderr
    (item,) = json.loads(shown.stdout)["items"]
    assert (item["status"], item["content"]) == ("quarantined", "held back")
    wrong = invoke_cli("memory", "get", "note", "--include", "hidden", "--config", str(config))
    assert wrong.exit_code == 2


def test_search_ranks_hits_and_exit_1_when_nothing_matches(seeded: Path) -> None:
    hits = invoke_cli(
        "memory", "search", "is the espresso machine broken?", "--json", "--config", str(seeded)
    )
    assert hits.exit_code == 0, hits.stderr
    assert json.loads(hits.stdout)["hits"][0]["memory"]["key"] == "note:1"
    nothing = invoke_cli("memory", "search", "zebra", "--config", str(seeded))
    assert nothing.exit_code == 1
    bad = invoke_cli("memory", "search", "x", "--strategy", "vector-magic", "--config", str(seeded))
    assert bad.exit_code == 2
    assert "INVALID_INPUT" in bad.stderr


def test_usage_and_config_errors_exit_2(tmp_path: Path) -> None:
    assert invoke_cli("memory", "list", "--limit", "0").exit_code == 2
    bad = tmp_path / "bad.yaml"
    bad.write_text("workers:\n  memory:\n    backend: floppy\n")
    completed = invoke_cli("memory", "stats", "--config", str(bad))
    assert completed.exit_code == 2
    assert "workers.memory.backend" in completed.stderr


def test_an_unreachable_store_exits_3_with_a_safe_message(tmp_path: Path) -> None:
    pytest.importorskip("asyncpg", reason="the postgres backend needs asyncpg")
    config = tmp_path / "ditto.yaml"
    config.write_text("workers:\n  memory:\n    backend: postgres\n")
    completed = run_cli(
        "memory",
        "stats",
        "--config",
        str(config),
        env={"DITTO_WORKER_MEMORY_POSTGRES_URL": "postgresql://app:hunter2@127.0.0.1:1/db"},
    )
    assert completed.returncode == 3
    assert "STORE_UNAVAILABLE" in completed.stderr
    assert "Traceback" not in completed.stderr
    assert "hunter2" not in completed.stderr + completed.stdout


def test_history_lists_changes_by_key_and_survives_deletion(seeded: Path) -> None:
    import anyio

    from workers.memory import MemoryPatch

    database = Path(str(seeded).replace("ditto.yaml", "cli-memory.sqlite"))

    async def change() -> str:
        async with SqliteMemoryStore(database) as store:
            (item,) = await store.get([], ["note:1"], "ops")
            await store.update([MemoryPatch(id=item.id, content="espresso machine fixed")])
            await store.delete([item.id])
            return item.id

    item_id = anyio.run(change)
    by_id = invoke_cli("memory", "history", item_id, "--json", "--config", str(seeded))
    assert by_id.exit_code == 0, by_id.stderr
    entries = json.loads(by_id.stdout)
    assert [(entry["change"], entry["version"]) for entry in entries] == [
        ("create", 1),
        ("update", 2),
        ("delete", 2),
    ]
    live = invoke_cli("memory", "history", "note:2", "--namespace", "ops", "--config", str(seeded))
    assert live.exit_code == 0
    assert "create" in live.stdout
    missing = invoke_cli("memory", "history", "nope", "--config", str(seeded))
    assert missing.exit_code == 1


def _all(database: Path) -> list[Any]:
    import anyio

    from workers.memory import MemoryFilter, OrderBy

    async def read() -> list[Any]:
        async with SqliteMemoryStore(database) as store:
            return await store.query(MemoryFilter(), OrderBy(), 10_000, None)

    return anyio.run(read)


def test_export_then_import_reproduces_every_record_and_is_idempotent(
    seeded: Path, tmp_path: Path
) -> None:
    exported = tmp_path / "export.jsonl"
    completed = invoke_cli("memory", "export", str(exported), "--history", "--config", str(seeded))
    assert completed.exit_code == 0, completed.stderr
    lines = [json.loads(line) for line in exported.read_text().splitlines()]
    assert sorted(line["type"] for line in lines) == ["history"] * 3 + ["record"] * 3

    target_db = tmp_path / "copy.sqlite"
    target = tmp_path / "copy.yaml"
    target.write_text(f"workers:\n  memory:\n    sqlite_path: '{target_db}'\n")
    for summary in ("3 new, 0 replaced, 0 unchanged", "0 new, 0 replaced, 3 unchanged"):
        imported = invoke_cli("memory", "import", str(exported), "--config", str(target))
        assert imported.exit_code == 0, imported.stderr
        assert summary in imported.stderr  # the second import changes nothing, and says so
    source_db = Path(str(seeded).replace("ditto.yaml", "cli-memory.sqlite"))
    assert _all(target_db) == _all(source_db)


def test_export_imports_into_another_backend(seeded: Path, tmp_path: Path) -> None:
    import anyio
    import msgspec

    from workers.memory import InProcessMemoryStore, MemoryFilter, OrderBy
    from workers.memory.model.contracts import ExportLine

    exported = tmp_path / "export.jsonl"
    assert invoke_cli("memory", "export", str(exported), "--config", str(seeded)).exit_code == 0
    records = [
        line.record
        for line in map(msgspec.json.Decoder(ExportLine).decode, exported.read_bytes().splitlines())
        if line.record is not None
    ]

    async def copy() -> list[Any]:
        store = InProcessMemoryStore()
        await store.restore(records)
        return await store.query(MemoryFilter(), OrderBy(), 100, None)

    source_db = Path(str(seeded).replace("ditto.yaml", "cli-memory.sqlite"))
    assert anyio.run(copy) == _all(source_db)


def test_import_refuses_a_malformed_file(tmp_path: Path, seeded: Path) -> None:
    broken = tmp_path / "broken.jsonl"
    broken.write_text('{"type": "record", "record": {"id": 5}}\n')
    completed = invoke_cli("memory", "import", str(broken), "--config", str(seeded))
    assert completed.exit_code == 2
    assert "line 1" in completed.stderr
    assert len(_all(Path(str(seeded).replace("ditto.yaml", "cli-memory.sqlite")))) == 3
