"""Pruning old checkpoints, so a store does not grow for ever (a top complaint of LangGraph
users: checkpoint stores of tens of gigabytes).

Works on any :class:`~ditto.runtime.checkpoints.port.CheckpointStore` through its ``list`` and
``delete``; ``ditto checkpoints prune`` is this function on the command line. It never deletes
the checkpoint of a run that is still going: ``delete`` without a fence refuses a checkpoint
whose lease is live (``CHECKPOINT_BUSY``), and the prune skips it and says so
(:attr:`PruneResult.busy`) instead of failing half-way.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterable
from typing import TYPE_CHECKING

from ditto.errors import ErrorCode, InvalidInputError
from ditto.runtime.checkpoints.port import CheckpointError, CheckpointInfo

if TYPE_CHECKING:
    from ditto.runtime.checkpoints.port import CheckpointStore

__all__ = ("LIST_ALL", "PruneResult", "prune_checkpoints")

LIST_ALL = 1_000_000_000
"""The ``limit`` that lists every checkpoint of a store."""


class PruneResult(list[CheckpointInfo]):
    """The checkpoints a prune deleted (or, in a dry run, would delete), newest first — a
    plain list of them, as before leases existed — and :attr:`busy`, those it kept because a
    run held their lease."""

    def __init__(
        self, deleted: Iterable[CheckpointInfo] = (), busy: Iterable[CheckpointInfo] = ()
    ) -> None:
        super().__init__(deleted)
        self.busy: tuple[CheckpointInfo, ...] = tuple(busy)
        """Old enough to go, but leased by a running run when the prune reached them: kept
        (a later prune deletes them once the run ends), newest first."""


async def prune_checkpoints(
    store: CheckpointStore,
    *,
    older_than: float | None = None,
    keep_last: int | None = None,
    scope: str | None = None,
    dry_run: bool = False,
    now: float | None = None,
) -> PruneResult:
    """Delete checkpoints last updated more than ``older_than`` seconds ago, always keeping the
    ``keep_last`` most recently updated ones.

    With only ``keep_last``, every checkpoint but the newest ``keep_last`` goes; with only
    ``older_than``, every one older than that. A run that is still writing its checkpoint
    moves its ``updated_at`` with each finished task, so it is not old while it runs.

    Args:
        store: The checkpoint store.
        older_than: Age in seconds (positive).
        keep_last: How many of the newest to keep whatever their age (0 or more).
        scope: Only checkpoints of this scope (``graph:<id>`` or ``loop:<id>``).
        dry_run: Delete nothing; return what would be deleted.
        now: Unix seconds to measure ages from (default: now).

    Returns:
        The checkpoints deleted (or, with ``dry_run``, that would be), newest first; in its
        ``busy``, those skipped because their lease was live. A dry run deletes nothing, so it
        cannot ask the store about leases: it lists every candidate, leased or not.

    Raises:
        InvalidInputError: Neither bound given, or a bound that is not a number of the right
            kind.
        CheckpointError: As the store's ``list`` and ``delete`` (never ``CHECKPOINT_BUSY``).
    """
    if older_than is None and keep_last is None:
        raise InvalidInputError("prune needs older_than, keep_last or both")
    if older_than is not None and (
        isinstance(older_than, bool)
        or not isinstance(older_than, int | float)
        or not math.isfinite(older_than)
        or older_than <= 0
    ):
        raise InvalidInputError("older_than must be a positive number of seconds")
    if keep_last is not None and (
        isinstance(keep_last, bool) or not isinstance(keep_last, int) or keep_last < 0
    ):
        raise InvalidInputError("keep_last must be a non-negative integer")
    infos = await store.list(scope=scope, limit=LIST_ALL)  # newest first
    candidates = infos[keep_last or 0 :]
    if older_than is not None:
        cutoff = (time.time() if now is None else now) - older_than
        candidates = [info for info in candidates if info.updated_at < cutoff]
    if dry_run:
        return PruneResult(candidates)
    deleted: list[CheckpointInfo] = []
    busy: list[CheckpointInfo] = []
    for info in candidates:
        try:
            await store.delete(info.id)
        except CheckpointError as exc:
            if exc.code != ErrorCode.CHECKPOINT_BUSY:
                raise
            busy.append(info)
        else:
            deleted.append(info)
    return PruneResult(deleted, busy)
