"""Retention: categories decide how long records stay live, archived, and stored at all.

``core`` records are kept until deleted. Other categories follow a :class:`RetentionRule`:
after ``archive_after_days`` without an edit or a use, hygiene archives a record (it is hidden
from GET, QUERY and SEARCH unless asked for, and its history records an ``archive``); after
``purge_after_days`` without one, an archived record is deleted — but only once it has stayed
archived for ``purge_grace_days`` (so an archive is never undone by a purge seconds later, and
someone has time to notice and revive it). A record is always archived before it can be purged
— never in the same run — and pinned records are never touched. Custom categories (anything
but ``core``, ``daily`` and ``conversation``) without a rule of their own follow ``daily``'s
(PRX's rule). Expired records are deleted once they have been expired for ``purge_grace_days``
(:mod:`~workers.memory.maintenance.expiry`).

:func:`run_hygiene` plans everything from one snapshot and then applies it, so a dry run
reports exactly what the real run at the same moment changes. A record edited or used between
the plan and its change is left alone (the change is guarded by the record's version).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from ditto.errors import ErrorCode, InvalidInputError
from workers.memory.maintenance.expiry import delete_expired, expired_before
from workers.memory.model.contracts import (
    DEFAULT_CATEGORY,
    ArchivedMode,
    MemoryDraft,
    MemoryFilter,
    MemoryItem,
    MemoryPatch,
)
from workers.memory.model.errors import MemoryStoreError, conflict
from workers.memory.model.records import Clock, now_from, utc_now
from workers.memory.ports import AuditLog, MemoryStore

__all__ = (
    "HygieneReport",
    "PeriodicHygiene",
    "RetentionPolicy",
    "RetentionRule",
    "run_hygiene",
)

logger = logging.getLogger("ditto.workers.memory.retention")

_PAGE = 1000
_BATCH = 500

Progress = Callable[[int, int], None]
"""``progress(done, total)``: records handled so far out of the planned total."""


def _days(name: str, value: float | None) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise InvalidInputError(f"{name} must be a number of days")
    if value <= 0:
        raise InvalidInputError(f"{name} must be more than 0 days")


@dataclass(frozen=True, slots=True)
class RetentionRule:
    """Days without an edit or a use after which a category's records are archived, and after
    which archived ones are purged (``None``: never)."""

    archive_after_days: float | None = None
    purge_after_days: float | None = None

    def __post_init__(self) -> None:
        _days("archive_after_days", self.archive_after_days)
        _days("purge_after_days", self.purge_after_days)
        if self.purge_after_days is not None:
            if self.archive_after_days is None:
                raise InvalidInputError(
                    "purge_after_days needs archive_after_days: records are archived first"
                )
            if self.purge_after_days < self.archive_after_days:
                raise InvalidInputError("purge_after_days must not be less than archive_after_days")


@dataclass(frozen=True, slots=True)
class RetentionPolicy:
    """Rules per category, and how many days of audit log to keep (``None``: all).

    Raises:
        InvalidInputError: A rule for ``core`` (kept until deleted) or a bad number of days.
    """

    categories: Mapping[str, RetentionRule] = field(default_factory=dict)
    audit_days: float | None = None
    purge_grace_days: float = 1.0
    """Days a record stays archived before a purge may delete it (and expired before hygiene
    deletes it)."""

    def __post_init__(self) -> None:
        if DEFAULT_CATEGORY in self.categories:
            raise InvalidInputError("core records are kept until deleted: they take no rule")
        for name, rule in self.categories.items():
            if not isinstance(name, str) or not name:
                raise InvalidInputError("retention categories must be non-empty names")
            if not isinstance(rule, RetentionRule):
                raise InvalidInputError(f"the rule for {name!r} must be a RetentionRule")
        _days("audit_days", self.audit_days)
        if isinstance(self.purge_grace_days, bool) or not isinstance(
            self.purge_grace_days, int | float
        ):
            raise InvalidInputError("purge_grace_days must be a number of days")
        if not 0 <= self.purge_grace_days < math.inf:
            raise InvalidInputError("purge_grace_days must be 0 or more days")


@dataclass(frozen=True, slots=True)
class HygieneReport:
    """What one hygiene run changed (or, with ``dry_run``, would change)."""

    at: datetime
    dry_run: bool
    archived: list[str]
    """Ids archived by this run."""
    purged: list[str]
    """Ids deleted by this run (archived by an earlier one)."""
    audit_purged: int
    skipped: list[str] = field(default_factory=list)
    """Planned ids left alone because they changed (were edited, used or deleted) meanwhile."""
    expired: list[str] = field(default_factory=list)
    """Ids deleted because they expired more than ``purge_grace_days`` ago (any category)."""


async def run_hygiene(
    store: MemoryStore,
    policy: RetentionPolicy,
    *,
    dry_run: bool = False,
    clock: Clock = utc_now,
    progress: Progress | None = None,
) -> HygieneReport:
    """Archive and purge what ``policy`` says is due, and trim the audit log.

    Args:
        store: The memory store (opened on demand).
        policy: Rules per category.
        dry_run: Plan only; change nothing.
        clock: "Now" for the thresholds.
        progress: Called as records are handled, with the planned total.
    """
    now = now_from(clock)
    to_archive: list[MemoryItem] = []
    to_purge: list[MemoryItem] = []
    cutoffs: dict[str, datetime] = {}
    archived_before = now - timedelta(days=policy.purge_grace_days)
    # Plan both lists before changing anything: what this run archives cannot be purged by it.
    for category, rule in _rules(policy):
        if rule.purge_after_days is not None:
            cutoff = now - timedelta(days=rule.purge_after_days)
            due = [
                item
                for item in await _scan(store, _due(category, "only", cutoff), policy)
                if item.archived_at is not None and item.archived_at < archived_before
            ]
            to_purge += due
            cutoffs.update((item.id, cutoff) for item in due)
        if rule.archive_after_days is not None:
            cutoff = now - timedelta(days=rule.archive_after_days)
            due = await _scan(store, _due(category, "exclude", cutoff), policy)
            to_archive += due
            cutoffs.update((item.id, cutoff) for item in due)
    to_expire = await expired_before(store, archived_before)
    audit_purged = 0
    if policy.audit_days is not None:
        audit_cutoff = now - timedelta(days=policy.audit_days)
        if not isinstance(store, AuditLog):
            raise MemoryStoreError(
                f"audit retention needs a store with an audit log; {type(store).__name__} has none",
                code=ErrorCode.UNSUPPORTED,
            )
        audit_purged = await store.purge_audit(audit_cutoff, dry_run=dry_run)
    total = len(to_archive) + len(to_purge)
    if dry_run:
        if progress is not None:
            progress(total, total)
        return HygieneReport(
            now,
            True,
            [item.id for item in to_archive],
            [item.id for item in to_purge],
            audit_purged,
            expired=[item.id for item in to_expire],
        )
    skipped: list[str] = []
    guard = _StillDue(cutoffs, {item.id: item.version for item in to_purge}, archived_before)
    archived = await _archive(store, to_archive, guard, skipped, progress, total)
    purged = await _purge(store, to_purge, guard, skipped, progress, total, len(to_archive))
    expired, renewed = await delete_expired(store, to_expire, archived_before, _BATCH)
    return HygieneReport(now, False, archived, purged, audit_purged, skipped + renewed, expired)


CUSTOM = "*"
"""The plan's name for custom categories: those without a rule that ``daily``'s rule covers."""
_BUILT_IN = frozenset({DEFAULT_CATEGORY, "daily", "conversation"})


def _rules(policy: RetentionPolicy) -> list[tuple[str, RetentionRule]]:
    """``(category, rule)`` pairs to apply, custom categories last under :data:`CUSTOM`."""
    rules = sorted(policy.categories.items())
    daily = policy.categories.get("daily")
    return rules if daily is None else [*rules, (CUSTOM, daily)]


def _due(category: str, archived: ArchivedMode, cutoff: datetime) -> MemoryFilter:
    return MemoryFilter(
        category=None if category == CUSTOM else category,
        archived=archived,
        pinned=False,
        inactive_before=cutoff,
    )


async def _scan(
    store: MemoryStore, filter: MemoryFilter, policy: RetentionPolicy
) -> list[MemoryItem]:
    if filter.category is not None:
        return [item async for page in store.pages(filter, _PAGE) for item in page]
    # Custom categories: every category but the built-in ones and those with a rule.
    ruled = _BUILT_IN | policy.categories.keys()
    return [
        item
        async for page in store.pages(filter, _PAGE)
        for item in page
        if item.category not in ruled
    ]


class _StillDue:
    """The plan, checked again inside each change's transaction (a
    :class:`~workers.memory.model.planning.WriteGuard`): a record edited, used, pinned or revived
    since it was planned is left alone."""

    def __init__(
        self,
        cutoffs: dict[str, datetime],
        purge_versions: dict[str, int],
        archived_before: datetime,
    ) -> None:
        self.cutoffs = cutoffs
        self.purge_versions = purge_versions
        self.archived_before = archived_before

    def _due(self, stored: MemoryItem) -> bool:
        cutoff = self.cutoffs[stored.id]
        return (
            not stored.pinned
            and stored.updated_at < cutoff
            and (stored.last_used_at is None or stored.last_used_at < cutoff)
        )

    def check_write(self, stored: MemoryItem, draft: MemoryDraft) -> None:
        raise AssertionError("retention never writes drafts")  # pragma: no cover

    def check_update(self, stored: MemoryItem, patch: MemoryPatch) -> None:
        if not self._due(stored):
            raise conflict(f"record {stored.id} was edited, used or pinned since the plan")

    def check_delete(self, stored: MemoryItem) -> bool:
        return (
            self._due(stored)
            and stored.archived_at is not None
            and stored.archived_at < self.archived_before
            and stored.version == self.purge_versions.get(stored.id)
        )


async def _archive(
    store: MemoryStore,
    items: Sequence[MemoryItem],
    guard: _StillDue,
    skipped: list[str],
    progress: Progress | None,
    total: int,
) -> list[str]:
    archived: list[str] = []
    for start in range(0, len(items), _BATCH):
        batch = items[start : start + _BATCH]
        patches = [
            MemoryPatch(item.id, archived=True, expected_version=item.version) for item in batch
        ]
        try:
            archived += [item.id for item in await store.update(patches, guard=guard)]
        except MemoryStoreError as exc:
            if exc.code not in (ErrorCode.CONFLICT, ErrorCode.NOT_FOUND):
                raise
            # Something in the batch changed since the plan: go one by one, skip what changed.
            for patch in patches:
                try:
                    archived += [item.id for item in await store.update([patch], guard=guard)]
                except MemoryStoreError as single:
                    if single.code not in (ErrorCode.CONFLICT, ErrorCode.NOT_FOUND):
                        raise
                    skipped.append(patch.id)
        if progress is not None:
            progress(start + len(batch), total)
    return archived


async def _purge(
    store: MemoryStore,
    items: Sequence[MemoryItem],
    guard: _StillDue,
    skipped: list[str],
    progress: Progress | None,
    total: int,
    done: int,
) -> list[str]:
    purged: list[str] = []
    for start in range(0, len(items), _BATCH):
        ids = [item.id for item in items[start : start + _BATCH]]
        # The guard re-checks each record inside the delete's transaction: one revived,
        # edited, used or pinned since the plan stays.
        deleted = await store.delete(ids, guard=guard)
        purged += deleted
        gone = set(deleted)
        skipped += [item_id for item_id in ids if item_id not in gone]
        if progress is not None:
            progress(done + start + len(ids), total)
    return purged


class PeriodicHygiene:
    """Runs retention every ``interval`` seconds in the background, never two runs at once.

    It starts with the worker's first call (a handler is the first place with a running event
    loop) and stops when the runtime disposes the worker."""

    def __init__(
        self, store: MemoryStore, policy: RetentionPolicy, interval: float, clock: Clock
    ) -> None:
        self.store = store
        self.policy = policy
        self.interval = interval
        self.clock = clock
        self.lock = asyncio.Lock()
        self.task: asyncio.Task[None] | None = None
        self.runs = 0

    def ensure_started(self) -> None:
        if self.task is None:
            self.task = asyncio.get_running_loop().create_task(
                self._loop(), name="ditto-memory-hygiene"
            )

    async def run_once(self) -> HygieneReport | None:
        """One run, or ``None`` when a run is already going."""
        if self.lock.locked():
            return None
        async with self.lock:
            report = await run_hygiene(self.store, self.policy, clock=self.clock)
            self.runs += 1
            return report

    async def _loop(self) -> None:
        while True:
            await asyncio.sleep(self.interval)
            try:
                report = await self.run_once()
            except Exception:
                logger.exception("memory hygiene failed; it will run again in %ss", self.interval)
                continue
            if report is not None and (report.archived or report.purged):
                logger.info(
                    "memory hygiene archived %d and purged %d records",
                    len(report.archived),
                    len(report.purged),
                )

    async def stop(self) -> None:
        task, self.task = self.task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
