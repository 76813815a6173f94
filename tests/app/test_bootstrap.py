"""``ditto.app.bootstrap``: settings become a runtime with the configured MEMORY worker."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ditto.app.bootstrap import open_runtime
from ditto.app.config import load_config
from ditto.errors import ConfigError
from workers.memory import MemoryStoreError

pytestmark = pytest.mark.anyio


async def test_the_default_is_a_sqlite_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    async with open_runtime(load_config(env={})) as runtime:
        written = await runtime.invoke("MEMORY.WRITE", {"memories": [{"key": "k", "content": 1}]})
        assert written.ok
    assert (tmp_path / "memory.sqlite").exists()
    async with open_runtime(load_config(env={})) as runtime:
        found = await runtime.invoke("MEMORY.GET", {"keys": ["k"]})
    assert found.unwrap().items[0].content == 1


async def test_a_configured_file_in_a_missing_folder_is_unavailable_not_created(
    tmp_path: Path,
) -> None:
    """A typo in ``sqlite_path`` must not start an empty store in a new folder (as ``Memory``
    and the CLI refuse to): opening fails ``STORE_UNAVAILABLE`` naming the folder."""
    config = tmp_path / "ditto.yaml"
    missing = tmp_path / "typo" / "memory.sqlite"
    config.write_text(f"workers:\n  memory:\n    sqlite_path: '{missing}'\n")
    with pytest.raises(MemoryStoreError) as refused:
        async with open_runtime(load_config(config, env={})):
            pass
    assert refused.value.code == "STORE_UNAVAILABLE"
    assert str(missing.parent) in str(refused.value)
    assert not missing.parent.exists()


async def test_configured_limits_and_backend_apply(tmp_path: Path) -> None:
    config = tmp_path / "ditto.yaml"
    config.write_text(
        "workers:\n  memory:\n    backend: inprocess\n    query_limit: 2\n    track_usage: false\n"
    )
    async with open_runtime(load_config(config, env={})) as runtime:
        await runtime.invoke("MEMORY.WRITE", {"memories": [{"content": n} for n in range(5)]})
        page = (await runtime.invoke("MEMORY.QUERY", {})).unwrap()
        await runtime.invoke("MEMORY.SEARCH", {"query": "3"})
        everything = (await runtime.invoke("MEMORY.QUERY", {"limit": 10})).unwrap()
    assert len(page.items) == 2
    assert page.next_cursor is not None
    assert all(item.usage_count == 0 for item in everything.items)
    assert not (tmp_path / "memory.sqlite").exists()


async def test_the_markdown_backend_keeps_records_as_files_in_its_folder(tmp_path: Path) -> None:
    config = tmp_path / "ditto.yaml"
    config.write_text(
        f"workers:\n  memory:\n    backend: markdown\n    markdown_path: '{tmp_path / 'notes'}'\n"
    )
    async with open_runtime(load_config(config, env={})) as runtime:
        written = await runtime.invoke(
            "MEMORY.WRITE", {"memories": [{"key": "tz", "content": "UTC+8"}]}
        )
        assert written.ok, written.error
        hits = (await runtime.invoke("MEMORY.SEARCH", {"query": "utc"})).unwrap().hits
    assert [hit.memory.key for hit in hits] == ["tz"]
    assert (tmp_path / "notes" / "default" / "tz.md").read_text().endswith("---\nUTC+8\n")
    assert not (tmp_path / "memory.sqlite").exists()


async def test_the_configured_write_policy_applies_per_category(tmp_path: Path) -> None:
    config = tmp_path / "ditto.yaml"
    config.write_text(
        "workers:\n  memory:\n    backend: inprocess\n    policy:\n"
        "      stages: {contradiction: enforce}\n"
        "      categories: {scratch: {contradiction: off}}\n"
        "      default_trust: agent\n      ttl_days: {daily: 2}\n"
    )
    async with open_runtime(load_config(config, env={})) as runtime:

        async def write(draft: dict[str, Any]) -> Any:
            mode = "upsert" if "key" in draft else "create"
            result = await runtime.invoke("MEMORY.WRITE", {"memories": [draft], "mode": mode})
            return result.unwrap()

        await write({"key": "fact", "content": "a", "trust": "verified"})
        guess = await write({"key": "fact", "content": "b"})
        await write({"key": "note", "content": "a", "category": "scratch"})
        note = await write({"key": "note", "content": "b", "category": "scratch"})
        daily = await write({"content": "today", "category": "daily"})
    assert guess.outcomes[0].outcome == ["contested"]
    assert guess.items[0].trust == "agent"
    assert note.outcomes[0].outcome == ["updated"]
    assert daily.items[0].expires_at is not None


async def test_context_uses_redis_when_its_url_is_set(tmp_path: Path, redis_space: Any) -> None:
    config = tmp_path / "ditto.yaml"
    config.write_text(
        "workers:\n  memory:\n    backend: inprocess\n"
        f"  context:\n    cache:\n      key_prefix: '{redis_space.prefix}'\n      ttl_ms: 5000\n"
    )
    settings = load_config(config, env={"DITTO_WORKER_CONTEXT_REDIS_URL": redis_space.url})
    async with open_runtime(settings) as runtime:
        loaded = await runtime.invoke("CONTEXT.LOAD", {"scope": {"session_id": "b"}, "sources": []})
    assert loaded.ok, loaded.error
    import redis

    client = redis.Redis.from_url(redis_space.url)
    try:
        keys = list(client.scan_iter(match=f"{redis_space.prefix}*"))
        assert len(keys) == 1
        assert 0 < client.pttl(keys[0]) <= 5000
    finally:
        client.close()


async def test_without_a_redis_url_only_explicit_context_works(tmp_path: Path) -> None:
    config = tmp_path / "ditto.yaml"
    config.write_text("workers:\n  memory:\n    backend: inprocess\n")
    async with open_runtime(load_config(config, env={})) as runtime:
        scoped = await runtime.invoke("CONTEXT.LOAD", {"scope": {"session_id": "b"}, "sources": []})
        explicit = await runtime.invoke("CONTEXT.LOAD", {"sources": [{"uri": "file:x"}]})
    assert scoped.error is not None
    assert scoped.error.code == "STATE_STORE_UNAVAILABLE"
    assert explicit.ok


@pytest.mark.postgres
async def test_the_postgres_backend_comes_from_config(tmp_path: Path, postgres_space: Any) -> None:
    config = tmp_path / "ditto.yaml"
    config.write_text(
        "workers:\n  memory:\n    backend: postgres\n"
        f"    postgres_schema: {postgres_space.schema}\n"
    )
    settings = load_config(config, env={"DITTO_WORKER_MEMORY_POSTGRES_URL": postgres_space.url})
    async with open_runtime(settings) as runtime:
        await runtime.invoke("MEMORY.WRITE", {"memories": [{"key": "k", "content": "pg"}]})
    async with open_runtime(settings) as runtime:
        found = await runtime.invoke("MEMORY.GET", {"keys": ["k"]})
    assert found.unwrap().items[0].content == "pg"
    assert not (tmp_path / "memory.sqlite").exists()


def test_the_postgres_backend_needs_its_url(tmp_path: Path) -> None:
    from ditto import ConfigError

    config = tmp_path / "ditto.yaml"
    config.write_text("workers:\n  memory:\n    backend: postgres\n")
    with pytest.raises(ConfigError, match="DITTO_WORKER_MEMORY_POSTGRES_URL"):
        load_config(config, env={})


@pytest.mark.mysql
async def test_the_mysql_backend_comes_from_config(tmp_path: Path, mysql_space: Any) -> None:
    config = tmp_path / "ditto.yaml"
    config.write_text("workers:\n  memory:\n    backend: mysql\n    mysql_pool_size: 2\n")
    settings = load_config(config, env={"DITTO_WORKER_MEMORY_MYSQL_URL": mysql_space.url})
    async with open_runtime(settings) as runtime:
        await runtime.invoke("MEMORY.WRITE", {"memories": [{"key": "k", "content": "my"}]})
    async with open_runtime(settings) as runtime:
        found = await runtime.invoke("MEMORY.GET", {"keys": ["k"]})
    assert found.unwrap().items[0].content == "my"
    assert not (tmp_path / "memory.sqlite").exists()


def test_the_mysql_backend_needs_its_url(tmp_path: Path) -> None:
    from ditto import ConfigError

    config = tmp_path / "ditto.yaml"
    config.write_text("workers:\n  memory:\n    backend: mysql\n")
    with pytest.raises(ConfigError, match="DITTO_WORKER_MEMORY_MYSQL_URL"):
        load_config(config, env={})


async def test_node_types_not_listed_as_remote_stay_local(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Only MEMORY.SEARCH goes to remote workers: the other MEMORY node types still run on the
    local worker (they used to be UnknownNodeError), and SEARCH is routed to the remote pool
    only (a local replica would rank first and take it)."""
    config = tmp_path / "ditto.yaml"
    config.write_text(
        "runtime:\n  remote:\n    node_types: [MEMORY.SEARCH]\n"
        "workers:\n  memory:\n    backend: inprocess\n"
    )
    env = {
        "DITTO_RUNTIME_REMOTE_REDIS_URL": "redis://127.0.0.1:1/0",  # never called here
        "DITTO_REMOTE_SECRET": "a-secret-of-at-least-16-bytes",
    }
    monkeypatch.setenv("DITTO_REMOTE_SECRET", env["DITTO_REMOTE_SECRET"])
    async with open_runtime(load_config(config, env=env)) as runtime:
        written = await runtime.invoke("MEMORY.WRITE", {"memories": [{"key": "k", "content": 1}]})
        found = await runtime.invoke("MEMORY.GET", {"keys": ["k"]})
        serving = {
            node_type: sorted(
                info.type for info in runtime.workers() if node_type in info.node_types
            )
            for node_type in ("MEMORY.SEARCH", "MEMORY.WRITE")
        }
    assert written.ok
    assert found.unwrap().items[0].content == 1
    assert serving == {"MEMORY.SEARCH": ["remote"], "MEMORY.WRITE": ["memory"]}


