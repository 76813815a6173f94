"""Retrieval quality of each MEMORY.SEARCH strategy on judged datasets: recall@1/5/10, nDCG@10
and query time, per strategy and dataset.

Datasets (``bench/datasets.py``): ``sample`` (bundled, 40 documents), ``longmemeval-s``
(LongMemEval_S: 500 questions, each searching its own haystack of ~47 chat sessions; 23,551
documents, downloaded once) and ``squad-dev`` (bundled: SQuAD v1.1's development set, 2,067
Wikipedia paragraphs and one question of each), or any BEIR-format folder. Documents are
written through the public API (``MEMORY.WRITE``: namespace, key = the document id, content =
the text) into a SQLite store, which is kept in ``$DITTO_BENCH_CACHE/eval`` so a second run
skips indexing; then every judged query runs through ``MEMORY.SEARCH`` (filtered to its
namespace) with each strategy. Recall@k is the share of a query's relevant documents in its top
k; nDCG@10 uses linear gains, ``gain / log2(rank + 1)``, over the ideal ordering. Both are
averaged over queries.

``hybrid`` is the default strategy with an embedder (its default fusion); ``hybrid rrf`` and
``hybrid weighted`` are the other fusions for comparison (``--strategies`` picks some);
``hybrid+mmr`` and ``hybrid+embedding`` add each rerank stage to the default hybrid, and a last
table prints their change in recall@5 and nDCG@10 and their time per query as a ratio to hybrid
alone (same run). The run ends by
checking that hybrid scores at least the better leg (recall@5 and nDCG@10) on every dataset, at
record granularity and at session granularity (``--granularity``: each ``--session-size``
consecutive documents of a namespace as one long record, see ``datasets.sessions``), and
with ``--markdown``
prints the README's table (``--update-readme`` writes it there). With
``--postgres URL`` the keyword strategy also runs on a PostgreSQL store of the same documents.

    python3 tasks.py bench retrieval_eval                       # the three datasets, MiniLM
    .venv/bin/python bench/retrieval_eval.py --data sample --embedder hashing
    .venv/bin/python bench/retrieval_eval.py --data ~/beir/scifact
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import math
import re
import statistics
import sys
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from time import perf_counter
from typing import Any

from datasets import Dataset, cache_dir, first_queries, load, sessions

from ditto import Ditto, create_ditto
from workers.memory import SqliteMemoryStore, create_memory_worker
from workers.memory.retrieval.embeddings import Embedder, HashingEmbedder, MiniLMEmbedder
from workers.memory.retrieval.embeddings.e5 import E5SmallEmbedder
from workers.memory.retrieval.embeddings.minilm import installed_model_dir

CUTOFFS = (1, 5, 10)
BATCH = 256
STRATEGIES: tuple[tuple[str, str, dict[str, Any]], ...] = (
    ("keyword", "keyword", {}),
    ("vector", "vector", {}),
    ("hybrid", "hybrid", {}),
    ("hybrid rrf", "hybrid", {"fusion": "rrf"}),
    ("hybrid weighted", "hybrid", {"fusion": "weighted"}),
    ("hybrid+mmr", "hybrid", {"rerank": "mmr"}),
    ("hybrid+embedding", "hybrid", {"rerank": "embedding"}),
)
RERANKED = ("hybrid+mmr", "hybrid+embedding")
README = Path(__file__).parents[1] / "README.md"
BEGIN, END = "<!-- retrieval-eval:begin -->", "<!-- retrieval-eval:end -->"


@dataclass(frozen=True)
class Scores:
    recall: dict[int, float]
    ndcg: float
    p50_ms: float


def recall(ranked: list[str], relevant: dict[str, float], k: int) -> float:
    return len(set(ranked[:k]) & relevant.keys()) / len(relevant)


def ndcg(ranked: list[str], relevant: dict[str, float], k: int = 10) -> float:
    gains = [relevant.get(doc, 0.0) for doc in ranked[:k]]
    dcg = sum(gain / math.log2(rank + 2) for rank, gain in enumerate(gains))
    ideal = sorted(relevant.values(), reverse=True)[:k]
    idcg = sum(gain / math.log2(rank + 2) for rank, gain in enumerate(ideal))
    return dcg / idcg if idcg else 0.0


def _fingerprint(data: Dataset, embedder: Embedder) -> str:
    # The window decides the chunks each record is stored with: another window, another index.
    window = getattr(embedder, "window", None)
    digest = hashlib.sha256(f"{embedder.model_id}\0{window}".encode())
    for document in data.documents:
        digest.update(f"{document.namespace}\0{document.key}\0{document.text}\0".encode())
    return digest.hexdigest()[:16]


async def index(data: Dataset, embedder: Embedder) -> Path:
    """The dataset's store file, written through MEMORY.WRITE unless a complete one is cached."""
    folder = cache_dir() / "eval"
    folder.mkdir(parents=True, exist_ok=True)
    slug = re.sub(r"[^A-Za-z0-9.-]+", "-", f"{data.name}-{embedder.model_id}")
    path = folder / f"{slug}.sqlite"
    stamp = path.with_suffix(".done")
    fingerprint = _fingerprint(data, embedder)
    if path.exists() and stamp.exists() and stamp.read_text() == fingerprint:
        return path
    for stale in (
        path,
        stamp,
        path.with_name(path.name + "-wal"),
        path.with_name(path.name + "-shm"),
    ):
        stale.unlink(missing_ok=True)
    async with SqliteMemoryStore(path) as store:
        worker = create_memory_worker(store, embedder=embedder, track_usage=False)
        async with create_ditto(workers=[worker], config=None) as runtime:
            started = perf_counter()
            documents = data.documents
            for start in range(0, len(documents), BATCH):
                drafts = [
                    {"namespace": doc.namespace, "key": doc.key, "content": doc.text}
                    for doc in documents[start : start + BATCH]
                ]
                # A batch of long records embeds thousands of chunks: more than a call's default
                # deadline on a slow machine.
                written = await runtime.invoke("MEMORY.WRITE", {"memories": drafts}, timeout=3600)
                written.unwrap()
                done = start + len(drafts)
                rate = done / (perf_counter() - started)
                print(
                    f"\r  indexing {data.name}: {done:,}/{len(documents):,} documents "
                    f"({rate:,.0f}/s, ETA {(len(documents) - done) / rate:,.0f} s)",
                    end="",
                    flush=True,
                    file=sys.stderr,
                )
            print(file=sys.stderr)
    stamp.write_text(fingerprint)
    return path


