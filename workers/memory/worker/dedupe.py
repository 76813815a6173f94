"""The write policy's content matching as the worker runs it: which incoming drafts state a
fact a namespace already holds, exactly (normalised text hash) or nearly (MinHash candidates
confirmed on the two texts by :func:`~workers.memory.policy.similarity.is_near_duplicate`) —
the dedupe stage — and which contradict a keyless record there (the same candidates, judged
by :func:`~workers.memory.policy.contradiction.classify`) — the contradiction stage.

The worker keeps, per namespace, the hashes and signatures of its active records, loaded on
the first write there that dedupes and brought up to date before each such write by one query
for what changed since (any writer's changes: a record superseded, expired, archived or
rewritten elsewhere leaves the index). A candidate is always re-read from the store before it
counts, so a record deleted meanwhile is never returned. Two writes of one new fact at the same
moment may both be stored: dedupe is a policy on what memory keeps, not a uniqueness
constraint (keys are that), and a change committed after a later one was read (its
``updated_at`` older than the newest seen) is not seen by this worker's index."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

import anyio

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
    fingerprint,
    is_near_duplicate,
)
from workers.memory.ports import MemoryStore, QueryPosition

__all__ = ("Duplicates", "Matches")

_PAGE = 1000
_CANDIDATES = 3
"""Near-duplicate candidates confirmed per draft (the most similar by signature)."""
_ORDER = OrderBy("updated_at")


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


@dataclass(slots=True)
class _Namespace:
    hashes: dict[str, str] = field(default_factory=dict)
    """Exact hash -> the id of an active record with that text."""
    hash_of: dict[str, str] = field(default_factory=dict)
    versions: dict[str, int] = field(default_factory=dict)
    """Id -> the version indexed (a sync skips what it already holds)."""
    index: CandidateIndex[str] = field(default_factory=CandidateIndex)
    synced: datetime | None = None
    """The latest ``updated_at`` read from the store (``None``: none yet, read everything)."""
    loaded: bool = False
    lock: anyio.Lock = field(default_factory=anyio.Lock)

    def learn(self, record_id: str, version: int, text_hash: str, sig: Signature) -> None:
        self.forget(record_id)
        self.hashes.setdefault(text_hash, record_id)
        self.hash_of[record_id] = text_hash
        self.versions[record_id] = version
        self.index.add(record_id, sig)

    def forget(self, record_id: str) -> None:
        self.versions.pop(record_id, None)
        old = self.hash_of.pop(record_id, None)
        if old is not None and self.hashes.get(old) == record_id:
            del self.hashes[old]
        self.index.remove(record_id)


class Duplicates:
    """Finds the drafts of a write that duplicate a record its namespace already holds.

    Args:
        store: The worker's store (read only: ``query`` for changes, ``get`` to confirm).
    """

    def __init__(self, store: MemoryStore) -> None:
        self._store = store
        self._spaces: dict[str, _Namespace] = {}

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
        found = Matches(
            prints={
                position: fingerprint(content_text(draft.content)) for position, draft in drafts
            }
        )
        candidates: dict[int, list[str]] = {}
        first_of: dict[tuple[str, str], int] = {}
        spaces = {
            namespace: await self._synced(namespace, now)
            for namespace in dict.fromkeys(draft.namespace for _, draft in drafts)
        }
        for position, draft in drafts:
            space = spaces[draft.namespace]
            text_hash, sig = found.prints[position]
            earlier = first_of.setdefault((draft.namespace, text_hash), position)
            if earlier != position:
                found.repeats[position] = earlier
                continue
            exact = space.hashes.get(text_hash)
            ids = [exact] if exact is not None else []
            ids += space.index.candidates(sig, limit=_CANDIDATES)
            if ids:
                candidates[position] = list(dict.fromkeys(ids))
        wanted = sorted({record_id for ids in candidates.values() for record_id in ids})
        stored = {item.id: item for item in await self._store.get(wanted, [], "")} if wanted else {}
        texts = dict(drafts)
        for position, ids in candidates.items():
            draft = texts[position]
            text = content_text(draft.content)
            live = [
                item
                for item in map(stored.get, ids)
                if item is not None
                and is_live(item, now)
                and item.namespace == draft.namespace
                and (visible_to is None or is_visible(item, visible_to))
            ]
            duplicate = next(
                (item for item in live if is_near_duplicate(content_text(item.content), text)),
                None,
            )
            if duplicate is not None:
                found.duplicates[position] = duplicate
            elif position in contradict:
                contradicted = next(
                    (
                        item
                        for item in live
                        if item.key is None
                        and classify(content_text(item.content), text).relation
                        is Relation.CONTRADICTION
                    ),
                    None,
                )
                if contradicted is not None:
                    found.contradicts[position] = contradicted
        return found

    def learn(self, written: Sequence[tuple[MemoryItem, tuple[str, Signature]]]) -> None:
        """Add records this worker just wrote (the next sync would find them too)."""
        for item, (text_hash, sig) in written:
            space = self._spaces.get(item.namespace)
            if space is not None and space.loaded and item.status == "active":
                space.learn(item.id, item.version, text_hash, sig)

    async def _synced(self, namespace: str, now: datetime) -> _Namespace:
        """The namespace's index, brought up to date with every change since the last sync."""
        space = self._spaces.setdefault(namespace, _Namespace())
        async with space.lock:
            # A microsecond back: a change committed in the same microsecond as the last one
            # read is read again (learning a record twice changes nothing).
            since = None if space.synced is None else space.synced - timedelta(microseconds=1)
            changed = MemoryFilter(
                namespace=namespace,
                updated_after=since,
                archived="include",
                include=list(HIDDEN_ALL),
            )
            after: QueryPosition | None = None
            while True:
                page = await self._store.query(changed, _ORDER, _PAGE, after)
                for item in page:
                    live = (
                        item.status == "active"
                        and item.archived_at is None
                        and (item.expires_at is None or item.expires_at > now)
                    )
                    if live:
                        if space.versions.get(item.id) != item.version:
                            text_hash, sig = fingerprint(content_text(item.content))
                            space.learn(item.id, item.version, text_hash, sig)
                    else:
                        space.forget(item.id)
                    if space.synced is None or item.updated_at > space.synced:
                        space.synced = item.updated_at
                if len(page) < _PAGE:
                    break
                after = (order_key(page[-1], "updated_at"), page[-1].id)
            space.loaded = True
        return space
