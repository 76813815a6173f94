"""``ditto memory`` on a broken store file: one line naming the code, exit 3, no traceback, and
the file left as it was."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import anyio
import pytest
from typer.testing import CliRunner

from ditto.app.cli.app import app
from workers.memory import MemoryDraft, SqliteMemoryStore


async def _fill(path: Path) -> None:
    async with SqliteMemoryStore(path) as store:
        await store.write(
            [MemoryDraft(content="x" * 100, key=f"k{n}") for n in range(300)], "create"
        )


def not_a_database(path: Path) -> None:
    path.write_bytes(b"SQLite format 2\x00" + bytes(range(256)) * 8)


def truncated(path: Path) -> None:
    anyio.run(_fill, path)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def a_directory(path: Path) -> None:
    path.mkdir()


BROKEN: dict[str, tuple[Callable[[Path], None], str]] = {
    "not-a-database": (not_a_database, "STORE_CORRUPT"),
    "truncated": (truncated, "STORE_CORRUPT"),
    "a-directory": (a_directory, "STORE_UNAVAILABLE"),
}
COMMANDS = (
    ["stats"],
    ["list"],
    ["get", "k1"],
    ["search", "anything"],
    ["history", "k1"],
    ["export"],
    ["hygiene", "--dry-run"],
)


@pytest.mark.parametrize("command", COMMANDS, ids=lambda command: command[0])
@pytest.mark.parametrize("case", sorted(BROKEN))
def test_a_broken_store_is_one_line_and_exit_3(
    case: str, command: list[str], tmp_path: Path
) -> None:
    breaker, code = BROKEN[case]
    path = tmp_path / "memory.sqlite"
    breaker(path)
    before = path.read_bytes() if path.is_file() else None
    config = tmp_path / "ditto.yaml"
    config.write_text(f"workers:\n  memory:\n    sqlite_path: '{path}'\n")

    result = CliRunner().invoke(app, ["memory", *command, "--config", str(config)])

    assert result.exit_code == 3, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
    *notes, error = result.stderr.strip().splitlines()
    assert error.startswith(f"{code}: ")  # the error is one line, and the last
    assert str(path) in error
    assert not any(line.startswith(code) for line in notes)
    assert "Traceback" not in result.output
    if before is not None:
        assert path.read_bytes() == before


@pytest.mark.parametrize("command", COMMANDS[:-1], ids=lambda command: command[0])
def test_reading_commands_never_create_a_store(command: list[str], tmp_path: Path) -> None:
    path = tmp_path / "not-yet" / "memory.sqlite"
    config = tmp_path / "ditto.yaml"
    config.write_text(f"workers:\n  memory:\n    sqlite_path: '{path}'\n")

    result = CliRunner().invoke(app, ["memory", *command, "--config", str(config)])

    assert result.exit_code == 3, result.output
    assert result.stderr.strip().splitlines()[-1] == f"STORE_UNAVAILABLE: no memory store at {path}"
    assert not path.parent.exists()


def test_the_store_path_expands_the_home_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    anyio.run(_fill, tmp_path / "home-store.sqlite")
    config = tmp_path / "ditto.yaml"
    config.write_text("workers:\n  memory:\n    sqlite_path: '~/home-store.sqlite'\n")

    result = CliRunner().invoke(app, ["memory", "stats", "--json", "--config", str(config)])

    assert result.exit_code == 0, result.output
    assert '"records":300' in result.stdout
