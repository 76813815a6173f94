"""The write policy's content matching as the worker runs it: which incoming drafts state a
fact a namespace already holds, exactly (normalised text hash) or nearly (MinHash candidates
confirmed on the two texts by :func:`~workers.memory.policy.similarity.is_near_duplicate`) —
the dedupe stage — and which contradict a keyless record there (the same candidates, judged
by :func:`~workers.memory.policy.contradiction.classify`) — the contradiction stage.

The worker keeps, per namespace, the hashes and signatures of its active records
(:mod:`.dedupe_index`), kept in step with every writer of the store by :mod:`.dedupe_sync`.
The candidates are judged on the records as that sync read them (the index holds each with
its text); the one that counts is re-read from the store first, so a record deleted meanwhile
is never returned, and if it changed in between, that draft's candidates are judged again as
the store holds them. Two writes of one new fact at the same moment may both be stored:
dedupe is a policy on what memory keeps, not a uniqueness constraint (keys are that).

What a write costs is kept to what can change its outcome. A near duplicate holds the draft's
terms the same number of times (the bag of its terms): a draft that only dedupes, in a
namespace where no record holds its bag, is not looked up at all, and a candidate with another
bag is neither read nor compared. Fingerprints, index updates and lookups are done for a whole
write at once (:func:`~workers.memory.policy.similarity.fingerprints`,
:meth:`~workers.memory.policy.similarity.CandidateIndex.candidates_many`); the outcome is the
one the draft-by-draft rules give.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from workers.memory.model.contracts import MemoryDraft, MemoryItem
from workers.memory.model.filters import is_visible
from workers.memory.model.planning import is_live
from workers.memory.model.records import content_text
from workers.memory.policy.contradiction import Relation, classify
from workers.memory.policy.similarity import Signature, fingerprints, is_near_duplicate
from workers.memory.ports import MemoryStore
from workers.memory.worker.dedupe_batch import match_within
from workers.memory.worker.dedupe_index import Entry, NamespaceIndex, Print, waiting
from workers.memory.worker.dedupe_sync import IndexSync

__all__ = ("Duplicates", "Matches")

_CANDIDATES = 3
"""Near-duplicate candidates confirmed per draft (the most similar by signature)."""
_HEAD_CANDIDATES = 4
"""Short records of the same subject a short draft is judged against, beside LSH's."""
_BAGS_KEPT = 4096
"""Bags of recent drafts kept for :meth:`Duplicates.learn` (past it, they are recomputed)."""


@dataclass(slots=True)
class Matches:
    """What :meth:`Duplicates.find` found for the drafts of one write, by draft position."""

    duplicates: dict[int, MemoryItem] = field(default_factory=dict)
    """The stored record a draft repeats."""
    repeats: dict[int, int] = field(default_factory=dict)
    """The earlier position of the same write whose text a draft repeats (exactly, or nearly:
    :func:`~workers.memory.worker.dedupe_batch.match_within`)."""
    contradicts: dict[int, MemoryItem] = field(default_factory=dict)
    """The keyless stored record a draft contradicts (same subject, another value)."""
    also: dict[int, list[MemoryItem]] = field(default_factory=dict)
    """Other keyless records a draft contradicts besides :attr:`contradicts`' (records of
    one subject stated twice: "… is May 3" and "… is on May 3"), as the sync read them."""
    follows: dict[int, list[int]] = field(default_factory=dict)
    """The earlier positions of the same write whose drafts a keyless draft contradicts,
    latest first."""
    prints: dict[int, tuple[str, Signature]] = field(default_factory=dict)
    """Every draft's fingerprint (to :meth:`Duplicates.learn` once written)."""


