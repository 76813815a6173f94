"""The matches of one write's drafts settled in the call's order, as if each draft were
written by a call of its own: what dedupe and contradiction found against the records as they
stood *before* the write, corrected for what the earlier drafts of the same write do to them.

Walking the drafts in order, with the trust of each stored record as earlier repeats raised it
and the stored records earlier drafts supersede (predicted by trust, as the store's planning
decides — the store still decides, on the records as it reads them):

- a repeat of a record an earlier draft superseded restates a fact that no longer holds: it
  contradicts the superseding draft's record (``follows``), never dedupes into a dead one;
- a contradiction is judged against the record's trust as earlier repeats raised it (a fact a
  verified source just restated is not superseded by an agent's draft after it);
- a repeat of an earlier draft the write stores ``contested`` that is *more* trusted than that
  draft is not folded into the claim: it contradicts the same record on its own trust.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence

from workers.memory.model.contracts import MemoryDraft
from workers.memory.worker.dedupe import Matches

__all__ = ("settle_in_order",)


def settle_in_order(
    found: Matches,
    drafts: Sequence[MemoryDraft],
    rank: Callable[[str | None], int],
    deduped: Collection[int],
    superseding: Collection[int],
) -> None:
    """Correct ``found`` in place for the order of the drafts (see the module notes).

    Args:
        found: What dedupe and contradiction found, by draft position.
        drafts: The call's drafts (trust defaulted).
        rank: Trust level -> rank (higher is more trusted).
        deduped: Positions whose dedupe stage enforces (their duplicates are not written).
        superseding: Positions whose contradiction stage enforces.
    """
    raised: dict[str, int] = {}
    """Stored record id -> its trust's rank as the repeats so far raised it."""
    holder: dict[str, int] = {}
    """Stored record id -> the position of the draft predicted to supersede it."""
    contested: set[int] = set()
    positions = sorted(found.duplicates.keys() | found.repeats.keys() | found.contradicts.keys())
    for position in positions:
        mine = rank(drafts[position].trust)
        stored = found.duplicates.get(position)
        if stored is not None and position in deduped:
            successor = holder.get(stored.id)
            if successor is not None:  # the fact it repeats no longer holds by now
                del found.duplicates[position]
                found.follows[position] = successor
            else:
                raised[stored.id] = max(raised.get(stored.id, rank(stored.trust)), mine)
            continue
        earlier = found.repeats.get(position)
        if earlier is not None and position in deduped:
            claim = found.contradicts.get(earlier)
            if earlier not in contested or claim is None or mine <= rank(drafts[earlier].trust):
                continue
            del found.repeats[position]  # a more trusted statement of a contested claim
            found.contradicts[position] = claim
        target = found.contradicts.get(position)
        if target is None or target.id in holder or position not in superseding:
            continue
        if mine >= raised.get(target.id, rank(target.trust)):
            holder[target.id] = position
        else:
            contested.add(position)