async def evaluate(
    data: Dataset,
    embedder: Embedder,
    strategies: Sequence[tuple[str, str, dict[str, Any]]] = STRATEGIES,
) -> dict[str, Scores]:
    path = await index(data, embedder)
    async with SqliteMemoryStore(path) as store:
        worker = create_memory_worker(store, embedder=embedder, track_usage=False)
        async with create_ditto(workers=[worker], config=None) as runtime:
            return await score(runtime, data, strategies)


async def evaluate_postgres(data: Dataset, url: str) -> dict[str, Scores]:
    """The keyword strategy on a PostgreSQL store (a private schema, dropped afterwards)."""
    import asyncpg

    from workers.memory.stores.postgres import PostgresMemoryStore

    schema = f"ditto_eval_{uuid.uuid4().hex[:12]}"
    try:
        async with PostgresMemoryStore.from_url(url, schema=schema) as store:
            worker = create_memory_worker(store, track_usage=False)
            async with create_ditto(workers=[worker], config=None) as runtime:
                for start in range(0, len(data.documents), BATCH):
                    drafts = [
                        {"namespace": doc.namespace, "key": doc.key, "content": doc.text}
                        for doc in data.documents[start : start + BATCH]
                    ]
                    (await runtime.invoke("MEMORY.WRITE", {"memories": drafts})).unwrap()
                return await score(runtime, data, STRATEGIES[:1])
    finally:
        connection = await asyncpg.connect(url)
        try:
            await connection.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
        finally:
            await connection.close()


