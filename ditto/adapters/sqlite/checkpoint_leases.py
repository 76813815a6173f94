"""The leases of :class:`~ditto.adapters.sqlite.checkpoints.SqliteCheckpointStore`: their tables,
and each lease operation as statements run inside the writer's transaction.

* ``checkpoint_leases`` holds one row per leased checkpoint id: holder, fencing token and
  ``expires_at`` (``time.time()`` of the process that wrote it: processes sharing a file share
  the machine's clock). A lease that expired keeps its row until the next acquire, release or
  delete of that id; an expired row is never live.
* ``checkpoint_lease_tokens`` is the store's one counter of tokens (a single row, created by
  the first acquire): tokens strictly increase over every acquire of the file, whichever
  process makes it, and are never reused, even after a lease's row is gone.

Every function here runs on the writer thread inside its ``BEGIN IMMEDIATE`` transaction, so it
holds the file's write lock: the check of a lease and what follows from it (a new token, a
fenced write) are atomic against every other connection and process.
"""

from __future__ import annotations

import sqlite3
import time

from ditto.runtime.checkpoints.leases import busy, lease_lost
from ditto.runtime.checkpoints.port import CheckpointError, Lease

__all__ = ("LEASE_SCHEMA", "acquire", "check_deletable", "check_fence", "release", "renew")

LEASE_SCHEMA = """
CREATE TABLE IF NOT EXISTS checkpoint_leases (
    checkpoint_id TEXT PRIMARY KEY,
    holder TEXT NOT NULL,
    token INTEGER NOT NULL,
    expires_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS checkpoint_lease_tokens (
    id INTEGER PRIMARY KEY CHECK (id = 0),
    last INTEGER NOT NULL
);
"""
"""Idempotent, run by every connection when it opens (with the checkpoint tables): a file
written before leases existed gets the tables the first time any store opens it. No seed row:
that would make every opening a write (the reader's too); the first acquire inserts it."""

_HELD = "SELECT holder, token, expires_at FROM checkpoint_leases WHERE checkpoint_id = ?"
_NEXT_TOKEN = (
    "INSERT INTO checkpoint_lease_tokens (id, last) VALUES (0, 1) "
    "ON CONFLICT (id) DO UPDATE SET last = last + 1 RETURNING last"
)
_TAKE = (
    "INSERT INTO checkpoint_leases (checkpoint_id, holder, token, expires_at) "
    "VALUES (?, ?, ?, ?) ON CONFLICT (checkpoint_id) DO UPDATE SET "
    "holder = excluded.holder, token = excluded.token, expires_at = excluded.expires_at"
)
_RENEW = (
    "UPDATE checkpoint_leases SET expires_at = ? "
    "WHERE checkpoint_id = ? AND token = ? AND expires_at > ? RETURNING holder"
)
_RELEASE = "DELETE FROM checkpoint_leases WHERE checkpoint_id = ? AND token = ?"
_FENCED = "SELECT 1 FROM checkpoint_leases WHERE checkpoint_id = ? AND token = ? AND expires_at > ?"
_CLEAR = "DELETE FROM checkpoint_leases WHERE checkpoint_id = ?"


def acquire(
    connection: sqlite3.Connection, checkpoint_id: str, holder: str, ttl: float
) -> Lease | CheckpointError:
    """A new lease, or ``CHECKPOINT_BUSY`` while an unexpired one is held."""
    now = time.time()
    held = connection.execute(_HELD, (checkpoint_id,)).fetchone()
    if held is not None and held[2] > now:
        return busy(held[0], held[2] - now)
    (token,) = connection.execute(_NEXT_TOKEN).fetchone()
    lease = Lease(checkpoint_id, holder, token, now + ttl)
    connection.execute(_TAKE, (checkpoint_id, holder, token, lease.expires_at))
    return lease


def renew(connection: sqlite3.Connection, lease: Lease, ttl: float) -> Lease | CheckpointError:
    """``lease`` with a new ``expires_at``, or ``CHECKPOINT_LEASE_LOST``."""
    now = time.time()
    expires_at = now + ttl
    row = connection.execute(_RENEW, (expires_at, lease.checkpoint_id, lease.token, now)).fetchone()
    if row is None:
        return lease_lost()
    return Lease(lease.checkpoint_id, row[0], lease.token, expires_at)


def release(connection: sqlite3.Connection, checkpoint_id: str, token: int) -> None:
    """Drop the lease if it is still the one of ``token`` (else nothing)."""
    connection.execute(_RELEASE, (checkpoint_id, token))


def check_fence(
    connection: sqlite3.Connection, checkpoint_id: str, token: int
) -> CheckpointError | None:
    """``CHECKPOINT_LEASE_LOST`` unless the lease of ``checkpoint_id`` is held with ``token``
    and unexpired; ``None`` when a write under it may go on."""
    found = connection.execute(_FENCED, (checkpoint_id, token, time.time())).fetchone()
    return lease_lost() if found is None else None


def check_deletable(
    connection: sqlite3.Connection, checkpoint_id: str, token: int | None
) -> CheckpointError | None:
    """Whether ``checkpoint_id`` may be deleted (``None``) and its lease row dropped (done
    here): with ``token``, the lease must be held with it; without, no lease may be live
    (``CHECKPOINT_BUSY``)."""
    if token is not None:
        refused = check_fence(connection, checkpoint_id, token)
    else:
        now = time.time()
        held = connection.execute(_HELD, (checkpoint_id,)).fetchone()
        refused = None if held is None or held[2] <= now else busy(held[0], held[2] - now)
    if refused is None:
        connection.execute(_CLEAR, (checkpoint_id,))
    return refused
