"""MinHash signatures of many texts at once are, text by text, the signatures of one
(``workers.memory.policy.minhash``): a batch write must index exactly what a single write
would."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from workers.memory.policy.minhash import BINS, signature_of, signatures
from workers.memory.policy.similarity import fingerprint, fingerprints, signature
from workers.memory.policy.text_norm import terms

WORDS = st.sampled_from([f"w{n}" for n in range(40)])
TEXTS = st.lists(st.lists(WORDS, max_size=40).map(tuple), max_size=40)
"""Term sequences, many of one or two terms (where the densification's probes may all miss)."""


@settings(max_examples=80, deadline=None)
@given(texts=TEXTS)
def test_a_batch_signs_each_text_as_alone(texts: list[tuple[str, ...]]) -> None:
    assert signatures(texts) == [signature_of(found) for found in texts]


def test_a_text_without_terms_signs_as_zeros_in_a_batch_too() -> None:
    batch = [(), ("alice",), ()] * 10
    assert signatures(batch)[0].values == (0,) * BINS
    assert signatures(batch) == [signature_of(found) for found in batch]


def test_fingerprints_are_the_fingerprint_and_a_bag_of_the_terms() -> None:
    texts = [
        "Bob swims at the lake on Mondays",
        "On Mondays Bob swims at the lake",
        "Bob owes Alice",
    ]
    printed = fingerprints(texts * 5)
    assert [(h, sig) for h, sig, _ in printed] == [fingerprint(text) for text in texts * 5]
    assert [sig for _, sig, _ in printed[:3]] == [signature(text) for text in texts]
    bags = [bag for _, _, bag in printed[:3]]
    assert bags[0] == bags[1] != bags[2]  # the same terms, moved: one bag
    assert sorted(terms(texts[0])) == sorted(terms(texts[1]))
