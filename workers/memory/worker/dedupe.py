"""The write policy's content matching as the worker runs it: which incoming drafts state a
fact a namespace already holds, exactly (normalised text hash) or nearly (MinHash candidates
confirmed on the two texts by :func:`~workers.memory.policy.similarity.is_near_duplicate`) —
the dedupe stage — and which contradict a keyless record there (the same candidates, judged
by :func:`~workers.memory.policy.contradiction.classify`) — the contradiction stage.

The worker keeps, per namespace, the hashes and signatures of its active records, loaded on
the first write there that matches and brought up to date before each such write by one query
for what changed since (any writer's changes: a record superseded, expired, archived or
rewritten elsewhere leaves the index). That query is store-wide, ordered by ``updated_at`` (an
index every store keeps), and serves every namespace loaded: filtered by namespace, a store
without an index on both reads the whole namespace on every write. The candidates are judged
on the records as that sync read them (the index holds each with its text); the one that
counts is re-read from the store first, so a record deleted meanwhile is never returned, and
if it changed in between, that draft's candidates are judged again as the store holds them. Two
writes of one new fact at the same moment may both be stored: dedupe is a policy on what
memory keeps, not a uniqueness constraint (keys are that), and a change committed after a
later one was read (its ``updated_at`` older than the newest seen) is not seen by this
worker's index.

What a write costs is kept to what can change its outcome. A near duplicate holds the draft's
terms the same number of times (the bag of its terms): a draft that only dedupes, in a
namespace where no record holds its bag, is not looked up at all, and a candidate with another
bag is neither read nor compared. Fingerprints, index updates and lookups are done for a whole
write at once (:func:`~workers.memory.policy.similarity.fingerprints`,
:meth:`~workers.memory.policy.similarity.CandidateIndex.candidates_many`); the outcome is the
one the draft-by-draft rules give.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Collection, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import NamedTuple

import anyio
import msgspec

from workers.memory.model.contracts import (
    HIDDEN_ALL,
    MemoryDraft,
    MemoryFilter,
    MemoryItem,
    OrderBy,
)
from workers.memory.model.filters import is_visible
from workers.memory.model.planning import is_live
from workers.memory.model.records import content_text, order_key
from workers.memory.policy.contradiction import Relation, classify
from workers.memory.policy.similarity import (
    CandidateIndex,
    Signature,
    fingerprints,
    is_near_duplicate,
)
from workers.memory.ports import MemoryStore, QueryPosition

__all__ = ("Duplicates", "Matches")

_PAGE = 1000
_CANDIDATES = 3
"""Near-duplicate candidates confirmed per draft (the most similar by signature)."""
_BAGS_KEPT = 4096
"""Bags of recent drafts kept for :meth:`Duplicates.learn` (past it, they are recomputed)."""
_ORDER = OrderBy("updated_at")
_NEWEST = OrderBy("updated_at", "desc")
_EVERYTHING = MemoryFilter(archived="include", include=list(HIDDEN_ALL))
"""Every record, whatever its status (a change may take one out of the index)."""

_Print = tuple[str, Signature, int]
"""A text's exact hash, signature and bag."""


@dataclass(slots=True)
class Matches:
    """What :meth:`Duplicates.find` found for the drafts of one write, by draft position."""

    duplicates: dict[int, MemoryItem] = field(default_factory=dict)
    """The stored record a draft repeats."""
    repeats: dict[int, int] = field(default_factory=dict)
    """The earlier position of the same write whose text a draft repeats exactly."""
    contradicts: dict[int, MemoryItem] = field(default_factory=dict)
    """The keyless stored record a draft contradicts (same subject, another value)."""
    prints: dict[int, tuple[str, Signature]] = field(default_factory=dict)
    """Every draft's fingerprint (to :meth:`Duplicates.learn` once written)."""


