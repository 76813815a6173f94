"""What the write policy's text analysis gives on the committed data set, pinned by digest.

Stored records carry an exact hash and a MinHash signature, and the benchmark's precision and
recall rest on the verdicts: a change meant only to make this code faster must leave every
token, term, fingerprint and verdict as it was. A change that means to alter them (a new
synonym, a new rule) updates these digests in the same commit and says why.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from workers.memory.policy.contradiction import Verdict, classify, classify_values
from workers.memory.policy.similarity import fingerprints, is_near_duplicate
from workers.memory.policy.text_norm import kind, terms_and_words, tokens

DATA = Path(__file__).parents[4] / "bench" / "data" / "write_policy"


def _pairs() -> list[tuple[str, str]]:
    with (DATA / "pairs.jsonl").open(encoding="utf-8") as lines:
        return [(row["old"], row["new"]) for row in map(json.loads, lines)]


def _texts() -> list[str]:
    with (DATA / "safety.jsonl").open(encoding="utf-8") as lines:
        safety = [json.loads(line)["text"] for line in lines]
    return sorted({text for pair in _pairs() for text in pair} | set(safety))


def _digest(rows: Iterator[object]) -> str:
    hashed = hashlib.sha256()
    for row in rows:
        hashed.update(json.dumps(row, ensure_ascii=False).encode())
        hashed.update(b"\n")
    return hashed.hexdigest()


def _verdict(verdict: Verdict) -> list[object]:
    return [verdict.relation.value, verdict.reason.value, verdict.old_span, verdict.new_span]


def _analysis() -> Iterator[object]:
    for text in _texts():
        found, words = terms_and_words(text)
        yield [tokens(text), found, words, [kind(t).value for t in found]]


def _fingerprints() -> Iterator[object]:
    texts = _texts()
    for start in range(0, len(texts), 100):  # batches, as a batch write signs them
        for text_hash, signature, bag in fingerprints(texts[start : start + 100]):
            yield [text_hash, signature.to_str(), bag]


def _verdicts() -> Iterator[object]:
    for old, new in _pairs():
        yield [
            _verdict(classify(old, new)),
            _verdict(classify(new, old)),
            _verdict(classify(old, new, same_subject=True)),
            _verdict(classify_values(old, new)),
            is_near_duplicate(old, new),
        ]


# Last changed on purpose: Chinese and Japanese text is tokenised a Han character at a time
# (kana runs as one token), with Chinese and Korean negations (the chat lines of safety.jsonl
# in those languages; no verdict of the pairs moved); before that, a qualifier before an
# unchanged value counts only after of/for/with,
# a respelt word is a swap or a letter in or out (not one for another), decimals are no
# identifiers; before that, negations of seven more languages ("nicht", "не", "pas", ...);
# before that, "note"/"notes" no longer stem to the negation "not", -ising/-ised
# fold with -izing/-ized, and four rules moved verdicts (a respelt word is the same word; a
# changed subject head, a renamed identifier and a qualifier before an unchanged value make
# another subject). Fingerprints are computed from the text when a namespace is read, never
# stored, so no stored record needs them again.
@pytest.mark.parametrize(
    ("outputs", "pinned"),
    [
        (_analysis, "654106d79993dd443c1e5d1a443d71226995c45e3ad87a3eb0ac0e74713af904"),
        (_fingerprints, "cee75afe0f89eb147d83678454ccdaff8ccfe7c97e441c30d16788fd7b6814ba"),
        (_verdicts, "60d995fdf6ebdf3441b968c81c822736b1e2e9da3b5190f9d0debf5589c3be47"),
    ],
    ids=["tokens_terms_kinds", "fingerprints", "verdicts"],
)
def test_the_data_set_analyses_as_pinned(
    outputs: Callable[[], Iterator[object]], pinned: str
) -> None:
    assert _digest(outputs()) == pinned
