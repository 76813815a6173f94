"""Score the write policy's dedupe and contradiction rules on the labelled pairs of
``bench/data/write_policy/pairs.jsonl`` (made by ``bench/data/write_policy/make_pairs.py``).

For the dev and holdout splits separately it prints:

- dedupe precision and recall: positive = label ``duplicate`` or ``near_duplicate``; predicted
  positive = equal :func:`exact_hash` or :func:`is_near_duplicate` (what the worker runs);
- contradiction precision and recall: positive = label ``contradiction``; predicted positive =
  :func:`classify` says ``contradiction``;
- LSH recall: the share of same-subject pairs (every label but ``unrelated``) whose signatures
  share a band, i.e. that :class:`CandidateIndex` would hand to the rules at all, and the share
  of ``unrelated`` pairs it hands over needlessly;
- µs per pair of each step: the fingerprint of the new text (hash + signature), the dedupe
  decision, classify, and one LSH lookup in an index of the split's older texts.

How the thresholds were chosen (on dev only; the holdout was scored after the rules were
fixed and is reported as it comes out):

- ``MIN_OVERLAP`` 0.5: the best dev contradiction precision at full recall (0.4: 0.981 / 1.0,
  0.5: 0.988 / 1.0, 0.6: 0.987 / 0.939, 0.7: 0.992 / 0.881).
- ``MIN_SHARED`` 2: 1 and 2 score the same on dev, 3 drops recall to 0.967; one shared word
  does not make a subject.
- ``NEAR_DUPLICATE_JACCARD`` 0.6 is a backstop, not a tuned value: dev has no reordered
  duplicates, and its role swaps (Jaccard 0.5-0.62) are refused by the word-order check
  (``moved_as_a_block``), not by the bar. Hand-written moved adverbials score 0.7 and above.
- LSH 16 bands x 2 rows: dev contradiction pairs found 0.976 (10 x 3: 0.805, 8 x 4: 0.609);
  32 x 1 finds them all but hands over a third of unrelated pairs (16 x 2: 0.05).
- The lexicons in ``text_norm`` (fillers, negations, preference verbs, synonyms, spelling) are
  general English written before the data; one dev error added "children" to "kid child".
  Caveat: the same author wrote the lexicon and the generator, and the generator's list of
  synonym substitutions for near duplicates is shared by both splits (each split only meets
  the ones its own templates contain), so the holdout is independent in templates and
  vocabulary, not in authorship.

Reading holdout errors found one bug, fixed and reported rather than hidden: preference
verbs missed the spelling fold ("despises"), and two generated "contradictions" changed a time
to itself. Before the fix the holdout scored dedupe 0.996 / 0.960 and contradiction 0.913 /
0.987. The errors left on the holdout are the rules' real limits: a meeting "with Lucas" vs
"with Olivia" reads as a changed object (it is another meeting), and rewordings no lexicon
here knows ("is on the payroll of", "typically" for "usually") read as changed facts.

    .venv/bin/python bench/write_policy_pairs.py [PATH]
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from time import perf_counter
from typing import Any

from workers.memory.policy.contradiction import Relation, classify
from workers.memory.policy.similarity import (
    BANDS,
    BINS,
    CandidateIndex,
    exact_hash,
    fingerprint,
    is_near_duplicate,
    signature,
)

DEFAULT = Path(__file__).resolve().parent / "data" / "write_policy" / "pairs.jsonl"
DUPLICATES = frozenset({"duplicate", "near_duplicate"})
TARGETS = {"dedupe": (0.98, 0.90), "contradiction": (0.90, 0.80)}
"""Issue #25 acceptance: (precision, recall) per stage."""

__all__ = ("report",)


def _ratio(part: int, whole: int) -> float:
    return part / whole if whole else 0.0


def _scores(truth: list[bool], said: list[bool]) -> tuple[float, float]:
    hits = sum(t and s for t, s in zip(truth, said, strict=True))
    return _ratio(hits, sum(said)), _ratio(hits, sum(truth))


