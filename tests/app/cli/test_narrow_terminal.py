"""At 80 columns the CLI wraps between words, never inside one: every word a narrow terminal
shows is a word of the same output at full width (a split word would be two fragments that
the wide output does not have)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ditto import Memory
from tests.app.cli.runner import run_cli

_BOX = "│╭╮╰╯─┃┏┓┗┛━┡┩╇┳┻╋┣┫┠┨┯┷┿┌┐└┘├┤┬┴┼"


def _words(text: str) -> set[str]:
    return {word.strip(_BOX + "*,.;:()[]'\"…") for word in text.split()} - {""}


def _at_width(args: tuple[str, ...], cwd: Path, columns: int) -> str:
    done = run_cli(*args, cwd=cwd, env={"TERM": "dumb"}, columns=columns)
    assert done.returncode == 0, done.stderr
    return done.stdout


def _fragments(args: tuple[str, ...], cwd: Path) -> list[str]:
    narrow, wide = _at_width(args, cwd, 80), _at_width(args, cwd, 250)
    assert max(map(len, narrow.splitlines())) <= 80  # it really was narrow
    return sorted(_words(narrow) - _words(wide))


def test_search_explanations_wrap_between_words(tmp_path: Path) -> None:
    config = tmp_path / "ditto.yaml"
    # No usage counting: both runs must print the same table, only wrapped differently.
    config.write_text(
        f"workers:\n  memory:\n    sqlite_path: '{tmp_path / 'm.sqlite'}'\n    track_usage: false\n"
    )
    with Memory(tmp_path / "m.sqlite") as memory:
        memory.add(
            "the espresso machine on the third floor is broken again and needs a technician",
            key="note-0",
        )
        memory.add("espresso beans are in the cupboard above the sink", key="note-1")
    search = ("memory", "search", "espresso machine", "--explain", "--config", str(config))
    assert _fragments(search, tmp_path) == []


@pytest.mark.parametrize(
    "command",
    [
        ("memory", "search"),
        ("memory", "import"),
        ("graph", "show"),
        ("worker", "serve"),
        ("mcp", "serve"),
    ],
    ids=" ".join,
)
def test_help_wraps_between_words(command: tuple[str, ...], tmp_path: Path) -> None:
    # The commands with the longest option help (every command's help passed this check when
    # it was written; these five keep it from regressing at a fraction of the cost).
    assert _fragments((*command, "--help"), tmp_path) == []
