"""The matches of one write's drafts settled in the call's order, as if each draft were
written by a call of its own: what dedupe and contradiction found against the records as they
stood *before* the write, corrected for what the earlier drafts of the same write do.

The drafts are walked in order, predicting what each does as the store's planning decides it
(by trust and ``valid_from``; the store still decides, on the records as it reads them): a
fact — a stored record, or the record an earlier draft writes — is *held* by the draft that
superseded it last; a draft's own record is active, ``contested`` (less trusted than the fact
it contradicts) or history (dated before that fact began). Then:

- a repeat of a fact that no longer holds (superseded by an earlier draft) states it again: it
  contradicts the record that holds the subject now, never dedupes into a retired one;
- a repeat raises a stored record's trust before the drafts after it are judged;
- a repeat of an earlier draft whose record is contested (and the repeat is more trusted) or
  history is judged on its own, against what that draft contradicted; so is a repeat the
  dedupe stage only observes (it is written either way) once the record it repeats no longer
  holds;
- a repeat of a text stated again since (and holding) repeats that latest statement.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from workers.memory.model.contracts import MemoryDraft, MemoryItem
from workers.memory.worker.dedupe import Matches

__all__ = ("settle_in_order",)

Fact = str | int
"""A stored record (its id) or the record a draft of the write stores (its position)."""


@dataclass
class _Walk:
    """What the drafts so far did, as predicted."""

    found: Matches
    drafts: Sequence[MemoryDraft]
    rank: Callable[[str | None], int]
    raised: dict[str, int] = field(default_factory=dict)
    """Stored record id -> its trust's rank as the repeats so far raised it."""
    holder: dict[Fact, int] = field(default_factory=dict)
    """Fact -> the position of the draft that superseded it."""
    contested: set[int] = field(default_factory=set)
    """Positions whose record is stored ``contested`` (less trusted than what it contradicts)."""
    history: set[int] = field(default_factory=set)
    """Positions whose record is history: dated before the fact it contradicts began."""
    dropped: set[int] = field(default_factory=set)
    """Positions the dedupe stage does not write (they hold no record of their own)."""

    def current(self, fact: Fact) -> Fact | None:
        """The fact that holds ``fact``'s subject now (itself, or what superseded it last),
        or ``None`` when that is no active record."""
        while fact in self.holder:
            fact = self.holder[fact]
        if isinstance(fact, int) and (
            fact in self.contested or fact in self.history or fact in self.dropped
        ):
            return None
        return fact

    def repeated(self, stored: MemoryItem, trust: str | None) -> None:
        """A draft of ``trust`` restates ``stored``: its trust rises to the draft's."""
        ranked = self.raised.get(stored.id, self.rank(stored.trust))
        self.raised[stored.id] = max(ranked, self.rank(trust))

    def judge(self, position: int, now: datetime) -> None:
        """Predict what a contradicting draft does to the fact it lands on, as the planning
        picks it: its stored record (or what superseded it), else the first earlier draft's
        record that is still active."""
        target: Fact | None = None
        stored = self.found.contradicts.get(position)
        if stored is not None:
            target = self.current(stored.id)
        if target is None:
            held = (self.current(q) for q in self.found.follows.get(position, ()))
            target = next((fact for fact in held if fact is not None), None)
        if target is None:
            return
        draft = self.drafts[position]
        others: list[Fact] = []
        if isinstance(target, str):
            record = stored if stored is not None and stored.id == target else None
            began = _began(record, now)
            trust = self.raised.get(target, self.rank(record.trust if record else None))
            if record is not None:  # other records of the subject fall with it (or win)
                also = [o for o in self.found.also.get(position, ()) if self.current(o.id) == o.id]
                others = [o.id for o in also]
                trust = max([trust, *(self.raised.get(o.id, self.rank(o.trust)) for o in also)])
        else:
            began = self.drafts[target].valid_from or now
            trust = self.rank(self.drafts[target].trust)
        for earlier in self.found.follows.get(position, ()):  # other statements still standing
            fact = self.current(earlier)
            if isinstance(fact, int) and fact != target and fact not in others:
                others.append(fact)
                trust = max(trust, self.rank(self.drafts[fact].trust))
        if self.rank(draft.trust) < trust:
            self.contested.add(position)
        elif draft.valid_from is not None and draft.valid_from < began:
            self.history.add(position)  # an older fact learned late
        else:
            for fact in (target, *others):
                self.holder[fact] = position


