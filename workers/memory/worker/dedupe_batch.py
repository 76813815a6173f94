"""The drafts of one write matched to the write's earlier drafts: a draft that restates an
earlier one nearly word for word is a repeat of it, and a keyless draft that contradicts an
earlier one follows it (the store's planning then supersedes or contests the earlier draft's
record, as if the two had been written one after another: see
:mod:`~workers.memory.model.supersession`).

Candidates are found as for stored records, at a fraction of the cost: the earlier drafts
sharing an LSH band with the draft (:func:`~workers.memory.policy.lsh.band_keys`), and, for a
short statement, those whose subject has the same head word; each pair is judged by the same
rules as a stored candidate. Exact repeats are found before this (by text hash)."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence

from workers.memory.model.contracts import MemoryDraft
from workers.memory.policy.contradiction import Relation, classify
from workers.memory.policy.lsh import band_keys
from workers.memory.policy.similarity import is_near_duplicate
from workers.memory.policy.term_spans import head_term
from workers.memory.worker.dedupe_index import SHORT_TEXT, Print

__all__ = ("match_within",)

_EARLIER_CANDIDATES = 4
"""Earlier drafts a draft is judged against: those sharing the most bands, then the latest of
the same subject (a short statement)."""


def match_within(
    drafts: Sequence[tuple[int, MemoryDraft]],
    texts: Mapping[int, str],
    prints: Mapping[int, Print],
    contradict: Collection[int],
    matched: Collection[int],
) -> tuple[dict[int, int], dict[int, list[int]]]:
    """The near repeats and the contradictions among a write's drafts (position, draft; in
    the write's order), each against earlier drafts of its namespace. Drafts in ``matched``
    (a stored record's duplicate, an exact repeat) are not judged, but are candidates.

    Returns:
        ``(repeats, follows)``: position -> the earlier position it restates, and position ->
        the earlier positions it contradicts, latest first (only for positions in
        ``contradict``; which of them still holds its fact is the planning's to say).
    """
    repeats: dict[int, int] = {}
    follows: dict[int, list[int]] = {}
    if len(drafts) < 2:
        return repeats, follows
    # Namespace -> per band, key -> the latest position holding it (an older one holding the
    # same key most likely shares other bands with the draft too); (namespace, head) ->
    # positions.
    tables: dict[str, list[dict[bytes, int]]] = {}
    heads: dict[tuple[str, str], list[int]] = {}
    keys = band_keys([prints[position][1] for position, _ in drafts])
    for (position, draft), bands in zip(drafts, keys, strict=True):
        text, namespace = texts[position], draft.namespace
        table = tables.get(namespace)
        if table is None:
            table = tables[namespace] = [{} for _ in bands]
        if position in matched:
            # Not judged here, but a candidate for the drafts after it: a duplicate the
            # dedupe stage only observes is written (settle_in_order skips one it drops).
            for bucket, key in zip(table, bands, strict=True):
                bucket[key] = position
            continue
        shared: dict[int, int] = {}  # earlier position -> bands it shares
        for bucket, key in zip(table, bands, strict=True):
            other = bucket.get(key)
            if other is not None:
                shared[other] = shared.get(other, 0) + 1
        # The most similar first (most bands shared), the latest among equals.
        ranked = sorted(shared, key=lambda other: (shared[other], other), reverse=True)
        head = None
        if position in contradict and len(text) <= SHORT_TEXT:
            head = head_term(text)
            if head is not None:
                same_subject = heads.get((namespace, head), ())
                ranked += [other for other in reversed(same_subject) if other not in shared]
        for other in ranked[:_EARLIER_CANDIDATES]:
            if prints[other][2] == prints[position][2] and is_near_duplicate(texts[other], text):
                repeats[position] = other
                break
            if position in contradict:
                relation = classify(texts[other], text).relation
                if relation is Relation.DUPLICATE:  # the same fact respelt
                    repeats[position] = other
                    break
                if relation is Relation.CONTRADICTION:
                    follows.setdefault(position, []).append(other)
        if position in repeats:
            follows.pop(position, None)  # restated: the repeat's own fate settles it
            continue  # not written: not a candidate for the drafts after it
        if position in follows:
            follows[position].sort(reverse=True)
        for bucket, key in zip(table, bands, strict=True):
            bucket[key] = position
        if head is not None:
            heads.setdefault((namespace, head), []).append(position)
    return repeats, follows
