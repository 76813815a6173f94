"""The write policy against its labelled data: precision, recall and false positives per stage.

    .venv/bin/python bench/write_policy.py [--split dev|holdout|all] [--section cost]

One function per stage, each printing its own tables for ``dev`` and ``holdout`` separately
(thresholds are tuned on ``dev`` only; ``holdout`` is the honest figure): the safety stage over
``bench/data/write_policy/safety.jsonl``, and dedupe and contradiction over ``pairs.jsonl``
beside it (see ``write_policy_pairs``). Both files are made by the seeded generators in that
folder (``make_safety.py``, ``make_pairs.py``), which rewrite them byte for byte. Last, the
write cost: records/s through ``MEMORY.WRITE`` with the whole policy on against policy off, in
the same run (``write_cost``; it takes a few minutes, ``--section`` picks sections).

Per kind, over the cases of a split: **precision** (cases flagged with the kind that carry
it), **recall** (cases carrying the kind that were flagged with it), **fp_benign** (benign
cases, no kind at all, flagged with it). The group rows judge the acceptance targets:
``secret/pii`` (any secret or personal-data kind found in a case that has one; flagged with any
of them in a benign case) and ``injection``. Cost is µs per text (every text, and those of at
most 120 characters): the fastest of a few passes over the split (other processes only add
time).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from time import perf_counter

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from workers.memory.policy.safety import SafetyScanner

DATA = Path(__file__).parent / "data" / "write_policy"
SECRET_PII = ("api_key", "private_key", "jwt", "high_entropy", "card", "iban", "email", "phone")
TARGETS = {"secret/pii": (0.95, 0.02), "injection": (0.90, 0.02)}
PASSES = 5


def _load(name: str) -> list[dict[str, object]]:
    with (DATA / name).open(encoding="utf-8") as handle:
        return [json.loads(line) for line in handle]


def _row(name: str, tp: int, fp: int, fn: int, benign_fp: int, benign: int) -> str:
    precision = tp / (tp + fp) if tp + fp else 1.0
    recall = tp / (tp + fn) if tp + fn else 1.0
    fpr = benign_fp / benign if benign else 0.0
    target = TARGETS.get(name)
    verdict = ""
    if target is not None:
        verdict = "ok" if recall >= target[0] and fpr <= target[1] else "MISSED"
    return f"  {name:<13} {tp + fn:>6} {precision:>9.3f} {recall:>7.3f} {fpr:>10.3%}  {verdict}"


def _micros(scanner: SafetyScanner, texts: Sequence[str]) -> float:
    """µs per text: the fastest of a few passes (other processes only ever add time)."""
    best = float("inf")
    for _ in range(PASSES):
        started = perf_counter()
        for text in texts:
            scanner.scan(text)
        best = min(best, perf_counter() - started)
    return best / max(1, len(texts)) * 1e6


def section_safety(splits: Sequence[str]) -> None:
    """Print the safety stage's detection quality and cost, per split."""
    cases = _load("safety.jsonl")
    scanner = SafetyScanner()
    print("== safety stage (bench/data/write_policy/safety.jsonl)")
    for split in splits:
        rows = [case for case in cases if case["split"] == split]
        texts = [str(case["text"]) for case in rows]
        found = [scanner.scan(text) for text in texts]
        short = [text for text, case in zip(texts, rows, strict=True) if len(text) <= 120]
        cost, cost_short = _micros(scanner, texts), _micros(scanner, short)
        predicted = [{f.kind for f in findings} for findings in found]
        truth = [set(case["kinds"]) for case in rows]  # type: ignore[call-overload]
        benign = [i for i, kinds in enumerate(truth) if not kinds]
        print(
            f"-- {split}: {len(rows)} cases ({len(benign)} benign); "
            f"{cost:.1f} µs per text, {cost_short:.1f} µs per short text (<= 120 chars, "
            f"{len(short)} of them)"
        )
        print(f"  {'kind':<13} {'cases':>6} {'precision':>9} {'recall':>7} {'fp_benign':>10}")
        groups: dict[str, Callable[[set[str]], bool]] = {
            kind: (lambda kinds, kind=kind: kind in kinds) for kind in (*SECRET_PII, "injection")
        }
        groups["secret/pii"] = lambda kinds: bool(kinds & set(SECRET_PII))
        for name, has in groups.items():
            tp = sum(1 for t, p in zip(truth, predicted, strict=True) if has(t) and has(p))
            fp = sum(1 for t, p in zip(truth, predicted, strict=True) if not has(t) and has(p))
            fn = sum(1 for t, p in zip(truth, predicted, strict=True) if has(t) and not has(p))
            benign_fp = sum(1 for i in benign if has(predicted[i]))
            print(_row(name, tp, fp, fn, benign_fp, len(benign)))


def section_similarity(splits: Sequence[str]) -> None:
    """Dedupe and contradiction over the labelled pairs (``write_policy_pairs``), both splits."""
    from write_policy_pairs import report

    report()


def section_cost(splits: Sequence[str]) -> None:
    """The write cost of the whole policy against policy off, same run (``write_cost``)."""
    from write_cost import report

    report()


SECTIONS: dict[str, Callable[[Sequence[str]], None]] = {
    "safety": section_safety,
    "similarity": section_similarity,
    "cost": section_cost,
}
"""Every stage's section, printed in this order."""


def main() -> None:
    """Run every section over the chosen splits."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--split", choices=("dev", "holdout", "all"), default="all")
    parser.add_argument("--section", choices=tuple(SECTIONS), action="append")
    args = parser.parse_args()
    splits = ("dev", "holdout") if args.split == "all" else (args.split,)
    for name in args.section or SECTIONS:
        SECTIONS[name](splits)


if __name__ == "__main__":
    main()
