"""Every example script runs to completion (examples are documentation that must not rot)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


@pytest.mark.parametrize(
    "script", sorted(EXAMPLES.rglob("*.py")), ids=lambda path: str(path.relative_to(EXAMPLES))
)
def test_example_runs(script: Path, tmp_path: Path, redis_url: str) -> None:
    # Examples that need Redis read it from the environment, as an application would; they
    # write under private key prefixes and clean up after themselves.
    environment = {**os.environ, "DITTO_WORKER_CONTEXT_REDIS_URL": redis_url}
    completed = subprocess.run(
        [sys.executable, str(script)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        env=environment,
    )
    assert completed.returncode == 0, completed.stderr


def run_context_example(folder: Path, redis_url: str) -> subprocess.CompletedProcess[str]:
    """The handbook's context example, with its memory file in ``folder``."""
    return subprocess.run(
        [sys.executable, str(EXAMPLES / "handbook" / "context_redis.py"), str(folder)],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "DITTO_WORKER_CONTEXT_REDIS_URL": redis_url},
    )


def test_the_context_example_shows_a_stale_writer_losing(tmp_path: Path, redis_url: str) -> None:
    completed = run_context_example(tmp_path, redis_url)
    assert completed.returncode == 0, completed.stderr
    lines = completed.stdout.splitlines()
    assert lines[0].startswith("working set: ")
    assert "memory:" in lines[1]
    assert lines[2:] == ["writer A: success", "writer B: failed STATE_CONFLICT"]


def test_the_context_example_ends_with_the_clear_error_when_redis_is_down(tmp_path: Path) -> None:
    # Port 1 on loopback: nothing listens there, so every connection is refused at once.
    completed = run_context_example(tmp_path, "redis://127.0.0.1:1/0")
    assert completed.returncode == 1
    assert completed.stderr.strip().splitlines() == [
        "[STATE_STORE_UNAVAILABLE] CONTEXT.LOAD failed: the context store is unreachable"
    ]


def test_every_example_docstring_gives_a_command_that_works_in_a_fresh_clone() -> None:
    for script in sorted(EXAMPLES.rglob("*.py")):
        relative = script.relative_to(EXAMPLES.parent)
        assert f"python3 tasks.py run {relative}" in script.read_text(encoding="utf-8"), script


def test_quickstart_shows_fan_out_failure_and_timeout(tmp_path: Path) -> None:
    completed = subprocess.run(
        [sys.executable, str(EXAMPLES / "quickstart.py")],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert "Atlantis: failed   NOT_FOUND" in completed.stdout
    assert "Slowtown: timeout  TIMEOUT" in completed.stdout
    assert "missing: Atlantis (failed), Slowtown (timeout)" in completed.stdout


def _readme_block(after: str) -> str:
    """The first Python block of the README after the heading ``after``."""
    readme = (EXAMPLES.parent / "README.md").read_text(encoding="utf-8")
    return readme.split(after, 1)[1].split("```python\n", 1)[1].split("```", 1)[0]


def test_the_readme_memory_hello_world_runs_verbatim(tmp_path: Path) -> None:
    script = tmp_path / "hello.py"
    script.write_text(_readme_block("## Memory in three lines"), encoding="utf-8")
    completed = subprocess.run(
        [sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    assert completed.returncode == 0, completed.stderr
    assert completed.stdout == "I prefer 4-space indentation\n"
    assert completed.stderr == ""  # closed cleanly at exit, though the script never closes it
    assert (tmp_path / "memory.sqlite").exists()
    assert not (tmp_path / "memory.sqlite-wal").exists()


def test_the_readme_tour_runs(tmp_path: Path) -> None:
    tour = _readme_block("## A short tour")
    script = tmp_path / "tour.py"
    script.write_text(tour, encoding="utf-8")
    completed = subprocess.run(
        [sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    assert completed.returncode == 0, completed.stderr
    assert "NOT_FOUND" in completed.stdout


def test_every_readme_yaml_example_is_valid_configuration(tmp_path: Path) -> None:
    from ditto.app.bootstrap import build_embedder, build_retention
    from ditto.app.config import load_config

    readme = (EXAMPLES.parent / "README.md").read_text(encoding="utf-8")
    examples = [block.split("```", 1)[0] for block in readme.split("```yaml\n")[1:]]
    assert len(examples) >= 2
    loaded = []
    for number, example in enumerate(examples):
        path = tmp_path / f"example-{number}.yaml"
        path.write_text(example, encoding="utf-8")
        # The scaling-out example names remote node types, which need their Redis URL.
        loaded.append(load_config(path, env={"DITTO_RUNTIME_REMOTE_REDIS_URL": "redis://h:6379/0"}))
    retention = [
        build_retention(settings)
        for settings in loaded
        if "retention" in examples[loaded.index(settings)]
    ]
    assert retention[0].categories["conversation"].purge_after_days == 30
    assert retention[0].audit_days == 90
    embedders = [build_embedder(settings) for settings in loaded]
    assert any(embedder is not None and embedder.dimension == 384 for embedder in embedders)


def test_agent_memory_stores_recalls_searches_history_and_forgets() -> None:
    completed = subprocess.run(
        [sys.executable, str(EXAMPLES / "agent_memory.py")],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr
    out = completed.stdout
    assert '{"stored": "code_style", "category": "core", "version": 1, "note": "Stored."}' in out
    assert "- [core] code_style: prefers tabs over spaces for indentation" in out  # recall block
    assert "-> search_history(" in out
    assert '{"forgotten": true, "key": "code_style"}' in out
    last_turn = out.rsplit("user: How should I indent my code?", 1)[1]
    assert "code_style" not in last_turn  # forgotten: neither recalled nor found
