"""The alignment of two short term sequences: what ``difflib.SequenceMatcher(None, a, b,
autojunk=False)`` finds, without its per-call machinery.

:func:`matching_blocks` returns exactly ``SequenceMatcher(None, a, b,
autojunk=False).get_matching_blocks()`` (as plain tuples) and :func:`gaps` exactly the spans of
its ``get_opcodes()`` other than ``equal``; ``tests/workers/memory/policy/test_align.py``
compares them with difflib over every pair of short sequences of a small alphabet and over
random ones.

Why not difflib itself: the write policy aligns two memory texts (a dozen terms each) for
every contradiction candidate and every near-duplicate check. For sequences that short, most
of ``SequenceMatcher``'s cost is around the algorithm, not in it: the object and its junk and
popularity tables (empty here: no junk function, ``autojunk`` off), a ``Match`` named tuple per
block, method and attribute look-ups in the inner loop. The algorithm below is difflib's, step
for step, so the blocks it picks (the longest match, the earliest in ``a``, then in ``b``;
then the same in the parts left and right of it) are difflib's.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence

__all__ = ("Block", "Gap", "gaps", "matching_blocks")

Block = tuple[int, int, int]
"""``(i, j, size)``: ``a[i:i + size] == b[j:j + size]``."""
Gap = tuple[int, int, int, int]
"""``(i1, i2, j1, j2)``: ``a[i1:i2]`` stands where ``b[j1:j2]`` does (either may be empty)."""


def matching_blocks(a: Sequence[Hashable], b: Sequence[Hashable]) -> list[Block]:
    """The matching blocks of ``a`` and ``b``, as difflib finds them (no junk).

    Args:
        a: One sequence of hashable items.
        b: The other.

    Returns:
        ``(i, j, size)`` triples increasing in ``i`` and ``j``, adjacent blocks merged, ending
        with the sentinel ``(len(a), len(b), 0)``.
    """
    la, lb = len(a), len(b)
    where: dict[Hashable, list[int]] = {}
    for j, item in enumerate(b):
        found = where.get(item)
        if found is None:
            where[item] = [j]
        else:
            found.append(j)
    nothing: list[int] = []
    blocks: list[Block] = []
    queue = [(0, la, 0, lb)]
    while queue:
        alo, ahi, blo, bhi = queue.pop()
        # difflib's find_longest_match: the length of the match ending at (i, j) grows from
        # the one ending at (i - 1, j - 1); the first strictly longest wins, so ties go to
        # the smallest i, then the smallest j. Without junk the longest match cannot be
        # extended on either side, so difflib's extension loops would change nothing.
        besti, bestj, bestsize = alo, blo, 0
        lengths: dict[int, int] = {}
        for i in range(alo, ahi):
            grown: dict[int, int] = {}
            for j in where.get(a[i], nothing):
                if j < blo:
                    continue
                if j >= bhi:
                    break
                size = grown[j] = lengths.get(j - 1, 0) + 1
                if size > bestsize:
                    besti, bestj, bestsize = i - size + 1, j - size + 1, size
            lengths = grown
        if bestsize:
            blocks.append((besti, bestj, bestsize))
            if alo < besti and blo < bestj:
                queue.append((alo, besti, blo, bestj))
            if besti + bestsize < ahi and bestj + bestsize < bhi:
                queue.append((besti + bestsize, ahi, bestj + bestsize, bhi))
    blocks.sort()
    merged: list[Block] = []
    i1 = j1 = k1 = 0
    for i2, j2, k2 in blocks:
        if i1 + k1 == i2 and j1 + k1 == j2:
            k1 += k2
        else:
            if k1:
                merged.append((i1, j1, k1))
            i1, j1, k1 = i2, j2, k2
    if k1:
        merged.append((i1, j1, k1))
    merged.append((la, lb, 0))
    return merged


def gaps(a: Sequence[Hashable], b: Sequence[Hashable]) -> list[Gap]:
    """What differs between ``a`` and ``b``, in order: the spans between matching blocks, as
    ``SequenceMatcher.get_opcodes()`` gives its ``replace``, ``delete`` and ``insert``."""
    i = j = 0
    found: list[Gap] = []
    for ai, bj, size in matching_blocks(a, b):
        if i < ai or j < bj:
            found.append((i, ai, j, bj))
        i, j = ai + size, bj + size
    return found
