"""Putting a SQLite file in write-ahead-log mode, also while other processes open it.

``PRAGMA journal_mode = WAL`` needs the file to itself for a moment. When several processes
open a new file at once (two resumers, a fleet of workers starting together), the switch can
fail with ``database is locked`` at once: SQLite does not wait on its busy handler for it. So
it is tried again, briefly, for as long as the connection would wait on any other lock."""

from __future__ import annotations

import sqlite3
import time

__all__ = ("use_wal",)

_PAUSE_S = 0.005


def use_wal(connection: sqlite3.Connection, busy_timeout_ms: int) -> None:
    """Switch ``connection``'s file to WAL, retrying a locked switch for ``busy_timeout_ms``.

    Raises:
        sqlite3.OperationalError: Still locked after that long, or any other failure.
    """
    deadline = time.monotonic() + busy_timeout_ms / 1000
    while True:
        try:
            connection.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() >= deadline:
                raise
        time.sleep(_PAUSE_S)
