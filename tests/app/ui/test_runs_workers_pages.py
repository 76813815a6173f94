"""The Runs page (a checkpointed run drawn, its interrupt answered) and the Workers page."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest
from starlette.testclient import TestClient

from ditto.app.ui.security import csrf_token
from tests.app.ui.approval import approval_graph, approval_worker, interrupted_run
from tests.app.ui.conftest import TOKEN, client_for
from tests.app.ui.seed import Seeded

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