class _Entry(NamedTuple):
    item: MemoryItem
    """The record as last read or written."""
    text: str
    text_hash: str
    bag: int
    """The bag of its terms (see :func:`~workers.memory.policy.similarity.fingerprints`)."""


@dataclass(slots=True)
class _Namespace:
    entries: dict[str, _Entry] = field(default_factory=dict)
    """Id -> an active record of the namespace."""
    hashes: dict[str, str] = field(default_factory=dict)
    """Exact hash -> the id of an active record with that text."""
    bag_count: dict[int, int] = field(default_factory=dict)
    """Bag -> how many records hold it."""
    index: CandidateIndex[str] = field(default_factory=CandidateIndex)

    def learn(self, records: Sequence[tuple[MemoryItem, str, _Print]]) -> None:
        """Index active records, each with its text and that text's fingerprint."""
        for item, text, (text_hash, _, bag) in records:
            self.forget(item.id)
            self.entries[item.id] = _Entry(item, text, text_hash, bag)
            self.hashes.setdefault(text_hash, item.id)
            self.bag_count[bag] = self.bag_count.get(bag, 0) + 1
        self.index.add_many([(item.id, sig) for item, _, (_, sig, _) in records])

    def read(self, items: Sequence[MemoryItem], now: datetime) -> None:
        """Bring the entries of ``items`` up to date with the store's records."""
        changed = []
        for item in items:
            entry = self.entries.get(item.id)
            if not is_live(item, now):
                self.forget(item.id)
            elif entry is None or (entry.item.version, entry.item.content) != (
                item.version,
                item.content,
            ):
                changed.append(item)
            else:  # the same text: keep its fingerprint, hold the record as it now stands
                self.entries[item.id] = entry._replace(item=item)
        if changed:
            texts = [content_text(item.content) for item in changed]
            prints = fingerprints(texts)
            self.learn(list(zip(changed, texts, prints, strict=True)))

    def forget(self, record_id: str) -> None:
        entry = self.entries.pop(record_id, None)
        if entry is None:
            return
        left = self.bag_count.pop(entry.bag) - 1
        if left:
            self.bag_count[entry.bag] = left
        if self.hashes.get(entry.text_hash) == record_id:
            del self.hashes[entry.text_hash]
        self.index.remove(record_id)