def _timed(step: Callable[[dict[str, Any]], object], rows: list[dict[str, Any]]) -> float:
    """Median over three passes of µs per row (the machine is shared: the median is steadier)."""
    passes = []
    for _ in range(3):
        started = perf_counter()
        for row in rows:
            step(row)
        passes.append((perf_counter() - started) / len(rows) * 1e6)
    return sorted(passes)[1]


def _share_band(a: str, b: str) -> bool:
    rows = BINS // BANDS
    sa, sb = signature(a).values, signature(b).values
    return any(sa[i : i + rows] == sb[i : i + rows] for i in range(0, BINS, rows))


def _dedupe(row: dict[str, Any]) -> bool:
    return exact_hash(row["old"]) == exact_hash(row["new"]) or is_near_duplicate(
        row["old"], row["new"]
    )


def _split_report(split: str, rows: list[dict[str, Any]]) -> None:
    labels = [row["label"] for row in rows]
    relations = [classify(row["old"], row["new"]).relation for row in rows]
    dedupe_p, dedupe_r = _scores([lb in DUPLICATES for lb in labels], [_dedupe(r) for r in rows])
    contra_p, contra_r = _scores(
        [lb == "contradiction" for lb in labels],
        [rel is Relation.CONTRADICTION for rel in relations],
    )
    same = [r for r in rows if r["label"] != "unrelated"]
    other = [r for r in rows if r["label"] == "unrelated"]
    lsh_same = _ratio(sum(_share_band(r["old"], r["new"]) for r in same), len(same))
    lsh_other = _ratio(sum(_share_band(r["old"], r["new"]) for r in other), len(other))
    counts = ", ".join(f"{label} {n}" for label, n in sorted(Counter(labels).items()))
    print(f"\n{split}: {len(rows)} pairs ({counts})")
    for stage, (p, r) in (
        ("dedupe", (dedupe_p, dedupe_r)),
        ("contradiction", (contra_p, contra_r)),
    ):
        want_p, want_r = TARGETS[stage]
        verdict = "meets" if p >= want_p and r >= want_r else "MISSES"
        print(
            f"  {stage:<14} precision {p:.3f}  recall {r:.3f}   "
            f"(target ≥ {want_p} / ≥ {want_r}: {verdict})"
        )
    print(
        f"  LSH {BANDS}x{BINS // BANDS}: same-subject pairs found {lsh_same:.3f}, "
        f"unrelated pairs handed over {lsh_other:.3f}"
    )
    cost = {
        "fingerprint (hash + signature)": _timed(lambda r: fingerprint(r["new"]), rows),
        "dedupe decision": _timed(_dedupe, rows),
        "classify": _timed(lambda r: classify(r["old"], r["new"]), rows),
    }
    index: CandidateIndex[int] = CandidateIndex()
    for n, row in enumerate(rows):
        index.add(n, signature(row["old"]))
    new_signatures = {id(row): signature(row["new"]) for row in rows}
    cost[f"LSH lookup among {len(index)} records"] = _timed(
        lambda r: index.candidates(new_signatures[id(r)]), rows
    )
    print("  µs per pair: " + ", ".join(f"{name} {us:.1f}" for name, us in cost.items()))
    confusion = Counter(zip(labels, relations, strict=True))
    print("  label -> relation:")
    for label in sorted(set(labels)):
        said = ", ".join(
            f"{rel.value} {n}" for (lb, rel), n in sorted(confusion.items()) if lb == label
        )
        print(f"    {label:<25} {said}")


def report(path: Path | str = DEFAULT) -> None:
    """Print dedupe and contradiction precision/recall, LSH recall and cost per split.

    Args:
        path: A pairs file in the ``bench/data/write_policy/make_pairs.py`` format.
    """
    rows = [json.loads(line) for line in Path(path).read_text(encoding="utf-8").splitlines()]
    print(f"write policy pairs: {path}")
    for split in ("dev", "holdout"):
        _split_report(split, [row for row in rows if row["split"] == split])
