"""``ditto memory hygiene``, ``audit``, ``search --explain`` and export/import across backends,
through the real entry point."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import anyio
import pytest

from tests.cli.test_cli import run_cli
from tests.services import PostgresSpace
from workers.memory import MemoryDraft, SqliteMemoryStore

TEN_DAYS_AGO = datetime.now(UTC) - timedelta(days=10)


def _config(tmp_path: Path, database: Path, extra: str = "") -> Path:
    config = tmp_path / "ditto.yaml"
    config.write_text(f"workers:\n  memory:\n    sqlite_path: '{database}'\n{extra}")
    return config


@pytest.fixture
def aged(tmp_path: Path) -> Path:
    """A store whose conversation record was last touched ten days ago, with a retention rule."""
    database = tmp_path / "aged.sqlite"

    async def seed() -> None:
        async with SqliteMemoryStore(database, clock=lambda: TEN_DAYS_AGO) as store:
            await store.write(
                [
                    MemoryDraft(content="old chat", key="chat:1", category="conversation"),
                    MemoryDraft(content="a fact", key="fact:1"),
                ],
                "create",
            )

    anyio.run(seed)
    rules = (
        "    retention:\n      categories:\n"
        "        conversation: {archive_after_days: 3, purge_after_days: 30}\n"
    )
    return _config(tmp_path, database, rules)


def test_hygiene_dry_run_previews_exactly_what_the_run_does(aged: Path) -> None:
    preview = run_cli("memory", "hygiene", "--dry-run", "--json", "--config", str(aged))
    assert preview.returncode == 0, preview.stderr
    planned = json.loads(preview.stdout)
    assert planned["dry_run"] is True
    assert len(planned["archived"]) == 1
    assert run_cli("memory", "get", "chat:1", "--config", str(aged)).returncode == 0

    applied = run_cli("memory", "hygiene", "--json", "--config", str(aged))
    assert applied.returncode == 0, applied.stderr
    report = json.loads(applied.stdout)
    assert report["archived"] == planned["archived"]
    assert report["purged"] == planned["purged"] == []

    hidden = run_cli("memory", "get", "chat:1", "--config", str(aged))
    assert hidden.returncode == 1
    shown = run_cli("memory", "get", "chat:1", "--archived", "--json", "--config", str(aged))
    assert json.loads(shown.stdout)["items"][0]["archived_at"] is not None
    only = run_cli("memory", "list", "--archived", "only", "--json", "--config", str(aged))
    assert [item["key"] for item in json.loads(only.stdout)["items"]] == ["chat:1"]
    stats = json.loads(run_cli("memory", "stats", "--json", "--config", str(aged)).stdout)
    assert (stats["records"], stats["archived"]) == (2, 1)
    history = json.loads(
        run_cli("memory", "history", "chat:1", "--json", "--config", str(aged)).stdout
    )
    assert [entry["change"] for entry in history] == ["create", "archive"]

    table = run_cli("memory", "hygiene", "--config", str(aged))
    assert table.returncode == 0
    assert "archive" in table.stdout
    assert "did archive 0" in table.stderr  # nothing left to do


def test_export_keeps_archived_records(aged: Path, tmp_path: Path) -> None:
    assert run_cli("memory", "hygiene", "--config", str(aged)).returncode == 0
    exported = tmp_path / "out.jsonl"
    assert run_cli("memory", "export", str(exported), "--config", str(aged)).returncode == 0
    records = [json.loads(line)["record"] for line in exported.read_text().splitlines()]
    assert sorted(record["key"] for record in records) == ["chat:1", "fact:1"]
    assert sum(record["archived_at"] is not None for record in records) == 1


def test_audit_lists_every_decision_and_filters_by_principal(tmp_path: Path) -> None:
    config = _config(
        tmp_path, tmp_path / "audited.sqlite", "    audit: true\n    acl:\n      mode: enforce\n"
    )
    completed = run_cli("memory", "list", "--config", str(config))
    assert completed.returncode == 4  # enforce needs a principal ...
    assert "FORBIDDEN" in completed.stderr
    for principal in ("alice", "bob"):  # ... and with one, every read is audited
        assert (
            run_cli("memory", "list", "--principal", principal, "--config", str(config)).returncode
            == 0
        )
    entries = json.loads(run_cli("memory", "audit", "--json", "--config", str(config)).stdout)
    assert [(e["principal"], e["node"], e["decision"]) for e in entries] == [
        ("alice", "MEMORY.QUERY", "allow"),
        ("bob", "MEMORY.QUERY", "allow"),
    ]
    bobs = run_cli("memory", "audit", "--principal", "bob", "--json", "--config", str(config))
    assert [entry["principal"] for entry in json.loads(bobs.stdout)] == ["bob"]
    page = run_cli(
        "memory", "audit", "--after", str(entries[0]["seq"]), "--json", "--config", str(config)
    )
    assert [entry["seq"] for entry in json.loads(page.stdout)] == [entries[1]["seq"]]
    table = run_cli("memory", "audit", "--config", str(config))
    assert "allow" in table.stdout
    assert "MEMORY.QUERY" in table.stdout


def test_search_explain_shows_each_hits_rank(tmp_path: Path) -> None:
    database = tmp_path / "explain.sqlite"

    async def seed() -> None:
        async with SqliteMemoryStore(database) as store:
            await store.write(
                [MemoryDraft(content="green tea"), MemoryDraft(content="tea and tea")], "create"
            )

    anyio.run(seed)
    config = _config(tmp_path, database)
    output = run_cli("memory", "search", "tea", "--explain", "--json", "--config", str(config))
    assert output.returncode == 0, output.stderr
    explains = [hit["explain"] for hit in json.loads(output.stdout)["hits"]]
    assert [explain["keyword_rank"] for explain in explains] == [1, 2]
    assert all(explain["strategy"] == "keyword" for explain in explains)
    table = run_cli("memory", "search", "tea", "--explain", "--config", str(config))
    assert "keyword_rank=1" in table.stdout


@pytest.mark.postgres
def test_sqlite_to_postgres_and_back_is_lossless(
    aged: Path, tmp_path: Path, postgres_space: PostgresSpace
) -> None:
    source_db = tmp_path / "aged.sqlite"

    async def change() -> None:  # history worth carrying: an update and a deletion
        from workers.memory import MemoryPatch

        async with SqliteMemoryStore(source_db) as store:
            (fact,) = await store.get([], ["fact:1"], "default")
            await store.update([MemoryPatch(fact.id, content="a better fact", pinned=True)])
            extra = await store.write([MemoryDraft(content="gone soon")], "create")
            await store.delete([extra[0].id])

    anyio.run(change)
    assert run_cli("memory", "hygiene", "--config", str(aged)).returncode == 0
    exported = tmp_path / "sqlite.jsonl"
    assert (
        run_cli("memory", "export", str(exported), "--history", "--config", str(aged)).returncode
        == 0
    )

    pg_config = tmp_path / "pg.yaml"
    schema = postgres_space.schema
    pg_config.write_text(
        f"workers:\n  memory:\n    backend: postgres\n    postgres_schema: {schema}\n"
    )
    env = {"DITTO_WORKER_MEMORY_POSTGRES_URL": postgres_space.url}
    for attempt in range(2):  # the second import changes nothing
        imported = run_cli("memory", "import", str(exported), "--config", str(pg_config), env=env)
        assert imported.returncode == 0, imported.stderr
        assert "imported 2 records" in imported.stderr
        assert ("history entries" in imported.stderr) == (attempt == 0)
    back = tmp_path / "postgres.jsonl"
    exported_back = run_cli(
        "memory", "export", str(back), "--history", "--config", str(pg_config), env=env
    )
    assert exported_back.returncode == 0, exported_back.stderr
    assert _lines(back) == _lines(exported)


def _lines(path: Path) -> list[Any]:
    return sorted((json.loads(line) for line in path.read_text().splitlines()), key=json.dumps)


def test_reindex_gives_vectors_to_existing_records(tmp_path: Path) -> None:
    database = tmp_path / "vectors.sqlite"

    async def seed() -> None:  # written before any embedder was configured
        async with SqliteMemoryStore(database) as store:
            await store.write(
                [MemoryDraft(content="espresso machine"), MemoryDraft(content="green tea")],
                "create",
            )

    anyio.run(seed)
    config = _config(
        tmp_path, database, "    embedder:\n      kind: hashing\n      dimension: 64\n"
    )
    search = ("memory", "search", "espresso", "--strategy", "vector", "--json")
    assert run_cli(*search, "--config", str(config)).returncode == 1  # no vectors yet
    done = run_cli("memory", "reindex", "--json", "--config", str(config))
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {
        "model": "ditto-hashing-v1-64",
        "dimension": 64,
        "embedded": 2,
    }
    found = run_cli(*search, "--config", str(config))
    assert found.returncode == 0, found.stderr
    assert json.loads(found.stdout)["hits"][0]["memory"]["content"] == "espresso machine"
    stats = json.loads(run_cli("memory", "stats", "--json", "--config", str(config)).stdout)
    assert stats["vectors"]["model"] == "ditto-hashing-v1-64"
    assert stats["vectors"]["records_without_vector"] == 0
    again = run_cli("memory", "reindex", "--json", "--config", str(config))
    assert json.loads(again.stdout)["embedded"] == 0  # nothing left to do
    no_embedder = tmp_path / "plain.yaml"
    no_embedder.write_text(f"workers:\n  memory:\n    sqlite_path: '{database}'\n")
    refused = run_cli("memory", "reindex", "--config", str(no_embedder))
    assert refused.returncode == 2
    assert "embedder" in refused.stderr


def test_models_status_reports_the_installed_weights() -> None:
    completed = run_cli("models", "status")
    assert completed.returncode == 0, completed.stdout
    assert "ready" in completed.stdout
