"""The ``ditto`` command: in process, and end to end through its installed console script."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import ditto
from tests.app.cli.runner import invoke_cli, run_cli


def test_version() -> None:
    completed = run_cli("--version")
    assert completed.returncode == 0
    assert completed.stdout.strip() == f"ditto {ditto.__version__}"


def test_no_arguments_prints_help_and_is_a_usage_error() -> None:
    completed = invoke_cli()
    assert completed.exit_code == 2
    assert "config" in completed.stdout + completed.stderr


def test_config_check_prints_the_effective_settings() -> None:
    completed = invoke_cli("config", "check", "ditto.yaml", "--json")
    assert completed.exit_code == 0, completed.stderr
    report = json.loads(completed.stdout)
    assert report["source"] == "ditto.yaml"
    assert report["settings"]["runtime"]["timeout_ms"] == 30000


def test_config_check_redacts_credentials_from_the_environment() -> None:
    completed = invoke_cli(
        "config",
        "check",
        "--json",
        env={"DITTO_WORKER_CONTEXT_REDIS_URL": "redis://ops:hunter2@cache:6379/0"},
    )
    assert completed.exit_code == 0, completed.stderr
    assert "hunter2" not in completed.stdout
    report = json.loads(completed.stdout)
    assert report["settings"]["workers"]["context"]["redis_url"] == "redis://***@cache:6379/0"


def test_config_check_table_output(tmp_path: Path) -> None:
    completed = invoke_cli("config", "check", cwd=tmp_path)
    assert completed.exit_code == 0
    assert "runtime.timeout_ms" in completed.stdout
    assert "library defaults" in completed.stdout


def test_bad_config_exits_2_with_the_key_path(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("runtime:\n  timeout_ms: -5\n  password: hunter2\n")
    completed = invoke_cli("config", "check", str(bad))
    assert completed.exit_code == 2
    assert "runtime.password" in completed.stderr
    assert "hunter2" not in completed.stderr + completed.stdout


def test_demo_runs_and_shows_every_status(tmp_path: Path) -> None:
    completed = run_cli("demo", cwd=tmp_path)
    assert completed.returncode == 0, completed.stderr
    for expected in ("success", "failed", "timeout", "NOT_FOUND", "summary:", "MEMORY.SEARCH"):
        assert expected in completed.stdout
    assert f"memory: {tmp_path.resolve() / 'memory.sqlite'}" in completed.stdout.replace("\n", "")


def test_demo_memory_is_durable_and_reruns_add_no_duplicates(tmp_path: Path) -> None:
    invoke_cli("demo", cwd=tmp_path)
    second = invoke_cli("demo", cwd=tmp_path)
    assert second.exit_code == 0, second.stderr
    listing = [
        line.split()
        for line in second.stdout.splitlines()
        if re.search(r"used \d+x\s+version", line)
    ]
    assert len(listing) == 3  # the same three records, not six
    assert all(row[-1] == "1" for row in listing)  # version 1: identical re-runs replay
    assert any("1x" in row for row in listing)  # the first run's recall was counted


def test_demo_uses_the_configured_store(tmp_path: Path) -> None:
    config = tmp_path / "ditto.yaml"
    config.write_text("workers:\n  memory:\n    backend: inprocess\n")
    completed = invoke_cli("demo", "--config", str(config), cwd=tmp_path)
    assert completed.exit_code == 0, completed.stderr
    assert "memory: inprocess store" in completed.stdout
    assert not (tmp_path / "memory.sqlite").exists()


def test_python_dash_m_ditto_is_the_same_command() -> None:
    completed = subprocess.run(
        [sys.executable, "-m", "ditto", "--version"], capture_output=True, text=True, timeout=60
    )
    assert completed.stdout.strip() == f"ditto {ditto.__version__}"


def test_config_check_reports_the_memory_backend_without_secrets(tmp_path: Path) -> None:
    config = tmp_path / "ditto.yaml"
    config.write_text("workers:\n  memory:\n    backend: postgres\n")
    completed = invoke_cli(
        "config",
        "check",
        str(config),
        "--json",
        env={"DITTO_WORKER_MEMORY_POSTGRES_URL": "postgresql://app:hunter2@db:5432/prod"},
    )
    assert completed.exit_code == 0, completed.stderr
    memory = json.loads(completed.stdout)["settings"]["workers"]["memory"]
    assert memory["backend"] == "postgres"
    assert memory["postgres_url"] == "postgresql://***@db:5432/prod"
    assert "hunter2" not in completed.stdout
    missing = invoke_cli("config", "check", str(config))
    assert missing.exit_code == 2
    assert "DITTO_WORKER_MEMORY_POSTGRES_URL" in missing.stderr
