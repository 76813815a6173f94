"""The alignment of term sequences (``workers.memory.policy.align``) is difflib's, block for
block: the contradiction rules and the near-duplicate check read its gaps as difflib's
opcodes, so any difference would change a verdict."""

from __future__ import annotations

from difflib import SequenceMatcher
from itertools import product

from hypothesis import given, settings
from hypothesis import strategies as st

from workers.memory.policy.align import gaps, matching_blocks


def _difflib(a: tuple[str, ...], b: tuple[str, ...]) -> tuple[list[object], list[object]]:
    matcher = SequenceMatcher(None, a, b, autojunk=False)
    return [tuple(m) for m in matcher.get_matching_blocks()], [
        (i1, i2, j1, j2) for tag, i1, i2, j1, j2 in matcher.get_opcodes() if tag != "equal"
    ]


def test_every_pair_of_short_sequences_aligns_as_difflib_does() -> None:
    # Three letters up to length 5: every pattern of repeats, ties and crossings short texts
    # can hold (132,496 pairs, a few seconds).
    sequences = [seq for size in range(6) for seq in product("abc", repeat=size)]
    for a in sequences:
        for b in sequences:
            assert (matching_blocks(a, b), gaps(a, b)) == _difflib(a, b), (a, b)


TERMS = st.lists(st.sampled_from(("ines", "lives", "in", "berlin", "not", "3", "paris")))


@settings(max_examples=400, deadline=None)
@given(a=TERMS.map(tuple), b=TERMS.map(tuple))
def test_random_term_sequences_align_as_difflib_does(
    a: tuple[str, ...], b: tuple[str, ...]
) -> None:
    assert (matching_blocks(a, b), gaps(a, b)) == _difflib(a, b)


def test_long_sequences_with_many_repeats_align_as_difflib_does() -> None:
    # Past difflib's autojunk size (200), where autojunk=False must still hold every item.
    a = tuple("abcab" * 60)
    b = tuple("bacba" * 50 + "xyz")
    assert (matching_blocks(a, b), gaps(a, b)) == _difflib(a, b)


def test_the_longest_match_is_the_first_in_either_sequence() -> None:
    # Two equally long matches: difflib takes the one earliest in a, then earliest in b.
    assert matching_blocks(("x", "y", "x", "y"), ("x", "y")) == [(0, 0, 2), (4, 2, 0)]
    assert matching_blocks(("x", "y"), ("q", "x", "y", "x", "y")) == [(0, 1, 2), (2, 5, 0)]
    assert gaps((), ("a",)) == [(0, 0, 0, 1)]
