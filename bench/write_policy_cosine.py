"""Why the dedupe stage confirms near duplicates on the two texts, not by embedding cosine.

The issue proposed confirming MinHash candidates "by embedding cosine when an embedder is
configured". On the labelled pairs (``bench/data/write_policy/pairs.jsonl``) with the
default embedder (all-MiniLM-L6-v2) this prints, per split:

- the cosine of each label's pairs (min, 10th percentile, median, max): contradictions (a
  changed number, date, city or negation) reach the cosine of true duplicates, so no
  threshold separates them;
- precision and recall of dedupe by cosine alone, and by the text rules *and* a cosine bar,
  at a few thresholds, beside the text rules alone (what the worker runs).

Measured here (dev): cosine alone reaches precision 0.53-0.71 at recall 0.92-1.00 (a
contradiction is stated again in almost the same words); the rules alone 1.000 / 0.973, and a
cosine bar on top of them only lowers recall (0.95: 0.911) — it never removes a false
positive, because the rules make none. So the stage confirms on the texts with or without an
embedder.

    .venv/bin/python bench/write_policy_cosine.py
"""

from __future__ import annotations

import asyncio
import json
from collections import defaultdict
from pathlib import Path

import numpy as np

from workers.memory.policy.similarity import exact_hash, is_near_duplicate
from workers.memory.retrieval.embeddings import MiniLMEmbedder
from workers.memory.retrieval.embeddings.base import embed_texts

PAIRS = Path(__file__).resolve().parent / "data" / "write_policy" / "pairs.jsonl"
DUPLICATES = frozenset({"duplicate", "near_duplicate"})
THRESHOLDS = (0.85, 0.90, 0.93, 0.95)


def _scores(truth: list[bool], said: list[bool]) -> str:
    hits = sum(t and s for t, s in zip(truth, said, strict=True))
    precision = hits / sum(said) if any(said) else 1.0
    recall = hits / sum(truth) if any(truth) else 1.0
    return f"precision {precision:.3f} recall {recall:.3f}"


async def _split(embedder: MiniLMEmbedder, split: str, rows: list[dict[str, str]]) -> None:
    old = await embed_texts(embedder, [row["old"] for row in rows])
    new = await embed_texts(embedder, [row["new"] for row in rows])
    cosine = (old * new).sum(axis=1)
    by_label: defaultdict[str, list[float]] = defaultdict(list)
    for row, value in zip(rows, cosine, strict=True):
        by_label[row["label"]].append(float(value))
    print(f"\n{split}: {len(rows)} pairs; cosine per label")
    for label, values in sorted(by_label.items()):
        array = np.array(values)
        print(
            f"  {label:<25} min {array.min():6.3f}  p10 {np.percentile(array, 10):6.3f}  "
            f"median {np.median(array):6.3f}  max {array.max():6.3f}"
        )
    truth = [row["label"] in DUPLICATES for row in rows]
    rules = [
        exact_hash(row["old"]) == exact_hash(row["new"])
        or is_near_duplicate(row["old"], row["new"])
        for row in rows
    ]
    print(f"  text rules alone (the worker):  {_scores(truth, rules)}")
    for bar in THRESHOLDS:
        above = [bool(value >= bar) for value in cosine]
        both = [rule and high for rule, high in zip(rules, above, strict=True)]
        print(
            f"  cosine >= {bar:.2f}: alone {_scores(truth, above)};  "
            f"rules and cosine {_scores(truth, both)}"
        )


async def main() -> None:
    rows = [json.loads(line) for line in PAIRS.read_text(encoding="utf-8").splitlines()]
    embedder = MiniLMEmbedder()
    for split in ("dev", "holdout"):
        await _split(embedder, split, [row for row in rows if row["split"] == split])


if __name__ == "__main__":
    asyncio.run(main())
