"""The RETRIEVAL worker as a remote worker: ``ditto worker serve`` in another process serves
RETRIEVAL.SEARCH over Redis Streams, a runtime here calls it, and a MEMORY worker here hands its
searches to it — retrieval scaled out apart from the memory store."""

from __future__ import annotations

import shutil
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import redis.asyncio as aioredis

from ditto import create_ditto
from ditto.adapters.redis.keys import nodes_key
from ditto.app.bootstrap import open_runtime
from ditto.app.config import load_config
from ditto.errors import ErrorCode
from tests.adapters.redis.remote.processes import SECRET, Cluster, eventually
from tests.services import RedisSpace
from tests.workers.retrieval.conftest import embedder, write_corpus, write_docs
from workers.memory import SqliteMemoryStore, create_memory_worker
from workers.retrieval import RetrievalSearchProvider
from workers.retrieval.worker import NODE, SEARCH_CONTRACT

pytestmark = [pytest.mark.anyio, pytest.mark.redis]

WORKER = "retrieval-1"


@pytest.fixture
async def cluster(
    anyio_backend: str, tmp_path: Path, redis_space: RedisSpace
) -> AsyncIterator[Cluster]:
    """Worker processes on the test's key prefix; ended before the prefix is deleted."""
    client = aioredis.Redis.from_url(redis_space.url)
    workers = Cluster(tmp_path, redis_space.url, redis_space.prefix, client)
    shutil.copyfile(Path(__file__).with_name("remote_node.py"), tmp_path / "remote_node.py")
    try:
        yield workers
    finally:
        workers.close()
        await client.aclose()


async def _serve(cluster: Cluster, sqlite: Path, corpus: Path, worker: str) -> None:
    started = cluster.spawn(
        WORKER,
        worker=worker,
        overrides={"RETRIEVAL_TEST_SQLITE": str(sqlite), "RETRIEVAL_TEST_CORPUS": str(corpus)},
    )

    async def serving() -> bool:
        if started.process.poll() is not None:
            raise AssertionError(f"the worker exited:\n{started.output()}")
        return await cluster.client.zscore(nodes_key(cluster.prefix, NODE), WORKER) is not None

    await eventually(serving, within=60, message="the retrieval worker serves")


async def test_retrieval_runs_on_a_remote_worker(cluster: Cluster, tmp_path: Path) -> None:
    sqlite = tmp_path / "memory.sqlite"
    async with SqliteMemoryStore(sqlite) as store:
        await write_docs(store)
        await _serve(cluster, sqlite, write_corpus(tmp_path / "corpus"), "remote_node:build")

        async with cluster.caller([SEARCH_CONTRACT]) as runtime:
            found = await runtime.invoke(
                NODE,
                {"query": {"content": "crisp orchard apples"}, "target": {"name": "docs"}},
            )
            output = found.unwrap()
            assert found.worker_id is not None
            assert WORKER in found.worker_id
            assert output.candidates[0].id == "fruit/apple.txt#0"
            assert output.strategy == "auto"
            missing = await runtime.invoke(
                NODE, {"query": {"content": "apples"}, "target": {"name": "nowhere"}}
            )
            assert missing.error is not None
            assert missing.error.code == ErrorCode.RETRIEVAL_TARGET_NOT_FOUND
            refused = await runtime.invoke(
                NODE, {"query": {"content": "apples"}, "target": {"name": "docs"}, "limit": 0}
            )
            assert refused.error is not None
            assert refused.error.code == ErrorCode.INVALID_INPUT

        # MEMORY.SEARCH here, its ranking on the remote worker: the same hits as searching here.
        request = {"query": "red fruit", "strategy": "hybrid", "limit": 4}
        native = create_memory_worker(store, embedder=embedder(), track_usage=False)
        async with create_ditto(workers=[native]) as runtime:
            expected = (await runtime.invoke("MEMORY.SEARCH", request)).unwrap().hits
        delegating = create_memory_worker(
            store, RetrievalSearchProvider("memory"), embedder=embedder(), track_usage=False
        )
        async with create_ditto(workers=[delegating]) as runtime:
            runtime.register_remote([SEARCH_CONTRACT], transport=cluster.transport())
            hits = (await runtime.invoke("MEMORY.SEARCH", request)).unwrap().hits
        assert [(hit.memory, hit.score) for hit in hits] == [
            (hit.memory, hit.score) for hit in expected
        ]
        assert len(hits) == 4

    assert await cluster.stop(WORKER) == 0


async def test_ditto_yaml_configures_a_remote_retrieval_worker(
    cluster: Cluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``ditto worker serve --worker retrieval`` serves the targets ``workers.retrieval``
    configures, and a runtime whose MEMORY worker has ``search_target`` (and lists
    RETRIEVAL.SEARCH as remote) hands its searches to it."""
    sqlite = tmp_path / "memory.sqlite"
    corpus = write_corpus(tmp_path / "corpus")
    cluster.config.write_text(
        cluster.config.read_text()
        + "    node_types: [RETRIEVAL.SEARCH]\n"
        + "workers:\n"
        + "  memory:\n"
        + f"    sqlite_path: '{sqlite}'\n"
        + "    embedder: {kind: hashing}\n"
        + "    search_target: memory\n"
        + "  retrieval:\n"
        + "    targets:\n"
        + "      memory: {kind: memory}\n"
        + f"      docs: {{kind: corpus, path: '{corpus}'}}\n"
    )
    env = {"DITTO_RUNTIME_REMOTE_REDIS_URL": cluster.url}
    monkeypatch.setenv("DITTO_REMOTE_SECRET", SECRET.decode())
    settings = load_config(cluster.config, env=env)
    async with SqliteMemoryStore(sqlite) as store:
        await write_docs(store)  # the file exists before the worker opens it
    await _serve(cluster, sqlite, corpus, "retrieval")
    async with open_runtime(settings) as runtime:
        local = {t for info in runtime.workers() if info.type != "remote" for t in info.node_types}
        assert NODE not in local
        hits = (await runtime.invoke("MEMORY.SEARCH", {"query": "crisp orchard apples"})).unwrap()
        docs = await runtime.invoke(
            NODE, {"query": {"content": "sandy soil"}, "target": {"name": "docs"}}
        )
    assert hits.hits[0].memory.key == "apple"
    assert docs.unwrap().candidates[0].id == "veg/carrot.txt#0"
    assert WORKER in (docs.worker_id or "")
    assert await cluster.stop(WORKER) == 0
