"""``check_input`` walks a batch of drafts a field at a time; it refuses exactly what it refuses
draft by draft, and names the same field."""

from __future__ import annotations

import math
import random
from typing import Any

import msgspec
import pytest

from workers.memory import MemoryDraft
from workers.memory.model.contracts import GetInput, SearchInput, WriteInput
from workers.memory.model.errors import MemoryStoreError
from workers.memory.model.validation import MAX_DEPTH, check_input


def _nested(depth: int) -> Any:
    value: Any = "deep"
    for _ in range(depth):
        value = {"level": value}
    return value


BAD: dict[str, dict[str, Any]] = {
    "a NUL in a tag": {"tags": ["ok", "no\x00pe"]},
    "a NUL in the summary": {"summary": "line\x00two"},
    "a NUL in a metadata value": {"metadata": {"note": "a\x00b"}},
    "a NUL in a metadata key": {"metadata": {"k\x00": 1}},
    "a lone surrogate in the summary": {"summary": "broken \ud800 text"},
    "a lone surrogate in content": {"content": {"text": "broken \udfff"}},
    "a lone surrogate in a tag": {"tags": ["\udc80"]},
    "NaN in metadata": {"metadata": {"score": math.nan}},
    "infinity in content": {"content": [1.0, math.inf]},
    "a non-string key in content": {"content": {1: "one"}},
    "a set in content": {"content": {"items": {1, 2}}},
    "content nested too deep": {"content": _nested(MAX_DEPTH + 2)},
}
"""Fields a draft built in Python may hold (nothing converted them) that a store refuses."""


def _draft(number: int, **changes: Any) -> MemoryDraft:
    fields: dict[str, Any] = {
        "content": {"text": f"fact number {number}", "n": number, "weights": [0.5, 1.5]},
        "summary": f"fact {number}",
        "tags": ["fact", f"t{number % 7}"],
        "metadata": {"origin": "test", "rank": number},
        "source": f"chat:{number}",
        "key": f"k{number}" if number % 3 == 0 else None,
    }
    fields.update(changes)
    return MemoryDraft(**fields)


def _refusal(request: msgspec.Struct) -> str | None:
    """The refusal's message, or ``None`` when the input passes."""
    try:
        check_input(request)
    except MemoryStoreError as exc:
        if exc.code != "INVALID_INPUT":
            raise
        return str(exc)
    return None


def test_a_clean_batch_passes() -> None:
    drafts = [_draft(number) for number in range(200)]
    drafts.append(_draft(200, content="free text may hold a NUL \x00 character"))
    assert _refusal(WriteInput(memories=drafts)) is None


@pytest.mark.parametrize("bad", BAD, ids=list(BAD))
def test_one_bad_draft_in_a_batch_is_named(bad: str) -> None:
    drafts = [_draft(number) for number in range(50)]
    drafts[37] = _draft(37, **BAD[bad])
    alone = _refusal(WriteInput(memories=[drafts[37]]))
    in_batch = _refusal(WriteInput(memories=drafts))
    assert alone is not None
    assert in_batch is not None
    assert "memories[37]" in in_batch
    assert in_batch.replace("memories[37]", "memories[0]") == alone


def test_batches_refuse_exactly_what_their_drafts_refuse() -> None:
    """Random batches mixing clean drafts with bad ones: a batch is refused if and only if one
    of its drafts is, and the message names the first such draft's field (the walk checks
    texts together, so the first refused in order of the slow walk)."""
    generator = random.Random(5)
    names = list(BAD)
    for _ in range(60):
        size = generator.randint(1, 40)
        drafts = [_draft(number) for number in range(size)]
        for position in generator.sample(range(size), k=generator.randint(0, 2)):
            drafts[position] = _draft(position, **BAD[generator.choice(names)])
        refused_alone = [
            position
            for position, draft in enumerate(drafts)
            if _refusal(WriteInput(memories=[draft])) is not None
        ]
        message = _refusal(WriteInput(memories=drafts))
        assert (message is None) == (not refused_alone)
        if message is not None:
            assert any(f"memories[{position}]" in message for position in refused_alone)


def test_declared_flags_and_literals_are_still_checked_by_value() -> None:
    """A Struct built in Python is not converted: a flag or a literal field may hold anything,
    and the walk looks at the value, not only at the declared type."""
    assert _refusal(GetInput(ids=["a"], include=["superseded"], include_archived=True)) is None
    assert _refusal(GetInput(ids=["a"], include_archived=math.nan)) is not None  # type: ignore[arg-type]
    assert _refusal(GetInput(ids=["a"], include=["bad\x00"])) is not None  # type: ignore[list-item]
    assert _refusal(SearchInput(query="q", limit=math.inf)) is not None  # type: ignore[arg-type]
