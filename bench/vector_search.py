"""MEMORY.SEARCH vector and hybrid latency on the SQLite store against raw numpy, same run.

For each corpus size (default 10,000 and 100,000 records of dimension 384) it writes the records
through ``MEMORY.WRITE`` with an embedder that returns fixed random unit vectors (so embedding
costs nothing and only search is measured), then times, over the same queries:

* **raw** — numpy brute force over the same float32 matrix (``matrix @ q`` + ``argpartition``
  + sorting the top k) followed by fetching those k records from the same SQLite file with
  ``sqlite3`` and decoding them: the least work that answers the query with records;
* **vector** — ``runtime.invoke("MEMORY.SEARCH", {"strategy": "vector"})``;
* **hybrid** (RRF, limit 10) and its two legs as it runs them: **vector@30** and
  **keyword@30** (each hybrid leg fetches ``overfetch x limit`` = 30 candidates).

Targets: vector p50 <= 1.5x raw; hybrid p50 <= (vector@30 p50 + keyword@30 p50) x 1.2.

    python3 tasks.py bench vector_search
    .venv/bin/python bench/vector_search.py --sizes 10000 --queries 200
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import random
import sqlite3
import statistics
import tempfile
from collections.abc import Awaitable, Callable
from pathlib import Path
from time import perf_counter
from typing import Any

import numpy as np

from ditto import Ditto, create_ditto
from workers.memory import SqliteMemoryStore, create_memory_worker
from workers.memory.embeddings import CallableEmbedder
from workers.memory.stores.rows import row_to_item
from workers.memory.stores.sqlite_sql import COLUMNS

DIMENSION = 384
K = 10
OVERFETCH = 3  # the hybrid's default
BATCH = 1_000
VECTOR_TARGET = 1.5
HYBRID_SLACK = 1.2
WORDS = [f"w{n}" for n in range(2_000)]


class FixedEmbedder(CallableEmbedder):
    """Random unit vectors, fixed per text: embedding costs nothing measurable."""

    def __init__(self) -> None:
        self.vectors: dict[str, np.ndarray] = {}
        super().__init__(self._embed, "bench-random-384", DIMENSION)

    def _embed(self, texts: list[str]) -> np.ndarray:
        return np.stack([self.vectors[text] for text in texts])

    def add(self, text: str, rng: np.random.Generator) -> None:
        vector = rng.normal(size=DIMENSION).astype(np.float32)
        self.vectors[text] = vector / np.linalg.norm(vector)


async def p50_p99(run: Callable[[Any], Awaitable[Any]], queries: list[Any]) -> tuple[float, float]:
    for query in queries[:20]:
        await run(query)  # warm up
    timings = []
    gc.disable()
    try:
        for query in queries:
            started = perf_counter()
            await run(query)
            timings.append((perf_counter() - started) * 1000)
    finally:
        gc.enable()
    timings.sort()
    return statistics.median(timings), timings[int(len(timings) * 0.99) - 1]


async def measure(size: int, queries: int, folder: Path) -> dict[str, tuple[float, float]]:
    rng = np.random.default_rng(7)
    words = random.Random(7)
    embedder = FixedEmbedder()
    texts = [f"record {n} " + " ".join(words.choices(WORDS, k=12)) for n in range(size)]
    questions = [" ".join(words.choices(WORDS, k=3)) for _ in range(queries)]
    for text in texts + questions:
        embedder.add(text, rng)
    path = folder / f"vectors-{size}.sqlite"
    store = SqliteMemoryStore(path)
    await store.open()
    results: dict[str, tuple[float, float]] = {}
    try:
        worker = create_memory_worker(store, embedder=embedder, track_usage=False)
        async with create_ditto(workers=[worker]) as runtime:
            for start in range(0, size, BATCH):
                batch = [{"content": text} for text in texts[start : start + BATCH]]
                (await runtime.invoke("MEMORY.WRITE", {"memories": batch})).unwrap()
            results.update(await _through_ditto(runtime, questions))
        results["raw"] = await _raw(path, embedder, texts, questions)
    finally:
        await store.aclose()
    return results


async def _through_ditto(runtime: Ditto, questions: list[str]) -> dict[str, tuple[float, float]]:
    timings = {}
    for name, strategy, limit in (
        ("vector", "vector", K),
        ("vector@30", "vector", K * OVERFETCH),
        ("keyword@30", "keyword", K * OVERFETCH),
        ("hybrid", "hybrid", K),
    ):

        async def search(query: str, strategy: str = strategy, limit: int = limit) -> None:
            result = await runtime.invoke(
                "MEMORY.SEARCH", {"query": query, "strategy": strategy, "limit": limit}
            )
            result.unwrap()

        timings[name] = await p50_p99(search, questions)
    return timings


async def _raw(
    path: Path, embedder: FixedEmbedder, texts: list[str], questions: list[str]
) -> tuple[float, float]:
    connection = sqlite3.connect(path)
    rows = connection.execute("SELECT m.id, m.content FROM memories m").fetchall()
    by_content = {content.strip('"'): item_id for item_id, content in rows}
    ids = [by_content[text] for text in texts]
    matrix = np.stack([embedder.vectors[text] for text in texts])

    async def search(query: str) -> None:
        scores = matrix @ embedder.vectors[query]
        top = np.argpartition(-scores, K - 1)[:K]
        chosen = [ids[row] for row in top[np.argsort(-scores[top])]]
        found = connection.execute(
            f"SELECT {COLUMNS} FROM memories m WHERE m.id IN ({', '.join('?' * K)})", chosen
        ).fetchall()
        [row_to_item(row) for row in found]

    try:
        return await p50_p99(search, questions)
    finally:
        connection.close()


def main(sizes: list[int], queries: int) -> None:
    with tempfile.TemporaryDirectory(prefix="ditto-bench-vectors-") as folder:
        for size in sizes:
            print(f"{size:,} records x {DIMENSION}-d, {queries} queries ...", flush=True)
            timings = asyncio.run(measure(size, queries, Path(folder)))
            raw, vector, hybrid = timings["raw"], timings["vector"], timings["hybrid"]
            print(f"  {'':11} {'p50 ms':>8} {'p99 ms':>8}")
            for name in ("raw", "vector", "vector@30", "keyword@30", "hybrid"):
                print(f"  {name:11} {timings[name][0]:8.2f} {timings[name][1]:8.2f}")
            ratio = vector[0] / raw[0]
            verdict = "ok" if ratio <= VECTOR_TARGET else "TARGET MISSED"
            print(f"  vector p50 / raw p50 = {ratio:.2f}x  {verdict} (<= {VECTOR_TARGET})")
            legs = timings["vector@30"][0] + timings["keyword@30"][0]
            verdict = "ok" if hybrid[0] <= legs * HYBRID_SLACK else "TARGET MISSED"
            print(
                f"  hybrid p50 / (vector@30 + keyword@30 p50) = {hybrid[0] / legs:.2f}x  "
                f"{verdict} (<= {HYBRID_SLACK})"
            )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--queries", type=int, default=300)
    arguments = parser.parse_args()
    main(arguments.sizes, arguments.queries)
