"""The Runs page (a checkpointed run drawn, its interrupt answered) and the Workers page."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest
from starlette.testclient import TestClient

from ditto.app.config import load_config
from ditto.app.ui import UiOptions, create_app
from ditto.app.ui.security import csrf_token
from tests.app.ui.approval import approval_graph, approval_worker, interrupted_run
from tests.app.ui.conftest import TOKEN, client_for
from tests.app.ui.seed import Seeded
from tests.services import RedisSpace

CSRF = {"csrf": csrf_token(TOKEN)}


@pytest.fixture
def runs(seeded: Seeded, tmp_path: Path) -> Iterator[TestClient]:
    """The app with a checkpoint store holding one interrupted run (``run-1``)."""
    store = tmp_path / "runs.sqlite"
    anyio.run(interrupted_run, store, "run-1")
    with client_for(
        seeded,
        checkpoints=str(store),
        graphs=[approval_graph()],
        workers=[approval_worker()],
    ) as opened:
        opened.cookies.set("ditto_ui", TOKEN)
        yield opened


def test_a_run_is_drawn_with_each_tasks_status(runs: TestClient) -> None:
    listing = runs.get("/runs").text
    assert 'href="/runs/run-1"' in listing
    page = runs.get("/runs/run-1").text
    assert '<strong class="run-status">interrupted</strong>' in page
    assert '<g class="node success" data-task="prepare">' in page
    assert '<g class="node interrupted" data-task="ask">' in page
    assert '<g class="node not_run" data-task="apply">' in page
    assert "Publish the &lt;b&gt;launch&lt;/b&gt; note?" in page  # the question, as text
    assert "flowchart" in page  # the mermaid source beside the picture


def test_answering_the_interrupt_resumes_the_run(runs: TestClient) -> None:
    done = runs.post("/runs/run-1/answer", data={**CSRF, "answer": '"yes"', "format": "json"})
    assert done.status_code == 200
    assert "answered: the run is completed" in done.text
    assert '<g class="node success" data-task="apply">' in done.text
    assert "Waiting for an answer" not in done.text
    again = runs.post("/runs/run-1/answer", data={**CSRF, "answer": "yes", "format": "text"})
    assert again.status_code == 400  # nothing waits any more
    bad = runs.get("/runs/nothing-here")
    assert bad.status_code == 404


def test_without_a_checkpoint_store_the_page_says_how_to_get_one(client: TestClient) -> None:
    page = client.get("/runs").text
    assert "No checkpoint store" in page
    assert "--checkpoints" in page


def test_workers_shows_the_local_replicas_and_how_to_add_remote_ones(client: TestClient) -> None:
    page = client.get("/workers").text
    assert "MEMORY.SEARCH" in page
    assert "No remote workers are configured" in page


@pytest.mark.redis
def test_workers_reads_the_remote_workers_redis(
    seeded: Seeded, tmp_path: Path, redis_space: RedisSpace
) -> None:
    """Under a private prefix: no worker alive, then a dead letter a worker left."""
    from ditto.adapters.redis.dead_letters import DeadLetterReason, DeadLetters

    config = tmp_path / "ditto.yaml"
    config.write_text(
        seeded.config.read_text().replace(
            "workers:\n", f"runtime:\n  remote:\n    prefix: '{redis_space.prefix}'\nworkers:\n", 1
        )
    )
    settings = load_config(config, env={"DITTO_RUNTIME_REMOTE_REDIS_URL": redis_space.url})
    options = UiOptions(settings=settings, token=TOKEN, principal="ops")
    with TestClient(create_app(options), base_url="http://127.0.0.1") as remote:
        remote.cookies.set("ditto_ui", TOKEN)
        empty = remote.get("/workers").text
        assert "No remote worker is alive under the prefix" in empty
        assert "Dead letters (0)" in empty

        async def dead_letter() -> None:
            import redis.asyncio as aioredis

            client = aioredis.Redis.from_url(redis_space.url)
            try:
                letters = DeadLetters(client, redis_space.prefix, "worker-7")
                await letters.add(
                    DeadLetterReason.REJECTED,
                    "the envelope did not open",
                    stream="calls",
                    sealed=b"\x00sealed",
                    envelope=None,
                    deliveries=1,
                )
            finally:
                await client.aclose()

        anyio.run(dead_letter)
        page = remote.get("/workers").text
        assert "Dead letters (1)" in page
        assert "the envelope did not open" in page
        assert "<td>rejected</td>" in page
        assert "<td>worker-7</td>" in page
