"""The LSH candidate index (``workers.memory.policy.lsh``): records added together are indexed
as if added one by one, lookups together return what each returns alone, and candidates tied
on score come oldest first."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from workers.memory.policy.lsh import CandidateIndex
from workers.memory.policy.similarity import signature

TEXTS = [
    f"{who} {verb} {what} on {day}"
    for who in ("Alice", "Bob", "Carol")
    for verb in ("likes", "buys", "sells")
    for what in ("tea", "maps", "bikes")
    for day in ("Monday", "Friday")
]
SIGS = [signature(text) for text in TEXTS]
STEPS = st.lists(
    st.tuples(
        st.sampled_from(["add", "many", "remove"]),
        st.lists(st.tuples(st.integers(0, 15), st.integers(0, len(TEXTS) - 1)), max_size=6),
    ),
    max_size=12,
)


@settings(max_examples=60, deadline=None)
@given(steps=STEPS, limit=st.sampled_from([None, 1, 3]), cap=st.sampled_from([None, 5]))
def test_batches_index_and_look_up_as_one_at_a_time(
    steps: list[tuple[str, list[tuple[int, int]]]], limit: int | None, cap: int | None
) -> None:
    batched: CandidateIndex[int] = CandidateIndex(max_records=cap)
    single: CandidateIndex[int] = CandidateIndex(max_records=cap)
    for action, records in steps:
        for record_id, text in records:
            if action == "remove":
                batched.remove(record_id)
                single.remove(record_id)
            else:
                single.add(record_id, SIGS[text])
        if action == "many":
            batched.add_many([(record_id, SIGS[text]) for record_id, text in records])
        elif action == "add":
            for record_id, text in records:
                batched.add(record_id, SIGS[text])
    assert len(batched) == len(single)
    wanted = SIGS[::5]
    together = batched.candidates_many(wanted, limit=limit)
    assert together == [single.candidates(sig, limit=limit) for sig in wanted]
    assert batched.candidates_many(wanted, min_similarity=0.5) == [
        single.candidates(sig, min_similarity=0.5) for sig in wanted
    ]


def test_candidates_tied_on_score_come_oldest_first() -> None:
    index: CandidateIndex[str] = CandidateIndex()
    sig = signature("The staging database runs PostgreSQL 15")
    for record_id in ("a", "b", "c"):
        index.add(record_id, sig)
    assert index.candidates(sig) == ["a", "b", "c"]
    index.add("a", sig)  # written again: now the newest
    assert index.candidates(sig) == ["b", "c", "a"]
    assert index.candidates_many([sig, signature("nothing alike at all here")], limit=2) == [
        ["b", "c"],
        [],
    ]
