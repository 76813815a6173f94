"""Moving records and their history out of a store and into another, page by page: what
``ditto memory export``, ``import`` and ``copy`` share.

:func:`read_pages` streams a store (records, archived and hidden ones included, then the whole
history) with flat memory; export encodes its pages, copy writes them into another store.
:func:`write_page` stores one page the way import and copy both need: records that the target
already holds as they are are skipped, history entries it holds are not appended twice, so
running the same transfer again changes nothing and an interrupted one resumes by running it
again. Vectors are never moved (no port reads them out): the target gets them from
``reindex``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field

import msgspec

from ditto.errors import ErrorCode
from workers.memory.model.contracts import HIDDEN_ALL, HistoryEntry, MemoryFilter, MemoryItem
from workers.memory.model.errors import MemoryStoreError
from workers.memory.ports import HistoryLog, MemoryStore, RecordImport, require

__all__ = (
    "PAGE",
    "Page",
    "TransferConflict",
    "TransferCounts",
    "check_readable",
    "copy_store",
    "everything",
    "held_differently",
    "read_pages",
    "write_page",
)

PAGE = 1000
"""Records (or history entries) per page: one store call, one transaction in the target."""

Progress = Callable[[str, int, int | None], None]
"""``progress(part, done, total)``: ``part`` is ``"records"`` or ``"history"``; ``total`` is
``None`` when it is not known in advance (history)."""


def everything(namespace: str | None = None) -> MemoryFilter:
    """Every record (of ``namespace``): archived, superseded, contested, quarantined and
    expired ones too."""
    return MemoryFilter(namespace=namespace, archived="include", include=list(HIDDEN_ALL))


@dataclass(frozen=True, slots=True)
class Page:
    """Records, or history entries in the order the store logged them (one kind a page when
    read from a store; an import chunk may hold both)."""

    records: Sequence[MemoryItem] = ()
    entries: Sequence[HistoryEntry] = ()


@dataclass(slots=True)
class TransferCounts:
    """What a transfer did to the target, added up over its pages."""

    new: int = 0
    """Records the target did not hold."""
    updated: int = 0
    """Records the target held in an earlier state (a lower version its source logged, or the
    same version with other usage counters), brought up to date."""
    unchanged: int = 0
    """Records the target held exactly so (skipped)."""
    overwritten: int = 0
    """Records the target held differently (another record under the id), replaced because
    the transfer was told to overwrite."""
    removed: int = 0
    """Target records that held a key a copied record needed, deleted because the transfer
    was told to overwrite."""
    history_added: int = 0
    history_held: int = 0
    """History entries the target held already (skipped)."""
    done: dict[str, int] = field(default_factory=lambda: {"records": 0, "history": 0})
    """Records and entries read so far (what a progress bar shows)."""


class TransferConflict(MemoryStoreError):
    """``CONFLICT``: the target holds a different record under a copied record's id (or a
    record of its own under its key), and the transfer may not overwrite it. Nothing of the
    page was stored."""

    default_code = ErrorCode.CONFLICT

    def __init__(self, record: MemoryItem, held: MemoryItem, reason: str) -> None:
        super().__init__(
            f"record {record.id} (namespace {record.namespace!r}): {reason}",
            details={"id": record.id, "namespace": record.namespace, "held": held.id},
        )
        self.record, self.held = record, held


async def read_pages(
    store: MemoryStore,
    *,
    namespace: str | None = None,
    history: bool = False,
    size: int = PAGE,
) -> AsyncIterator[Page]:
    """Every record of ``store`` (of ``namespace``), oldest first, then with ``history``
    every history entry in the order the store logged them, deleted records' included.

    Raises:
        MemoryStoreError: ``UNSUPPORTED`` for ``history`` from a store without it.
    """
    log = require(store, HistoryLog) if history else None
    async for records in store.pages(everything(namespace), size):
        yield Page(records=records)
    if log is not None:
        async for entries in log.history_pages(namespace=namespace, size=size):
            yield Page(entries=entries)


async def write_page(
    target: MemoryStore,
    page: Page,
    counts: TransferCounts,
    *,
    overwrite: bool,
    source_history: HistoryLog | None = None,
) -> None:
    """Store ``page`` in ``target``: records first (one transaction), then history entries.

    A record the target holds exactly so is skipped; one it holds in an earlier state is
    brought up to date (earlier: the same version with other usage counters, or a lower
    version whose state ``source_history`` logged). Any other record under the id — or an
    active record of the target's own holding a copied record's key — is a different record:
    ``overwrite`` replaces it (deleting a key holder, which the target's history records),
    else nothing of the page is stored. History entries the target holds (same id, version
    and change) are skipped.

    Raises:
        TransferConflict: ``CONFLICT``, a different record and not ``overwrite``.
        MemoryStoreError: ``UNSUPPORTED`` when ``target`` cannot import records or history.
    """
    if page.records:
        await _write_records(target, page.records, counts, overwrite, source_history)
        counts.done["records"] += len(page.records)
    if page.entries:
        added = await require(target, HistoryLog).restore_history(page.entries)
        counts.history_added += added
        counts.history_held += len(page.entries) - added
        counts.done["history"] += len(page.entries)


async def copy_store(
    source: MemoryStore,
    target: MemoryStore,
    *,
    namespace: str | None = None,
    history: bool = True,
    overwrite: bool = False,
    size: int = PAGE,
    progress: Progress | None = None,
) -> TransferCounts:
    """Copy every record of ``source`` (of ``namespace``) into ``target`` exactly (ids,
    timestamps, versions, usage, governance fields), then with ``history`` every history
    entry, page by page (:func:`write_page` says what is skipped and what conflicts).

    Idempotent and resumable: run again, it adds nothing a finished run added and finishes
    what an interrupted one started. It never deletes what ``source`` no longer holds, and a
    record changed in ``source`` while the copy runs may be copied in its earlier state (run
    it again once writers stopped). Vectors are not copied.

    Raises:
        TransferConflict: See :func:`write_page`; the pages before were stored.
        MemoryStoreError: ``UNSUPPORTED`` when ``target`` cannot import, or ``history`` and
            either store keeps none.
    """
    require(target, RecordImport)
    await check_readable(source, "the source")
    source_log = require(source, HistoryLog) if history else None
    if history:
        require(target, HistoryLog)
    counts = TransferCounts()
    total = await source.count(everything(namespace))
    if progress is not None:
        progress("records", 0, total)
    async for page in read_pages(source, namespace=namespace, history=history, size=size):
        await write_page(target, page, counts, overwrite=overwrite, source_history=source_log)
        if progress is not None:
            part = "records" if page.records else "history"
            progress(part, counts.done[part], total if part == "records" else None)
    return counts


async def check_readable(store: MemoryStore, name: str) -> None:
    """Refuse a store that holds records it cannot read (a Markdown file edited into something
    that is not a record): a copy would be short of them, and a comparison would say equal.

    Raises:
        MemoryStoreError: ``STORE_CORRUPT`` naming the first such file.
    """
    unreadable = (await store.health()).get("unreadable_files")
    if isinstance(unreadable, list) and unreadable:
        raise MemoryStoreError(
            f"{name} holds {len(unreadable)} file(s) it cannot read as records (first: "
            f"{unreadable[0]}): fix or move them, then try again",
            code=ErrorCode.STORE_CORRUPT,
        )


async def _write_records(
    target: MemoryStore,
    records: Sequence[MemoryItem],
    counts: TransferCounts,
    overwrite: bool,
    source_history: HistoryLog | None,
) -> None:
    held = {item.id: item for item in await target.get([r.id for r in records], [], "default")}
    changed: list[MemoryItem] = []
    tally = TransferCounts()
    for record in records:
        before = held.get(record.id)
        if before is None:
            tally.new += 1
        elif before == record:
            tally.unchanged += 1
            continue
        elif await _earlier_state(before, record, source_history):
            tally.updated += 1
        elif overwrite:
            tally.overwritten += 1
        else:
            raise TransferConflict(record, before, _difference(before, record))
        changed.append(record)
    holders = await _key_holders(target, records, overwrite)
    # Every check is done: only now does the target change (nothing of a refused page).
    if holders:
        await target.delete(holders)
        tally.removed += len(holders)
    if changed:
        # Records that hold no key first: one moving off a key frees it for the one taking it.
        changed.sort(key=lambda item: item.status == "active")
        await require(target, RecordImport).restore(changed)
    counts.new += tally.new
    counts.updated += tally.updated
    counts.unchanged += tally.unchanged
    counts.overwritten += tally.overwritten
    counts.removed += tally.removed


def _without_usage(item: MemoryItem) -> MemoryItem:
    return msgspec.structs.replace(item, usage_count=0, last_used_at=None)


async def _earlier_state(
    held: MemoryItem, record: MemoryItem, source_history: HistoryLog | None
) -> bool:
    """Whether ``held`` is ``record`` as it stood before: the same version with other usage
    counters (uses add no version), or a lower version that the source's history logged as
    ``held`` was (then the target missed the changes since, it did not make its own)."""
    if held.version == record.version:
        return _without_usage(held) == _without_usage(record)
    if source_history is None or held.version > record.version:
        return False
    state = _without_usage(held)
    return any(
        entry.version == held.version
        and entry.change != "delete"
        and _without_usage(entry.record) == state
        for entry in await source_history.history(record.id)
    )


def held_differently(held: MemoryItem, record: MemoryItem) -> str | None:
    """Why ``held``, the target's record under ``record``'s id, is not ``record`` in an
    earlier state (a lower version, or the same one with other usage counters): it was changed
    in the target (a newer version) or is another state at the same version; ``None`` when it
    is an earlier state. An import replacing it would take the record back, and the history
    would then hold two entries of one version."""
    if held.version < record.version:
        return None
    if held.version == record.version and _without_usage(held) == _without_usage(record):
        return None
    return _difference(held, record)


def _difference(held: MemoryItem, record: MemoryItem) -> str:
    if held.version > record.version:
        return (
            f"the target holds it at version {held.version}, newer than this one "
            f"({record.version}): it was changed there"
        )
    if held.version == record.version:
        return f"the target holds another state of it at the same version ({record.version})"
    return (
        f"the target holds it at version {held.version}, a state this store's history does not have"
    )


async def _key_holders(
    target: MemoryStore, records: Sequence[MemoryItem], overwrite: bool
) -> list[str]:
    """Ids of the target's active records holding a key that an active copied record needs
    (a record this page moves off the key does not count); with ``overwrite`` they are to be
    deleted, else the first is a conflict."""
    wanted: dict[str, dict[str, MemoryItem]] = {}
    for record in records:
        if record.key is not None and record.status == "active":
            wanted.setdefault(record.namespace, {})[record.key] = record
    incoming = {record.id: record for record in records}
    holders: list[str] = []
    for namespace, keys in wanted.items():
        for held in await target.get([], list(keys), namespace):
            wanting = keys.get(held.key or "")
            if wanting is None or held.status != "active" or held.id == wanting.id:
                continue
            moved = incoming.get(held.id)
            if moved is not None and (moved.status != "active" or moved.key != held.key):
                continue  # restored in this page off the key, before the key is taken
            if not overwrite:
                raise TransferConflict(
                    wanting, held, f"its key {wanting.key!r} belongs to record {held.id} there"
                )
            holders.append(held.id)
    return holders