class Duplicates:
    """Finds the drafts of a write that duplicate a record its namespace already holds.

    Args:
        store: The worker's store (read only: ``query`` for changes, ``get`` to confirm).
    """

    def __init__(self, store: MemoryStore) -> None:
        self._store = store
        self._spaces: dict[str, _Namespace] = {}
        """The namespaces loaded (read in full once, then kept up to date)."""
        self._cursor: datetime | None = None
        """The latest ``updated_at`` read from the store (``None``: the store held nothing)."""
        self._started = False
        """Whether :attr:`_cursor` was taken (before the first namespace was loaded)."""
        self._lock = anyio.Lock()
        self._bags: dict[str, int] = {}
        """Exact hash -> bag of the drafts :meth:`find` read (:meth:`learn` needs the bags of
        the records written; the same text has the same bag)."""

    async def find(
        self,
        drafts: Sequence[tuple[int, MemoryDraft]],
        now: datetime,
        visible_to: str | None,
        contradict: Collection[int] = (),
    ) -> Matches:
        """The duplicates among ``drafts`` (position, draft; all of one namespace or several)
        that ``visible_to`` may see (``None``: anyone, access control being off), and, for the
        positions in ``contradict`` that repeat nothing, the keyless record each contradicts.
        """
        texts = {position: content_text(draft.content) for position, draft in drafts}
        prints = dict(zip(texts, fingerprints(list(texts.values())), strict=True))
        if len(self._bags) > _BAGS_KEPT:
            self._bags.clear()
        self._bags.update((text_hash, bag) for text_hash, _, bag in prints.values())
        found = Matches(prints={position: (h, sig) for position, (h, sig, _) in prints.items()})
        spaces = await self._synced(dict.fromkeys(draft.namespace for _, draft in drafts), now)
        namespaces = {position: spaces[draft.namespace] for position, draft in drafts}
        candidates = self._candidates(drafts, namespaces, prints, contradict, found.repeats)
        # Judge the candidates as the sync just read them; re-read the one that counts.
        picked: dict[int, tuple[bool, MemoryItem]] = {}
        for position, ids in candidates.items():
            space = namespaces[position]
            entries = [space.entries[i] for i in ids if i in space.entries]
            choice = _judge(
                entries,
                texts[position],
                prints[position][2],
                position in contradict,
                now,
                visible_to,
            )
            if choice is not None:
                picked[position] = choice
        wanted = sorted({item.id for _, item in picked.values()})
        stored = {item.id: item for item in await self._store.get(wanted, [], "")} if wanted else {}
        again: dict[int, list[str]] = {}
        for position, (duplicate, item) in picked.items():
            now_stored = stored.get(item.id)
            if (
                now_stored is None
                or now_stored.version != item.version
                or not is_live(now_stored, now)
            ):
                again[position] = candidates[position]  # changed meanwhile: judge it afresh
            elif duplicate:
                found.duplicates[position] = now_stored
            else:
                found.contradicts[position] = now_stored
        if again:
            names = {position: draft.namespace for position, draft in drafts}
            await self._judge_afresh(again, texts, names, contradict, now, visible_to, found)
        return found

    def _candidates(
        self,
        drafts: Sequence[tuple[int, MemoryDraft]],
        namespaces: dict[int, _Namespace],
        prints: dict[int, _Print],
        contradict: Collection[int],
        repeats: dict[int, int],
    ) -> dict[int, list[str]]:
        """Per draft that repeats no earlier one (those go in ``repeats``), the ids to judge:
        the record with its exact text, then the most similar by signature."""
        candidates: dict[int, list[str]] = {}
        looked_up: dict[int, list[int]] = {}
        first_of: dict[tuple[str, str], int] = {}
        for position, draft in drafts:
            space = namespaces[position]
            text_hash, _, bag = prints[position]
            earlier = first_of.setdefault((draft.namespace, text_hash), position)
            if earlier != position:
                repeats[position] = earlier
                continue
            exact = space.hashes.get(text_hash)
            candidates[position] = [exact] if exact is not None else []
            # Where no record holds the draft's bag, no candidate can be its duplicate.
            if position in contradict or bag in space.bag_count:
                looked_up.setdefault(id(space), []).append(position)
        for positions in looked_up.values():
            sigs = [prints[position][1] for position in positions]
            lists = namespaces[positions[0]].index.candidates_many(sigs, limit=_CANDIDATES)
            for position, ids in zip(positions, lists, strict=True):
                candidates[position] = list(dict.fromkeys([*candidates[position], *ids]))
        return candidates

    async def _judge_afresh(
        self,
        again: dict[int, list[str]],
        texts: dict[int, str],
        names: dict[int, str],
        contradict: Collection[int],
        now: datetime,
        visible_to: str | None,
        found: Matches,
    ) -> None:
        """Judge the candidates of ``again``'s drafts on the records as the store holds them."""
        wanted = sorted({record_id for ids in again.values() for record_id in ids})
        stored = {item.id: item for item in await self._store.get(wanted, [], "")}
        for position, ids in again.items():
            items = [
                stored[i] for i in ids if i in stored and stored[i].namespace == names[position]
            ]
            entries = [_Entry(item, content_text(item.content), "", 0) for item in items]
            choice = _judge(entries, texts[position], None, position in contradict, now, visible_to)
            if choice is not None:
                (found.duplicates if choice[0] else found.contradicts)[position] = choice[1]

    def learn(self, written: Sequence[tuple[MemoryItem, tuple[str, Signature]]]) -> None:
        """Add records this worker just wrote (the next sync would find them too)."""
        by_space: dict[str, list[tuple[MemoryItem, str, _Print]]] = {}
        for item, (text_hash, sig) in written:
            if item.namespace in self._spaces and item.status == "active":
                text = content_text(item.content)
                bag = self._bags.get(text_hash)
                if bag is None:  # not a draft find() read: its text gives it
                    bag = fingerprints([text])[0][2]
                entry = (item, text, (text_hash, sig, bag))
                by_space.setdefault(item.namespace, []).append(entry)
        for namespace, records in by_space.items():
            self._spaces[namespace].learn(records)

    async def _synced(self, namespaces: Iterable[str], now: datetime) -> dict[str, _Namespace]:
        """The namespaces' indexes, brought up to date with every change since the last sync."""
        async with self._lock:
            if not self._started:
                # Where the changes to read start, taken before any namespace is read: a change
                # committed after that read has a later ``updated_at`` (the caveat aside).
                newest = await self._store.query(_EVERYTHING, _NEWEST, 1, None)
                self._cursor = newest[0].updated_at if newest else None
                self._started = True
            elif self._spaces:
                await self._read_changes(now)
            wanted: dict[str, _Namespace] = {}
            for namespace in namespaces:
                space = self._spaces.get(namespace)
                if space is None:
                    space = await self._load(namespace, now)
                    self._spaces[namespace] = space
                wanted[namespace] = space
        return wanted

    async def _read_changes(self, now: datetime) -> None:
        """Apply every change since the last sync to the namespaces loaded (one store-wide
        query: ordered by ``updated_at``, it is an index range on every store)."""
        # A microsecond back: a change committed in the same microsecond as the last one read
        # is read again (learning a record twice changes nothing).
        since = None if self._cursor is None else self._cursor - timedelta(microseconds=1)
        changed = msgspec.structs.replace(_EVERYTHING, updated_after=since)
        async for page in self._pages(changed):
            by_space: dict[str, list[MemoryItem]] = {}
            for item in page:
                if item.namespace in self._spaces:
                    by_space.setdefault(item.namespace, []).append(item)
                if self._cursor is None or item.updated_at > self._cursor:
                    self._cursor = item.updated_at
            for namespace, items in by_space.items():
                self._spaces[namespace].read(items, now)

    async def _load(self, namespace: str, now: datetime) -> _Namespace:
        """A namespace's index, read in full."""
        space = _Namespace()
        async for page in self._pages(msgspec.structs.replace(_EVERYTHING, namespace=namespace)):
            space.read(page, now)
        return space

    async def _pages(self, changed: MemoryFilter) -> AsyncIterator[list[MemoryItem]]:
        after: QueryPosition | None = None
        while True:
            page = await self._store.query(changed, _ORDER, _PAGE, after)
            yield page
            if len(page) < _PAGE:
                return
            after = (order_key(page[-1], "updated_at"), page[-1].id)


def _judge(
    entries: Sequence[_Entry],
    text: str,
    bag: int | None,
    contradict: bool,
    now: datetime,
    visible_to: str | None,
) -> tuple[bool, MemoryItem] | None:
    """The first candidate (in order) the draft's ``text`` repeats — ``(True, record)`` — or,
    if it repeats none and ``contradict``, the first keyless one it contradicts — ``(False,
    record)``. A candidate must be live and visible to ``visible_to``; one whose bag is not
    the draft's (``bag``; ``None``: unknown) cannot be repeated."""
    live = [
        entry
        for entry in entries
        if is_live(entry.item, now) and (visible_to is None or is_visible(entry.item, visible_to))
    ]
    for entry in live:
        if (bag is None or entry.bag == bag) and is_near_duplicate(entry.text, text):
            return True, entry.item
    if contradict:
        for entry in live:
            if (
                entry.item.key is None
                and classify(entry.text, text).relation is Relation.CONTRADICTION
            ):
                return False, entry.item
    return None