async def score(
    runtime: Ditto, data: Dataset, strategies: Sequence[tuple[str, str, dict[str, Any]]]
) -> dict[str, Scores]:
    """Every judged query through MEMORY.SEARCH with each strategy."""
    queries = [query for query in data.queries if query.id in data.judgements]
    results: dict[str, Scores] = {}
    for name, strategy, options in strategies:
        recalls: dict[int, list[float]] = {k: [] for k in CUTOFFS}
        quality, timings = [], []
        for query in queries:
            request = {
                "query": query.text,
                "strategy": strategy,
                "limit": max(CUTOFFS),
                "options": options,
                "filter": {"namespace": query.namespace},
            }
            began = perf_counter()
            result = await runtime.invoke("MEMORY.SEARCH", request)
            timings.append((perf_counter() - began) * 1000)
            ranked = [hit.memory.key for hit in result.unwrap().hits]
            relevant = data.judgements[query.id]
            for k in CUTOFFS:
                recalls[k].append(recall(ranked, relevant, k))
            quality.append(ndcg(ranked, relevant))
        results[name] = Scores(
            {k: statistics.fmean(values) for k, values in recalls.items()},
            statistics.fmean(quality),
            statistics.median(timings),
        )
    return results


def print_table(data: Dataset, results: dict[str, Scores]) -> None:
    judged = sum(1 for query in data.queries if query.id in data.judgements)
    print(f"\n{data.name}: {len(data.documents):,} documents, {judged:,} judged queries")
    header = f"{'strategy':16}" + "".join(f" {'R@' + str(k):>6}" for k in CUTOFFS)
    print(f"{header} {'nDCG@10':>8} {'p50 ms':>7}")
    for name, scores in results.items():
        recalls = "".join(f" {scores.recall[k]:6.3f}" for k in CUTOFFS)
        print(f"{name:16}{recalls} {scores.ndcg:8.3f} {scores.p50_ms:7.2f}")


def print_rerank_costs(data: Dataset, results: dict[str, Scores]) -> None:
    """Each rerank stage beside hybrid alone: quality gained and time per query (same run)."""
    if not all(name in results for name in ("hybrid", *RERANKED)):
        return
    base = results["hybrid"]
    print(f"\n{data.name}: rerank stages against hybrid alone (same run)")
    print(
        f"{'strategy':18} {'R@5':>6} {'dR@5':>7} {'nDCG@10':>8} {'dnDCG':>7} {'ms/q':>7} {'x':>6}"
    )
    for name in ("hybrid", *RERANKED):
        got = results[name]
        print(
            f"{name:18} {got.recall[5]:6.3f} {got.recall[5] - base.recall[5]:+7.3f} "
            f"{got.ndcg:8.3f} {got.ndcg - base.ndcg:+7.3f} {got.p50_ms:7.2f} "
            f"{got.p50_ms / base.p50_ms:5.2f}x"
        )


def hybrid_verdicts(data: Dataset, results: dict[str, Scores]) -> list[str]:
    """Where hybrid scores below the better leg (recall@5, nDCG@10); empty when it never does."""
    misses: list[str] = []
    if not all(name in results for name in ("keyword", "vector", "hybrid")):
        return misses
    legs = (results["keyword"], results["vector"])
    for metric, value in (("R@5", lambda s: s.recall[5]), ("nDCG@10", lambda s: s.ndcg)):
        best = max(value(leg) for leg in legs)
        if value(results["hybrid"]) < best:
            misses.append(
                f"{data.name}: hybrid {metric} {value(results['hybrid']):.3f} < {best:.3f}"
            )
    return misses


