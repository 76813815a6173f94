"""Every command takes ``--log-level`` / ``-v``, and what the library logs reaches stderr with
the time, the level and the logger's name (not bare, through Python's last-resort handler)."""

from __future__ import annotations

import io
import logging
import re
from collections.abc import Iterator

import pytest

from ditto.app.cli.logs import LogLevel, configure_logging, level_from
from tests.app.cli.runner import invoke_cli


@pytest.fixture(autouse=True)
def _restore_the_ditto_logger() -> Iterator[None]:
    logger = logging.getLogger("ditto")
    handlers, level = list(logger.handlers), logger.level
    yield
    logger.handlers[:] = handlers
    logger.setLevel(level)


def test_a_record_carries_time_level_and_logger_name() -> None:
    stream = io.StringIO()
    configure_logging(logging.INFO, stream)
    configure_logging(logging.INFO, stream)  # idempotent: still one line per record
    logging.getLogger("ditto.runtime").error("the handler for %s raised", "MEMORY.WRITE")
    logging.getLogger("ditto.runtime").debug("not at info")
    lines = stream.getvalue().splitlines()
    assert len(lines) == 1
    when = r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}"
    pattern = rf"{when} ERROR ditto\.runtime: the handler for MEMORY\.WRITE raised"
    assert re.fullmatch(pattern, lines[0]), lines


@pytest.mark.parametrize(
    ("option", "verbose", "level"),
    [
        (None, 0, logging.WARNING),
        (None, 1, logging.INFO),
        (None, 2, logging.DEBUG),
        (None, 5, logging.DEBUG),
        (LogLevel.ERROR, 2, logging.ERROR),
    ],
)
def test_the_level_comes_from_the_option_else_from_the_v_count(
    option: LogLevel | None, verbose: int, level: int
) -> None:
    assert level_from(option, verbose) == level


def test_every_command_takes_the_options() -> None:
    done = invoke_cli("-vv", "config", "check", "ditto.yaml", "--json")
    assert done.exit_code == 0, done.stderr
    assert logging.getLogger("ditto").level == logging.DEBUG
    done = invoke_cli("--log-level", "ERROR", "config", "check", "ditto.yaml", "--json")
    assert done.exit_code == 0, done.stderr
    assert logging.getLogger("ditto").level == logging.ERROR


def test_an_unknown_level_is_a_usage_error() -> None:
    done = invoke_cli("--log-level", "loud", "config", "check", "ditto.yaml")
    assert done.exit_code == 2
    assert "loud" in done.stdout + done.stderr
