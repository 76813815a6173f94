"""What the command line logs, and how: ``--log-level`` / ``-v`` on every command.

Library code only logs (``ditto.*`` loggers); the CLI decides where it goes. Without this a
handler's traceback reached stderr through Python's last-resort handler, with neither the time
nor the logger's name. Lines go to stderr (stdout carries results, and the MCP server's stdio
protocol), one per record: ``2026-12-01 20:31:25,123 WARNING ditto.runtime: ...``.
"""

from __future__ import annotations

import logging
import sys
from enum import StrEnum
from typing import TextIO

__all__ = ("FORMAT", "LogLevel", "configure_logging", "level_from")

FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


class LogLevel(StrEnum):
    """The levels ``--log-level`` accepts."""

    DEBUG = "debug"
    INFO = "info"
    WARNING = "warning"
    ERROR = "error"


def level_from(option: LogLevel | None, verbose: int) -> int:
    """The logging level: ``--log-level`` when given, else warning, lowered one step per ``-v``
    (``-v`` info, ``-vv`` debug)."""
    if option is not None:
        return int(logging.getLevelName(option.value.upper()))
    return max(logging.DEBUG, logging.WARNING - 10 * verbose)


def configure_logging(level: int, stream: TextIO | None = None) -> None:
    """Send the ``ditto`` loggers' records at ``level`` and above to ``stream`` (stderr) in
    :data:`FORMAT`. Idempotent: a second call replaces the first one's handler."""
    logger = logging.getLogger("ditto")
    for handler in list(logger.handlers):
        if getattr(handler, "_ditto_cli", False):
            logger.removeHandler(handler)
    handler = logging.StreamHandler(sys.stderr if stream is None else stream)
    handler.setFormatter(logging.Formatter(FORMAT))
    handler._ditto_cli = True  # type: ignore[attr-defined]
    logger.addHandler(handler)
    logger.setLevel(level)