def settle_in_order(
    found: Matches,
    drafts: Sequence[MemoryDraft],
    rank: Callable[[str | None], int],
    deduped: Collection[int],
    superseding: Collection[int],
    now: datetime,
) -> None:
    """Correct ``found`` in place for the order of the drafts (see the module notes).

    Args:
        found: What dedupe and contradiction found, by draft position.
        drafts: The call's drafts (trust defaulted).
        rank: Trust level -> rank (higher is more trusted).
        deduped: Positions whose dedupe stage enforces (their duplicates are not written).
        superseding: Positions whose contradiction stage enforces.
        now: The write's time (when a record of this write began, unless dated).
    """
    walk = _Walk(found, drafts, rank)
    claims: dict[str, MemoryItem | None] = {}
    """Claim id -> the record it contests, as the contradiction stage found it."""
    matched = found.duplicates.keys() | found.repeats.keys()
    stated: dict[str, int] = {}
    """Text hash -> the latest draft of this write stating it whose record is active."""
    for position in sorted(matched | found.contradicts.keys() | found.follows.keys()):
        text = found.prints[position][0]
        stored = found.duplicates.get(position)
        earlier = found.repeats.get(position)
        latest = stated.get(text, -1)
        if latest >= 0 and walk.current(latest) == latest and position in matched:
            # The text was stated again earlier in this write, and that statement holds.
            found.duplicates.pop(position, None)
            stored, earlier = None, latest
            found.repeats[position] = latest
        elif earlier is not None and earlier in found.duplicates:
            stored, earlier = found.duplicates[earlier], None  # a repeat of a stored record
        if stored is not None:
            if stored.status != "active":  # a claim waiting for review stated again
                contested = claims.setdefault(stored.id, found.contradicts.get(position))
                mine = rank(drafts[position].trust)
                if position in deduped and mine <= rank(stored.trust):
                    found.contradicts.pop(position, None)
                    found.also.pop(position, None)
                    walk.dropped.add(position)
                    continue  # not written: it contests nothing a second time
                # More trusted than the claim: it states it on its own trust.
                found.repeats.pop(position, None)
                if contested is not None:
                    found.contradicts[position] = contested
            elif walk.current(stored.id) == stored.id:
                if position in deduped:
                    walk.repeated(stored, drafts[position].trust)
                    walk.dropped.add(position)
                continue  # deduplicated, or written as a duplicate dedupe only observes
            else:  # it states a fact an earlier draft superseded: it contradicts what holds now
                found.duplicates.pop(position, None)
                found.repeats.pop(position, None)
                found.contradicts[position] = stored
        elif earlier is not None:
            deduping = position in deduped
            if _still_a_repeat(walk, position, earlier, deduping=deduping):
                if deduping:
                    walk.dropped.add(position)
                continue
            if deduping:
                del found.repeats[position]
            _inherit(walk, position, earlier)
        if position in superseding:
            walk.judge(position, now)
        if position not in walk.contested and position not in walk.history:
            stated[text] = position


def _still_a_repeat(walk: _Walk, position: int, earlier: int, *, deduping: bool) -> bool:
    """Whether a repeat of the earlier draft's text is still one when its turn comes: that
    draft's record holds its fact, or (deduplicating) waits for review as a claim no less
    trusted than the repeat. History is never a record a write repeats (it is not live), and
    a repeat that only observes dedupe is written either way: it is judged only when the
    record it repeats no longer holds."""
    draft, first = walk.drafts[position], walk.drafts[earlier]
    if earlier in walk.contested:
        return deduping and walk.rank(draft.trust) <= walk.rank(first.trust)
    return earlier not in walk.history and walk.current(earlier) == earlier


def _inherit(walk: _Walk, position: int, earlier: int) -> None:
    """A draft judged on its own that states what ``earlier`` states: it contradicts what
    that one contradicts, and the record that superseded that one's, if any."""
    found = walk.found
    if earlier in found.contradicts and position not in found.contradicts:
        found.contradicts[position] = found.contradicts[earlier]
        if earlier in found.also:
            found.also[position] = found.also[earlier]
    held = walk.current(earlier)
    now_held = [held] if isinstance(held, int) and held != earlier else []
    others = {*found.follows.get(position, ()), *found.follows.get(earlier, ()), *now_held}
    if others:
        found.follows[position] = sorted(others, reverse=True)


def _began(record: MemoryItem | None, now: datetime) -> datetime:
    if record is None:
        return now
    return record.created_at if record.valid_from is None else record.valid_from
