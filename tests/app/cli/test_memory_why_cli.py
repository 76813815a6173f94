"""``ditto memory why``: the stage that kept a record out of a search, by key or by id."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ditto import Memory
from tests.app.cli.runner import invoke_cli


@pytest.fixture
def config(tmp_path: Path) -> Path:
    database = tmp_path / "memory.sqlite"
    with Memory(database) as m:
        m.add("prefers tabs for indentation", key="style")
        for n in range(8):
            m.add(f"indentation rule number {n}")
    path = tmp_path / "ditto.yaml"
    path.write_text(f"workers:\n  memory:\n    sqlite_path: '{database}'\n")
    return path


def test_why_names_the_limit_and_the_rank(config: Path) -> None:
    shown = invoke_cli(
        "memory",
        "why",
        "style",
        "--query",
        "indentation rule",
        "--limit",
        "3",
        "--config",
        str(config),
    )
    assert shown.exit_code == 0, shown.stderr
    assert "limit: it ranked 9, past the limit of 3" in shown.stdout


def test_why_by_id_as_json(config: Path) -> None:
    listed = json.loads(
        invoke_cli("memory", "get", "style", "--json", "--config", str(config)).stdout
    )
    record_id = listed["items"][0]["id"]
    shown = invoke_cli("memory", "why", record_id, "-q", "tabs", "--json", "--config", str(config))
    assert json.loads(shown.stdout)["stage"] == "returned"


def test_why_for_no_such_record_exits_1(config: Path) -> None:
    shown = invoke_cli("memory", "why", "nope", "-q", "tabs", "--config", str(config))
    assert shown.exit_code == 1
    assert "not_found" in shown.stderr
    assert not shown.stdout
