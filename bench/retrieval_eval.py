"""Retrieval quality of each MEMORY.SEARCH strategy on a judged dataset: recall@1/5/10, nDCG@10,
index and query timings.

The dataset is a folder in the BEIR format, so public BEIR datasets (SciFact, NFCorpus, FiQA,
...) work unchanged once downloaded and unzipped:

* ``corpus.jsonl`` — one document per line: ``{"_id": "d1", "title": "...", "text": "..."}``
  (``title`` optional);
* ``queries.jsonl`` — ``{"_id": "q1", "text": "..."}``;
* ``qrels.tsv`` (or ``qrels/test.tsv``) — tab-separated ``query-id  corpus-id  score`` with an
  optional header line; a score above 0 marks a relevant document (graded scores are gains for
  nDCG). Queries without a positive judgement are skipped.

Documents are indexed through the public API (``MEMORY.WRITE``, key = the document id, content
= title and text) into a SQLite store in a temporary folder, then every judged query runs
through ``MEMORY.SEARCH`` with each strategy. Recall@k is the share of a query's relevant
documents in its top k; nDCG@10 uses linear gains, ``gain / log2(rank + 1)``, over the ideal
ordering. Both are averaged over queries.

    python3 tasks.py bench retrieval_eval                    # the bundled sample, MiniLM
    .venv/bin/python bench/retrieval_eval.py --data ~/beir/scifact --embedder hashing
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import statistics
import tempfile
from dataclasses import dataclass
from pathlib import Path
from time import perf_counter
from typing import Any

from ditto import create_ditto
from workers.memory import SqliteMemoryStore, create_memory_worker
from workers.memory.embeddings import Embedder, HashingEmbedder, MiniLMEmbedder
from workers.memory.embeddings.minilm import installed_model_dir

SAMPLE = Path(__file__).with_name("data") / "retrieval_sample"
CUTOFFS = (1, 5, 10)
BATCH = 256
STRATEGIES: tuple[tuple[str, str, dict[str, Any]], ...] = (
    ("keyword", "keyword", {}),
    ("vector", "vector", {}),
    ("hybrid rrf", "hybrid", {"fusion": "rrf"}),
    ("hybrid weighted", "hybrid", {"fusion": "weighted"}),
)


@dataclass(frozen=True)
class Dataset:
    corpus: dict[str, str]
    queries: dict[str, str]
    judgements: dict[str, dict[str, float]]


def load(folder: Path) -> Dataset:
    """Read a BEIR-format folder (see the module docstring)."""
    corpus = {}
    for line in (folder / "corpus.jsonl").read_text(encoding="utf-8").splitlines():
        if line.strip():
            doc = json.loads(line)
            corpus[str(doc["_id"])] = "\n".join(
                part for part in (doc.get("title"), doc.get("text")) if part
            )
    queries = {}
    for line in (folder / "queries.jsonl").read_text(encoding="utf-8").splitlines():
        if line.strip():
            query = json.loads(line)
            queries[str(query["_id"])] = query["text"]
    qrels = folder / "qrels.tsv"
    if not qrels.exists():
        qrels = folder / "qrels" / "test.tsv"
    judgements: dict[str, dict[str, float]] = {}
    for number, line in enumerate(qrels.read_text(encoding="utf-8").splitlines()):
        fields = line.split("\t")
        if not line.strip() or (number == 0 and not _is_number(fields[-1])):
            continue  # blank, or the header
        query_id, doc_id, score = fields[0], fields[1], float(fields[-1])
        if score > 0 and query_id in queries and doc_id in corpus:
            judgements.setdefault(query_id, {})[doc_id] = score
    return Dataset(corpus, queries, judgements)


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def recall(ranked: list[str], relevant: dict[str, float], k: int) -> float:
    return len(set(ranked[:k]) & relevant.keys()) / len(relevant)


def ndcg(ranked: list[str], relevant: dict[str, float], k: int = 10) -> float:
    gains = [relevant.get(doc, 0.0) for doc in ranked[:k]]
    dcg = sum(gain / math.log2(rank + 2) for rank, gain in enumerate(gains))
    ideal = sorted(relevant.values(), reverse=True)[:k]
    idcg = sum(gain / math.log2(rank + 2) for rank, gain in enumerate(ideal))
    return dcg / idcg if idcg else 0.0


async def evaluate(data: Dataset, embedder: Embedder, folder: Path) -> None:
    store = SqliteMemoryStore(folder / "eval.sqlite")
    await store.open()
    try:
        worker = create_memory_worker(store, embedder=embedder, track_usage=False)
        async with create_ditto(workers=[worker], config=None) as runtime:
            started = perf_counter()
            documents = list(data.corpus.items())
            for start in range(0, len(documents), BATCH):
                drafts = [
                    {"key": doc_id, "content": text}
                    for doc_id, text in documents[start : start + BATCH]
                ]
                (await runtime.invoke("MEMORY.WRITE", {"memories": drafts})).unwrap()
            index_seconds = perf_counter() - started
            print(
                f"indexed {len(documents):,} documents in {index_seconds:.1f} s "
                f"({len(documents) / index_seconds:,.0f} docs/s, embedder {embedder.model_id}); "
                f"{len(data.judgements):,} judged queries"
            )
            header = f"{'strategy':16}" + "".join(f" {'R@' + str(k):>6}" for k in CUTOFFS)
            print(f"{header} {'nDCG@10':>8} {'p50 ms':>7}")
            for name, strategy, options in STRATEGIES:
                scores: dict[str, list[float]] = {"ndcg": [], **{str(k): [] for k in CUTOFFS}}
                timings = []
                for query_id, relevant in data.judgements.items():
                    request = {
                        "query": data.queries[query_id],
                        "strategy": strategy,
                        "limit": max(CUTOFFS),
                        "options": options,
                    }
                    began = perf_counter()
                    result = await runtime.invoke("MEMORY.SEARCH", request)
                    timings.append((perf_counter() - began) * 1000)
                    ranked = [hit.memory.key for hit in result.unwrap().hits]
                    for k in CUTOFFS:
                        scores[str(k)].append(recall(ranked, relevant, k))
                    scores["ndcg"].append(ndcg(ranked, relevant))
                recalls = "".join(f" {statistics.fmean(scores[str(k)]):6.3f}" for k in CUTOFFS)
                quality = statistics.fmean(scores["ndcg"])
                print(f"{name:16}{recalls} {quality:8.3f} {statistics.median(timings):7.2f}")
    finally:
        await store.aclose()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=SAMPLE, help="a BEIR-format folder")
    parser.add_argument(
        "--embedder",
        choices=("minilm", "hashing"),
        default="minilm" if installed_model_dir() is not None else "hashing",
        help="minilm (default when installed) or hashing",
    )
    arguments = parser.parse_args()
    data = load(arguments.data)
    embedder: Embedder = MiniLMEmbedder() if arguments.embedder == "minilm" else HashingEmbedder()
    print(f"dataset {arguments.data}")
    with tempfile.TemporaryDirectory(prefix="ditto-retrieval-") as folder:
        asyncio.run(evaluate(data, embedder, Path(folder)))


if __name__ == "__main__":
    main()
