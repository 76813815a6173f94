"""Dedupe: normalisation, the exact hash, MinHash signatures, LSH candidates and the
near-duplicate decision (``workers.memory.policy.similarity``)."""

from __future__ import annotations

import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from workers.memory.policy.similarity import (
    BINS,
    CandidateIndex,
    Signature,
    estimate_similarity,
    exact_hash,
    fingerprint,
    is_near_duplicate,
    jaccard,
    signature,
)
from workers.memory.policy.text_norm import normalise, terms

PINNED = (2383002175, 3415406655, 3136888620, 2383002175)
NOTE = "The customer's staging database runs PostgreSQL 15 on db-stage-2, backed up nightly."


def test_normalise_folds_case_unicode_whitespace_and_neutral_punctuation() -> None:
    assert normalise("  Alice\u00a0LIVES in   Berlin!! ") == "alice lives in berlin"
    assert normalise("She doesn’t eat meat.") == normalise("she doesn't eat meat")
    assert normalise("ＡＢＣ") == "abc"  # NFKC folds full-width letters


def test_normalise_keeps_what_changes_a_fact() -> None:
    assert normalise("The rent is 1,200.50 € (5%) from 2024-03-05 at 10:30.") == (
        "the rent is 1200.50 € 5 % from 2024-03-05 at 10:30"
    )
    assert normalise("rent is 3.5k") != normalise("rent is 35k")


def test_exact_hash_is_stable_and_ignores_surface_variants() -> None:
    digest = exact_hash(NOTE)
    assert len(digest) == 32
    assert int(digest, 16) >= 0
    assert exact_hash(NOTE.upper().replace(" ", "  ")) == digest
    assert exact_hash(NOTE.replace("15", "16")) != digest
    # Pinned (BLAKE2b-128 of "alice lives in berlin"): stored digests must never drift.
    assert exact_hash("Alice lives in Berlin") == exact_hash("alice lives in berlin")
    assert exact_hash("Alice lives in Berlin") == "820bd1a08efe066385e806d9491d5812"


def test_signature_is_the_same_in_another_process() -> None:
    # Python's str hash is salted per process: a signature built on it would differ here.
    code = (
        "from workers.memory.policy.similarity import signature;"
        f"print(signature({NOTE!r}).to_str())"
    )
    other = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert other == signature(NOTE).to_str()


def test_signature_values_are_pinned() -> None:
    # Stored signatures are compared with new ones: a change to shingling, hashing or
    # densification must bump the format version, and this test says so.
    assert signature("Alice lives in Berlin").values[:4] == PINNED


def test_fingerprint_is_the_hash_and_the_signature() -> None:
    assert fingerprint(NOTE) == (exact_hash(NOTE), signature(NOTE))
    assert fingerprint("") == (exact_hash(""), signature(""))


def test_signature_round_trips_through_bytes_and_str() -> None:
    sig = signature(NOTE)
    assert len(sig.values) == BINS
    assert Signature.from_bytes(sig.to_bytes()) == sig
    assert Signature.from_str(sig.to_str()) == sig
    assert len(sig.to_bytes()) == 1 + 4 * BINS


@pytest.mark.parametrize("data", [b"", b"\x02" + bytes(4 * BINS), b"\x01" + bytes(3)])
def test_signature_refuses_foreign_bytes(data: bytes) -> None:
    with pytest.raises(ValueError, match="signature"):
        Signature.from_bytes(data)


def test_estimate_tracks_the_exact_jaccard() -> None:
    a = "Alice moved to Berlin in March 2021 and works at a small design studio near Mitte"
    b = "Alice moved to Berlin in March 2021 and works at a large design studio near Mitte"
    c = "The quarterly report is due next Friday and Bob is writing the summary section"
    assert estimate_similarity(signature(a), signature(a)) == 1.0
    assert abs(estimate_similarity(signature(a), signature(b)) - jaccard(a, b)) < 0.25
    assert estimate_similarity(signature(a), signature(c)) < 0.2


@pytest.mark.parametrize(
    ("stored", "incoming"),
    [
        (
            "The user prefers dark mode in every editor.",
            "the user prefers DARK MODE in every editor",
        ),
        ("My favourite colour is blue", "My favorite color is really blue"),
        ("Alice lives in Berlin", "Alice currently resides in Berlin"),
        ("On Mondays Bob swims at the lake", "Bob swims at the lake on Mondays"),
        ("Carol has two kids", "Carol has 2 children"),
    ],
)
def test_same_fact_in_other_words_is_a_near_duplicate(stored: str, incoming: str) -> None:
    assert is_near_duplicate(stored, incoming)