def markdown(runs: Sequence[tuple[Dataset, dict[str, Scores]]], embedder: Embedder) -> str:
    lines = [
        f"Measured by `python3 tasks.py bench retrieval_eval` (embedder `{embedder.model_id}`):",
        "",
        "| dataset | strategy | R@1 | R@5 | R@10 | nDCG@10 |",
        "| --- | --- | ---: | ---: | ---: | ---: |",
    ]
    for data, results in runs:
        for name, scores in results.items():
            lines.append(
                f"| {data.name} | {name} | "
                + " | ".join(f"{scores.recall[k]:.3f}" for k in CUTOFFS)
                + f" | {scores.ndcg:.3f} |"
            )
    return "\n".join(lines)


def update_readme(table: str) -> None:
    text = README.read_text(encoding="utf-8")
    start, end = text.index(BEGIN) + len(BEGIN), text.index(END)
    README.write_text(text[:start] + "\n" + table + "\n" + text[end:], encoding="utf-8")
    print(f"updated the table in {README}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--data",
        action="append",
        help="a dataset name (sample, longmemeval-s, squad-dev) or a BEIR folder; repeatable "
        "(default: all three)",
    )
    parser.add_argument(
        "--embedder",
        choices=("minilm", "e5-small", "hashing"),
        default="minilm" if installed_model_dir() is not None else "hashing",
        help="minilm (default when installed), e5-small (ditto models install e5-small) or hashing",
    )
    parser.add_argument(
        "--postgres",
        metavar="URL",
        help="also run the keyword strategy on a PostgreSQL store (a private schema, dropped)",
    )
    parser.add_argument(
        "--granularity",
        choices=("record", "session", "both"),
        default="both",
        help="documents as records, consecutive documents joined as sessions, or both",
    )
    parser.add_argument(
        "--session-size", type=int, default=4, help="documents per session (default 4)"
    )
    parser.add_argument(
        "--strategies",
        nargs="+",
        choices=[name for name, _, _ in STRATEGIES],
        help="the strategies to run (default: all)",
    )
    parser.add_argument(
        "--questions", type=int, help="only each dataset's first N judged queries (quicker)"
    )
    parser.add_argument("--markdown", action="store_true", help="print the README table")
    parser.add_argument("--update-readme", action="store_true", help="write it into README.md")
    arguments = parser.parse_args()
    embedder: Embedder = {
        "minilm": MiniLMEmbedder,
        "e5-small": E5SmallEmbedder,
        "hashing": HashingEmbedder,
    }[arguments.embedder]()
    chosen = [entry for entry in STRATEGIES if entry[0] in (arguments.strategies or [entry[0]])]
    runs = []
    for name in arguments.data or ["sample", "squad-dev", "longmemeval-s"]:
        loaded = load(name)
        if arguments.questions:
            loaded = first_queries(loaded, arguments.questions)
        views = {
            "record": [loaded],
            "session": [sessions(loaded, arguments.session_size)],
            "both": [loaded, sessions(loaded, arguments.session_size)],
        }[arguments.granularity]
        for data in views:
            results = asyncio.run(evaluate(data, embedder, chosen))
            print_table(data, results)
            print_rerank_costs(data, results)
            runs.append((data, results))
        data = loaded
        if arguments.postgres:
            on_postgres = asyncio.run(evaluate_postgres(data, arguments.postgres))
            print_table(data, {"keyword (PG)": on_postgres["keyword"]})
    misses = [miss for data, results in runs for miss in hybrid_verdicts(data, results)]
    print()
    print(
        "hybrid >= the better leg (R@5, nDCG@10) on every dataset:", "MISSED" if misses else "met"
    )
    for miss in misses:
        print(f"  {miss}")
    if arguments.markdown or arguments.update_readme:
        table = markdown(runs, embedder)
        print()
        print(table)
        if arguments.update_readme:
            update_readme(table)


if __name__ == "__main__":
    main()
