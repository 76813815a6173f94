"""The stores' vector index with its approximate (HNSW) graph beside exact search, same run.

Every store ranks vectors with :class:`~workers.memory.retrieval.vector_index.VectorIndex`;
above ``workers.memory.ann.threshold`` rows it builds an HNSW graph (usearch) in a background
thread and answers from it. This measures that index as the stores use it (``top``, and
``ranked_filtered`` with a filter that lets 10 % of the records through), per size:

* the build: seconds from the threshold crossing to the graph answering, and the growth of
  this process's resident set it caused (the graph; the snapshot it was built from is freed);
* recall@10 of the graph against the exact answer of the same index (``top(..., exact=True)``)
  over ``--queries`` queries, plain and filtered;
* latency p50 / p99 of graph and exact search, one query per call, alternating round by round
  (``timing.alternate``), with the ratio; exact search uses BLAS's threads as in the stores.

The vectors are synthetic, drawn to look like all-MiniLM-L6-v2 vectors of real text
(``ann_vectors.py``, calibrated against LongMemEval session vectors; real vectors are harder
for a graph, see its docstring). ``memory_store.py`` runs this at its sizes.

    .venv/bin/python bench/ann_store.py --sizes 10000 100000
    nice -n 10 .venv/bin/python bench/ann_store.py --sizes 1000000 --queries 300
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import time
from pathlib import Path

import numpy as np
from ann_vectors import DIMENSION, K, generate
from timing import Figure, alternate, timed

from workers.memory.retrieval.ann_index import AnnSettings
from workers.memory.retrieval.embeddings.base import EmbeddingModel
from workers.memory.retrieval.vector_index import VectorIndex
from workers.memory.retrieval.vectors import ranked_filtered

MODEL = EmbeddingModel("synthetic-minilm", DIMENSION)
ALLOWED = 0.1
TARGET_RECALL, TARGET_P99_MS = 0.98, 20.0


def resident() -> int:
    """This process's resident set, bytes."""
    return int(Path("/proc/self/statm").read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def recall(found: list[list[str]], truth: list[list[str]]) -> float:
    return float(
        np.mean([len(set(f) & set(t)) / max(len(t), 1) for f, t in zip(found, truth, strict=True)])
    )


async def measure(size: int, queries: int, rounds: int, settings: AnnSettings) -> None:
    base, questions = generate(size, queries)
    ids = [f"r{n:07d}" for n in range(size)]
    mask = np.random.default_rng(3).random(size) < ALLOWED
    allowed = set(np.asarray(ids)[mask].tolist())
    allowed_rows = np.flatnonzero(mask)
    gc.collect()
    before = resident()
    index = VectorIndex(MODEL, AnnSettings(threshold=None))
    for start in range(0, size, 50_000):  # as a store loads its rows: in batches
        index.upsert(ids[start : start + 50_000], base[start : start + 50_000])
    gc.collect()
    exact_memory = resident() - before
    started = time.perf_counter()
    index.configure_ann(
        AnnSettings(
            threshold=1,  # build now, over every row
            connectivity=settings.connectivity,
            expansion_add=settings.expansion_add,
            expansion_search=settings.expansion_search,
            build_threads=settings.build_threads,
        )
    )
    state = index.wait_ann()
    seconds = time.perf_counter() - started
    gc.collect()
    graph_memory = resident() - before - exact_memory
    print(
        f"{size:,} rows x {DIMENSION}-d (synthetic MiniLM-like): exact index and vectors "
        f"{exact_memory / 2**20:,.0f} MiB; graph M{settings.connectivity}/"
        f"efc{settings.expansion_add}/ef{settings.expansion_search}/{settings.dtype} {state} after "
        f"{seconds:.1f} s in the background, +{graph_memory / 2**20:,.0f} MiB; "
        f"load {os.getloadavg()[0]:.1f}",
        flush=True,
    )

    def matching(candidates: list[str]) -> list[str]:
        return [item_id for item_id in candidates if item_id in allowed]

    def plain(exact: bool) -> list[list[str]]:
        return [index.top(q, K, exact=exact)[0] for q in questions]

    def filtered(exact: bool) -> list[list[str]]:
        if exact:  # numpy over the allowed rows
            return [
                [ids[row] for row in allowed_rows[np.argsort(-(base[allowed_rows] @ q))[:K]]]
                for q in questions[:100]
            ]
        return [
            [i for i, _ in ranked_filtered(index, q, K, matching, str)] for q in questions[:100]
        ]

    hit = recall(plain(False), plain(True))
    hit_filtered = recall(filtered(False), filtered(True))
    figures: dict[str, Figure] = await alternate(
        {
            "graph": lambda: timed([lambda q=q: index.top(q, K) for q in questions]),
            "exact": lambda: timed([lambda q=q: index.top(q, K, exact=True) for q in questions]),
            "graph filtered": lambda: timed(
                [lambda q=q: ranked_filtered(index, q, K, matching, str) for q in questions]
            ),
        },
        rounds,
    )
    graph, exact, sieved = figures["graph"], figures["exact"], figures["graph filtered"]
    g50, g99 = graph.latency(0.5).median, graph.latency(0.99).median
    e50, e99 = exact.latency(0.5).median, exact.latency(0.99).median
    mark = "met" if hit >= TARGET_RECALL and g99 <= TARGET_P99_MS else "NOT met"
    print(
        f"  vector ANN recall@10 {hit:.4f} (filtered to {ALLOWED:.0%}: {hit_filtered:.4f}); "
        f"p50 {g50:.2f} ms  p99 {g99:.2f} ms  [{graph.latency(0.99).show()}]\n"
        f"  exact:                p50 {e50:.2f} ms  p99 {e99:.2f} ms  "
        f"[{exact.latency(0.99).show()}]"
        f"  -> graph/exact p50 {g50 / e50:.3f}, p99 {g99 / e99:.3f}\n"
        f"  filtered ({ALLOWED:.0%} pass) through the graph: p50 "
        f"{sieved.latency(0.5).median:.2f} ms  p99 {sieved.latency(0.99).median:.2f} ms\n"
        f"  target recall@10 >= {TARGET_RECALL} and p99 <= {TARGET_P99_MS} ms: {mark}; "
        f"load {os.getloadavg()[0]:.1f}",
        flush=True,
    )
    index.reset(None)


async def main(sizes: list[int], queries: int, rounds: int, settings: AnnSettings) -> None:
    for size in sizes:
        await measure(size, queries, rounds, settings)
        gc.collect()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--queries", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=3)
    defaults = AnnSettings()
    parser.add_argument("--connectivity", type=int, default=defaults.connectivity)
    parser.add_argument("--expansion-add", type=int, default=defaults.expansion_add)
    parser.add_argument("--expansion-search", type=int, default=defaults.expansion_search)
    parser.add_argument("--build-threads", type=int, default=0)
    parser.add_argument("--dtype", choices=("f32", "f16"), default=defaults.dtype)
    arguments = parser.parse_args()
    asyncio.run(
        main(
            arguments.sizes,
            arguments.queries,
            arguments.rounds,
            AnnSettings(
                threshold=1,
                connectivity=arguments.connectivity,
                expansion_add=arguments.expansion_add,
                expansion_search=arguments.expansion_search,
                build_threads=arguments.build_threads,
                dtype=arguments.dtype,
            ),
        )
    )