class Duplicates:
    """Finds the drafts of a write that duplicate a record its namespace already holds.

    Args:
        store: The worker's store (read only: changes, ``get`` to confirm).
    """

    def __init__(self, store: MemoryStore) -> None:
        self._store = store
        self._sync = IndexSync(store)
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
        spaces = await self._sync.synced(dict.fromkeys(draft.namespace for _, draft in drafts), now)
        namespaces = {position: spaces[draft.namespace] for position, draft in drafts}
        candidates = self._candidates(drafts, namespaces, prints, contradict, found.repeats)
        for position in contradict:  # short statements: also the records of the same subject
            if position in candidates:
                more = namespaces[position].by_head(texts[position])[:_HEAD_CANDIDATES]
                candidates[position] = list(dict.fromkeys([*candidates[position], *more]))
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
                if not choice[0]:
                    others = _also_contradicted(
                        entries, texts[position], choice[1], now, visible_to
                    )
                    if others:
                        found.also[position] = others
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
                found.also.pop(position, None)
            elif duplicate:
                found.duplicates[position] = now_stored
            else:
                found.contradicts[position] = now_stored
        if again:
            names = {position: draft.namespace for position, draft in drafts}
            await self._judge_afresh(again, texts, names, contradict, now, visible_to, found)
        # The drafts of one write against each other, as if written one after another.
        matched = found.duplicates.keys() | found.repeats.keys()
        repeats, found.follows = match_within(drafts, texts, prints, contradict, matched)
        found.repeats.update(repeats)
        return found

    def _candidates(
        self,
        drafts: Sequence[tuple[int, MemoryDraft]],
        namespaces: dict[int, NamespaceIndex],
        prints: dict[int, Print],
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
            entries = [Entry(item, content_text(item.content), "", 0) for item in items]
            choice = _judge(entries, texts[position], None, position in contradict, now, visible_to)
            if choice is not None:
                (found.duplicates if choice[0] else found.contradicts)[position] = choice[1]

    def learn(self, written: Sequence[tuple[MemoryItem, tuple[str, Signature]]]) -> None:
        """Hold the records this worker just wrote, as the store's feed will list them."""
        spaces = self._sync.spaces
        by_space: defaultdict[str, list[tuple[MemoryItem, str, Print]]] = defaultdict(list)
        for item, (text_hash, sig) in written:
            space = spaces.get(item.namespace)
            if space is None:
                continue
            if item.status != "active":  # contested or quarantined: never a candidate
                space.retire(item)
                if item.status == "contested":  # but a claim stated again is a repeat
                    space.hold_claim(item, text_hash)
                continue
            text = content_text(item.content)
            bag = self._bags.get(text_hash)
            if bag is None:  # not a draft find() read: its text gives it
                bag = fingerprints([text])[0][2]
            by_space[item.namespace].append((item, text, (text_hash, sig, bag)))
        for namespace, records in by_space.items():
            spaces[namespace].learn(records)

    async def claims(
        self,
        drafts: Sequence[tuple[int, MemoryDraft]],
        prints: Mapping[int, tuple[str, Signature]],
        now: datetime,
        visible_to: str | None,
    ) -> dict[int, MemoryItem]:
        """Position -> the contested record (a claim waiting for review) a draft states again
        word for word, as the store holds it now (still contested, live, visible)."""
        held: dict[int, MemoryItem] = {}
        for position, draft in drafts:
            space = self._sync.spaces.get(draft.namespace)
            claim = None if space is None else space.claims.get(prints[position][0])
            if claim is not None and (visible_to is None or is_visible(claim, visible_to)):
                held[position] = claim
        if not held:
            return held
        wanted = sorted({claim.id for claim in held.values()})
        stored = {item.id: item for item in await self._store.get(wanted, [], "")}
        return {
            position: now_stored
            for position, claim in held.items()
            if (now_stored := stored.get(claim.id)) is not None
            and now_stored.version == claim.version
            and waiting(now_stored, now)
        }

    def settle(self, changed: Iterable[MemoryItem]) -> None:
        """Hold other records a write stored as they now stand: its drafts that were not
        matched (keyed, quarantined), the records it merged sources into (the same text, a
        new version) and those it superseded."""
        for item in changed:
            space = self._sync.spaces.get(item.namespace)
            if space is not None:
                space.read([item], item.updated_at)  # live or not as of the write


def _also_contradicted(
    entries: Sequence[Entry],
    text: str,
    first: MemoryItem,
    now: datetime,
    visible_to: str | None,
) -> list[MemoryItem]:
    """The other live keyless candidates ``text`` contradicts besides ``first``: a subject
    stated twice in other words is superseded (or contested) once, not left half-standing."""
    return [
        entry.item
        for entry in entries
        if entry.item.id != first.id
        and entry.item.key is None
        and is_live(entry.item, now)
        and (visible_to is None or is_visible(entry.item, visible_to))
        and classify(entry.text, text).relation is Relation.CONTRADICTION
    ]


def _judge(
    entries: Sequence[Entry],
    text: str,
    bag: int | None,
    contradict: bool,
    now: datetime,
    visible_to: str | None,
) -> tuple[bool, MemoryItem] | None:
    """The first candidate (in order) the draft's ``text`` repeats — ``(True, record)`` — or,
    if it repeats none and ``contradict``, the first keyless one it contradicts — ``(False,
    record)`` — or that the contradiction rules read as the same fact (a word respelt: other
    terms, so another bag) — ``(True, record)``. A candidate must be live and visible to
    ``visible_to``; one whose bag is not the draft's (``bag``; ``None``: unknown) cannot be
    repeated word for word."""
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
            if entry.item.key is None:
                relation = classify(entry.text, text).relation
                if relation is Relation.CONTRADICTION:
                    return False, entry.item
                if relation is Relation.DUPLICATE:  # the same fact respelt ("fligths")
                    return True, entry.item
    return None