@pytest.mark.parametrize(
    ("stored", "incoming"),
    [
        ("The staging database runs PostgreSQL 15", "The staging database runs PostgreSQL 16"),
        ("The invoice is due on 2024-03-05", "The invoice is due on 2024-03-07"),
        ("Dana eats meat", "Dana doesn't eat meat"),
        ("Dana likes jazz", "Dana dislikes jazz"),
        ("Erik lives in Oslo", "Erik lives in Bergen"),
        ("Bob owes Alice 20 euros", "Alice owes Bob 20 euros"),
        (
            "Alice sent the signed contract to Bob on Tuesday",
            "Bob sent the signed contract to Alice on Tuesday",
        ),
    ],
)
def test_a_changed_fact_is_not_a_duplicate(stored: str, incoming: str) -> None:
    assert not is_near_duplicate(stored, incoming)


def test_cosine_confirms_or_vetoes() -> None:
    stored, incoming = "Alice lives in Berlin", "Alice resides in Berlin"
    assert is_near_duplicate(stored, incoming, cosine=0.95)
    assert not is_near_duplicate(stored, incoming, cosine=0.4)
    assert not is_near_duplicate(stored, stored, cosine=0.1, min_cosine=0.5)


def test_lsh_finds_a_near_duplicate_among_many_unrelated_records() -> None:
    index: CandidateIndex[str] = CandidateIndex()
    subjects = ("invoice", "deployment", "flight", "dentist", "library", "garden", "laptop")
    for n in range(700):
        index.add(
            f"r{n}",
            signature(f"The {subjects[n % 7]} note {n} mentions item {n * 7} for team {n % 13}"),
        )
    index.add("target", signature("The staging database runs PostgreSQL 15 on db-stage-2"))
    found = index.candidates(signature("the staging database runs postgresql 15 on db-stage-2."))
    assert found[0] == "target"
    near = index.candidates(signature("The staging database runs PostgreSQL 16 on db-stage-2"))
    assert "target" in near
    assert len(near) < 50
    changed = signature("The staging database runs PostgreSQL 16 on db-stage-2")
    assert index.candidates(changed, limit=1) == ["target"]
    assert "target" not in index.candidates(changed, min_similarity=0.99)


def test_index_forgets_removed_and_oldest_records() -> None:
    index: CandidateIndex[str] = CandidateIndex(max_records=2)
    sig = signature(NOTE)
    index.add("a", sig)
    index.remove("a")
    assert index.candidates(sig) == []
    index.add("a", sig)
    index.add("b", signature("Bob swims at the lake"))
    index.add("c", signature("Carol has two kids"))
    assert len(index) == 2
    assert index.candidates(sig) == []


VOCABULARY = ("alice", "bob", "lives", "in", "berlin", "paris", "works", "at", "near", "on")

SENTENCE = st.lists(
    st.sampled_from(VOCABULARY),
    min_size=1,
    max_size=12,
).map(" ".join)


@settings(max_examples=60, deadline=None)
@given(text=SENTENCE, upper=st.booleans(), spaces=st.integers(1, 3), dot=st.booleans())
def test_a_text_is_a_duplicate_of_itself_and_of_its_surface_variants(
    text: str, upper: bool, spaces: int, dot: bool
) -> None:
    variant = (text.upper() if upper else text).replace(" ", " " * spaces) + ("." if dot else "")
    assert is_near_duplicate(text, text)
    assert is_near_duplicate(text, variant)
    assert exact_hash(text) == exact_hash(variant)
    assert signature(text) == signature(variant)


@settings(max_examples=60, deadline=None)
@given(
    before=SENTENCE,
    after=SENTENCE,
    number=st.integers(0, 10_000),
    delta=st.integers(1, 500),
)
def test_changing_the_number_in_a_sentence_is_never_a_duplicate(
    before: str, after: str, number: int, delta: int
) -> None:
    stored = f"{before} {number} {after}"
    incoming = f"{before} {number + delta} {after}"
    assert terms(stored) != terms(incoming)
    assert not is_near_duplicate(stored, incoming)
