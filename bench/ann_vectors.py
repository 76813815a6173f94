"""Synthetic 384-d vectors that look like all-MiniLM-L6-v2 vectors of real text, the exact top-k
they are measured against, and the calibration that compares them with real MiniLM vectors
(for ``ann_search.py``).

:func:`generate` draws them; ``ann_search.py --calibrate`` prints the comparison it was tuned
on: the top-1 and top-10 neighbour cosines (10th/50th/90th percentile), random-pair cosines,
the local intrinsic dimension (Levina-Bickel MLE over the 10 nearest) and the participation ratio of
the covariance spectrum, for real MiniLM vectors (the LongMemEval session cache under
``~/.cache/ditto-bench/eval`` if present, and ``bench/data`` sentences embedded with
``MiniLMEmbedder``) beside synthetic vectors of the same count. Measured: LongMemEval (6,095
sessions) top-1 0.45/0.58/0.72, top-10 0.35/0.46/0.56, random pairs 0.139 +- 0.101, LID 26.6,
PR 107; synthetic 0.48/0.59/0.73, 0.37/0.46/0.61, 0.113 +- 0.080, LID 21.2, PR 152. The real
vectors are still the harder ones for a graph: hnswlib M16/efc128 over 5,595 of them reaches
recall@10 0.833/0.896/0.962/0.990 at ef 10/16/32/64, over as many synthetic ones
0.951/0.979/0.995/0.999, so recall measured here is if anything optimistic.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import numpy as np

DIMENSION = 384
K = 10
DATA = Path(__file__).resolve().parent / "data"
CACHE = Path.home() / ".cache" / "ditto-bench" / "eval"

Vectors = np.ndarray


# -- data --------------------------------------------------------------------------------------


def _spectrum(power: float) -> np.ndarray:
    scale = np.arange(1, DIMENSION + 1) ** (-power / 2)
    return scale / np.linalg.norm(scale)


def generate(count: int, queries: int, seed: int = 7) -> tuple[Vectors, Vectors]:
    """``count`` records and ``queries`` queries drawn alike (queries are new draws).

    Topics (one per 150 records) spread over a slowly decaying spectrum (variance ~ i^-0.5
    along a random basis: a wide participation ratio like MiniLM's), ten subtopics around
    each, records around a subtopic along a steeper spectrum (i^-1.0, axes permuted per
    subtopic: a low local intrinsic dimension), subtopic widths and sizes lognormal, plus one
    shared offset (text vectors are not centred: random pairs have a positive cosine). The
    constants were tuned with ``--calibrate`` against LongMemEval session vectors.
    """
    rng = np.random.default_rng(seed)
    basis, _ = np.linalg.qr(rng.normal(size=(DIMENSION, DIMENSION)))
    wide, narrow = _spectrum(0.5), _spectrum(1.0)
    clusters = max(1, count // 15)
    topics = max(1, clusters // 10)
    tops = (rng.normal(size=(topics, DIMENSION)) * wide) @ basis.T
    parent = rng.integers(0, topics, clusters)
    offsets = 0.8 * (rng.normal(size=(clusters, DIMENSION)) * wide) @ basis.T
    centers = tops[parent] + offsets + 0.75 * basis[:, -1]
    widths = 1.8 * rng.lognormal(0, 0.3, clusters)
    axes = rng.permuted(np.tile(np.arange(DIMENSION), (8, 1)), axis=1)
    kind = rng.integers(0, 8, clusters)
    weights = rng.lognormal(0, 1.0, clusters)
    weights /= weights.sum()

    def draw(number: int, source: np.random.Generator) -> Vectors:
        out = np.empty((number, DIMENSION), dtype=np.float32)
        for start in range(0, number, 100_000):  # bounded temporaries at 1M
            which = source.choice(clusters, size=min(100_000, number - start), p=weights)
            noise = source.normal(size=(len(which), DIMENSION)) * narrow[axes[kind[which]]]
            block = centers[which] + widths[which, None] * (noise @ basis.T)
            out[start : start + len(which)] = block / np.linalg.norm(block, axis=1)[:, None]
        return out

    return draw(count, rng), draw(queries, np.random.default_rng(seed + 1))


def exact_top(base: Vectors, queries: Vectors, k: int = K) -> np.ndarray:
    """Exact top-k row numbers, best first, in blocks of queries (all BLAS threads)."""
    found = np.empty((len(queries), k), dtype=np.int64)
    for start in range(0, len(queries), 100):
        scores = queries[start : start + 100] @ base.T
        top = np.argpartition(-scores, k - 1, axis=1)[:, :k]
        order = np.argsort(-np.take_along_axis(scores, top, axis=1), axis=1)
        found[start : start + 100] = np.take_along_axis(top, order, axis=1)
    return found


# -- calibration -------------------------------------------------------------------------------


def real_vectors(sentences: int) -> dict[str, Vectors]:
    """MiniLM vectors of real text: the LongMemEval session cache (first chunk of each record),
    and up to ``sentences`` short texts from ``bench/data`` embedded now."""
    found: dict[str, Vectors] = {}
    for path in sorted(CACHE.glob("*all-MiniLM-L6-v2.sqlite")):
        with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as connection:
            blobs = connection.execute(
                "SELECT vector FROM memory_vectors WHERE dimension = 384"
            ).fetchall()
        found[f"LongMemEval ({len(blobs):,})"] = np.stack(
            [np.frombuffer(blob, dtype=np.float32)[:DIMENSION] for (blob,) in blobs]
        )
    if not found:
        print(f"  no LongMemEval cache under {CACHE} (bench/retrieval_eval.py writes it)")
    texts = [
        json.loads(line)["old"]
        for line in (DATA / "write_policy" / "pairs.jsonl").read_text().splitlines()
    ]
    texts += [
        json.loads(line)["text"]
        for line in (DATA / "write_policy" / "safety.jsonl").read_text().splitlines()
    ]
    texts = list(dict.fromkeys(texts))[:sentences]
    if texts:
        from workers.memory.retrieval.embeddings import MiniLMEmbedder

        found[f"bench/data sentences ({len(texts):,})"] = MiniLMEmbedder().embed_now(texts)
    return found


def describe(label: str, base: Vectors, queries: Vectors) -> None:
    rng = np.random.default_rng(1)
    top = -np.sort(-(queries @ base.T), axis=1)[:, :K]
    left, right = rng.integers(0, len(base), (2, 20_000))
    pairs = np.einsum("ij,ij->i", base[left[left != right]], base[right[left != right]])
    distance = np.sqrt(np.maximum(2 - 2 * top, 1e-12))
    dimension = np.median(1 / np.mean(np.log(distance[:, -1:] / distance[:, :-1]), axis=1))
    spectrum = np.linalg.eigvalsh(np.cov(base[:5_000].T))
    ratio = spectrum.sum() ** 2 / (spectrum**2).sum()

    def spread(values: np.ndarray) -> str:
        return " ".join(f"{v:.2f}" for v in np.percentile(values, [10, 50, 90]))

    print(
        f"  {label:34} {spread(top[:, 0]):>14} {spread(top[:, -1]):>14} "
        f"{pairs.mean():>6.3f} {pairs.std():>5.3f} "
        f"{np.percentile(pairs, 99):>5.2f} {dimension:>5.1f} {ratio:>6.1f}"
    )


def calibrate(sentences: int) -> None:
    print(
        f"  {'vectors (held-out queries: 500)':34} {'top-1 p10/50/90':>14} "
        f"{'top-10 p10/50/90':>14} {'random mean sd p99':>18} {'LID':>5} {'PR':>6}"
    )
    for label, vectors in real_vectors(sentences).items():
        order = np.random.default_rng(2).permutation(len(vectors))
        describe(label, vectors[order[500:]], vectors[order[:500]])
        base, queries = generate(len(vectors) - 500, 500)
        describe("  synthetic, same count", base, queries)