def test_a_worker_process_takes_what_its_workers_declare() -> None:
    from ditto.app.serve.worker import DEFAULT_CONCURRENCY, declared_concurrency
    from ditto.runtime.router import WorkerInfo

    def info(limit: int | None) -> WorkerInfo:
        return WorkerInfo("w", "t", frozenset({"T.X"}), True, 0, limit)

    assert declared_concurrency([info(8)]) == 8
    assert declared_concurrency([info(8), info(4)]) == 12
    assert declared_concurrency([info(8), info(None)]) == DEFAULT_CONCURRENCY
    assert declared_concurrency([]) == DEFAULT_CONCURRENCY
    assert declared_concurrency([info(10_000)]) == 256


def test_the_ann_settings_reach_the_store_vector_index(tmp_path: Path) -> None:
    from ditto.app.bootstrap import build_memory_store
    from workers.memory.retrieval.ann_index import AnnSettings

    config = tmp_path / "ditto.yaml"
    config.write_text(
        "workers:\n  memory:\n    backend: inprocess\n"
        "    ann: {threshold: 5000, expansion_search: 128, dtype: f32}\n"
    )
    store = build_memory_store(load_config(config, env={}))
    configured = store._index.ann_settings  # type: ignore[attr-defined]
    assert configured == AnnSettings(threshold=5000, expansion_search=128, dtype="f32")
    default = build_memory_store(load_config(env={}))
    assert default._index.ann_settings == AnnSettings()  # type: ignore[attr-defined]
    config.write_text("workers:\n  memory:\n    ann: {threshold: -1}\n")
    with pytest.raises(ConfigError, match="threshold"):
        load_config(config, env={})
