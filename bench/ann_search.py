"""HNSW libraries (faiss, hnswlib, usearch) against exact numpy top-k on realistic 384-d vectors.

Issue #26 item 5 asks for an ANN index above a size threshold: recall@10 against exact >= 0.98
at 1M records with p99 <= 20 ms, filters applied before the limit. This measures, per library
that is installed and per setting (``--builds`` M/ef_construction pairs, ``--efs`` ef_search):

* build time (all cores: ``--threads``), and memory as the growth of this process's resident
  set while the index is built (the vectors are copied into every index);
* recall@10 of 1,000 queries against exact numpy top-10 over the same matrix, and query
  latency p50/p99, one query per call, one thread, the indexes taking turns pass by pass
  (``timing.alternate``) so drift in machine load hits them alike; the ratio to exact numpy
  (``matrix @ q`` + ``argpartition``, single-threaded BLAS) at the same size, same run;
* a filtered search in which ~10% of the records are allowed, recall@10 among the allowed:
  faiss through ``IDSelectorBitmap`` in ``SearchParametersHNSW``, hnswlib through its
  ``filter`` callable (a Python call per visited node), usearch (no predicate in its Python
  API) by searching ``--overfetch`` x k / fraction and keeping the allowed.

The vectors are synthetic, drawn to look like all-MiniLM-L6-v2 vectors of real text
(``ann_vectors.py``; ``--calibrate`` prints the comparison).

Measured at 1,000,000 (2 cores shared with other agents, load 2-5): M16/efc128 gives the same
recall in all three libraries, 0.73/0.82/0.88/0.92 at ef 64/128/256/512 (p99 0.4-6.7 ms);
exact numpy p50 54-101 ms. hnswlib M32/efc200 (built in 763 s, +1.8 GiB): 0.983/0.992/0.996
at ef 512/1024/2048, p99 3.5/6.8/19.8 ms; with 10% allowed through its filter callable 0.998
at ef 512, p99 33 ms (a Python call per visited node).

Optional dependencies, never installed by the project::

    .venv/bin/pip install faiss-cpu hnswlib usearch

    python3 tasks.py bench ann_search          (100,000 records, one setting)
    .venv/bin/python bench/ann_search.py --sizes 1000000 --builds 32/200 --efs 64 128 256
    .venv/bin/python bench/ann_search.py --calibrate
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import importlib.util
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from ann_vectors import DIMENSION, K, Vectors, calibrate, exact_top, generate
from threadpoolctl import threadpool_limits
from timing import Figure, alternate, timed

TARGET_RECALL = 0.98
TARGET_P99_MS = 20.0
ALLOWED = 0.1


def recall(found: list[np.ndarray], truth: np.ndarray) -> float:
    return float(
        np.mean(
            [
                len(set(f[:K].tolist()) & set(t.tolist())) / K
                for f, t in zip(found, truth, strict=True)
            ]
        )
    )


def resident() -> int:
    """This process's resident set, bytes."""
    return int(Path("/proc/self/statm").read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE")


# -- libraries ---------------------------------------------------------------------------------


@dataclass
class Built:
    """One index: how to search it plain and with a filter, and what building it cost."""

    name: str
    search: Callable[[Vectors, int], np.ndarray]
    filtered: Callable[[Vectors, int], np.ndarray]
    set_ef: Callable[[int], None]
    seconds: float
    memory: int


def _faiss(base: Vectors, m: int, construction: int, allowed: np.ndarray) -> Built:
    import faiss

    index = faiss.IndexHNSWFlat(DIMENSION, m, faiss.METRIC_INNER_PRODUCT)
    index.hnsw.efConstruction = construction
    index.add(base)
    bitmap = np.packbits(allowed, bitorder="little")
    selector = faiss.IDSelectorBitmap(len(allowed), faiss.swig_ptr(bitmap))
    state: dict[str, Any] = {}

    def set_ef(ef: int) -> None:
        state["plain"] = faiss.SearchParametersHNSW(efSearch=ef)
        state["filtered"] = faiss.SearchParametersHNSW(efSearch=ef, sel=selector)
        state["keep"] = (bitmap, selector)

    def search(query: Vectors, k: int) -> np.ndarray:
        return index.search(query[None], k, params=state["plain"])[1][0]

    def filtered(query: Vectors, k: int) -> np.ndarray:
        return index.search(query[None], k, params=state["filtered"])[1][0]

    return Built("faiss", search, filtered, set_ef, 0.0, 0)


def _hnswlib(base: Vectors, m: int, construction: int, allowed: np.ndarray) -> Built:
    import hnswlib

    index = hnswlib.Index(space="ip", dim=DIMENSION)
    index.init_index(max_elements=len(base), ef_construction=construction, M=m)
    index.add_items(base, np.arange(len(base)), num_threads=os.cpu_count() or 1)
    permitted = set(np.flatnonzero(allowed).tolist())

    def search(query: Vectors, k: int) -> np.ndarray:
        return index.knn_query(query, k, num_threads=1)[0][0]

    def filtered(query: Vectors, k: int) -> np.ndarray:
        return index.knn_query(query, k, num_threads=1, filter=permitted.__contains__)[0][0]

    return Built("hnswlib", search, filtered, index.set_ef, 0.0, 0)


def _usearch(dtype: str, overfetch: int) -> Callable[[Vectors, int, int, np.ndarray], Built]:
    def build(base: Vectors, m: int, construction: int, allowed: np.ndarray) -> Built:
        from usearch.index import Index

        # metric "ip" on unit rows: "cos" (the default) divides by both norms on every distance.
        index = Index(
            ndim=DIMENSION, metric="ip", dtype=dtype, connectivity=m, expansion_add=construction
        )
        index.add(np.arange(len(base), dtype=np.uint64), base, threads=os.cpu_count() or 1)
        wider = int(np.ceil(K / ALLOWED)) * overfetch

        def set_ef(ef: int) -> None:
            index.expansion_search = ef

        def search(query: Vectors, k: int) -> np.ndarray:
            return index.search(query, k, threads=1).keys

        def filtered(query: Vectors, k: int) -> np.ndarray:
            keys = index.search(query, wider, threads=1).keys
            return keys[allowed[keys]][:k]

        return Built(f"usearch-{dtype}", search, filtered, set_ef, 0.0, 0)

    return build


def libraries(overfetch: int) -> dict[str, Callable[[Vectors, int, int, np.ndarray], Built]]:
    """The installed ones, by name (a missing one is named with the command that installs it)."""
    table: dict[str, tuple[str, Callable[[Vectors, int, int, np.ndarray], Built]]] = {
        "faiss": ("faiss", _faiss),
        "hnswlib": ("hnswlib", _hnswlib),
        "usearch-f32": ("usearch", _usearch("f32", overfetch)),
        "usearch-bf16": ("usearch", _usearch("bf16", overfetch)),
    }
    found = {}
    for name, (module, build) in table.items():
        if importlib.util.find_spec(module) is None:
            print(
                f"  {name}: skipped, not installed "
                f"(.venv/bin/pip install {module.replace('faiss', 'faiss-cpu')})"
            )
        else:
            found[name] = build
    return found


def _built(
    build: Callable[..., Built], base: Vectors, m: int, construction: int, allowed: np.ndarray
) -> Built:
    gc.collect()
    before, started = resident(), time.perf_counter()
    index = build(base, m, construction, allowed)
    index.seconds, index.memory = time.perf_counter() - started, resident() - before
    return index


# -- runs --------------------------------------------------------------------------------------


def measure(
    size: int,
    queries: int,
    builds: list[tuple[int, int]],
    efs: list[int],
    rounds: int,
    overfetch: int,
    chosen: list[str],
) -> None:
    started = time.perf_counter()
    base, questions = generate(size, queries)
    allowed = np.random.default_rng(3).random(size) < ALLOWED
    truth = exact_top(base, questions)
    rows = np.flatnonzero(allowed)
    truth_allowed = rows[exact_top(base[rows], questions)]
    print(
        f"{size:,} records x {DIMENSION}-d, {queries:,} queries: data and exact truth "
        f"{time.perf_counter() - started:.0f} s, load {os.getloadavg()[0]:.1f}",
        flush=True,
    )

    with threadpool_limits(1):
        exact = _alternate(
            {"exact": lambda: timed([lambda q=q: _numpy_top(base, q) for q in questions[:100]])},
            rounds,
        )["exact"]
        exact_allowed = _alternate(
            {
                "exact": lambda: timed(
                    [lambda q=q: _numpy_filtered(base, allowed, q) for q in questions[:100]]
                )
            },
            rounds,
        )["exact"]
    exact_p50, exact_p99 = exact.latency(0.5).median, exact.latency(0.99).median
    print(
        f"  exact numpy, 1 thread: p50 {exact_p50:.1f} ms  p99 {exact_p99:.1f} ms; "
        f"filtered (mask, then product) p50 {exact_allowed.latency(0.5).median:.1f} ms"
    )

    indexes: dict[str, Built] = {}
    for name, build in libraries(overfetch).items():
        if chosen and name not in chosen:
            continue
        for m, construction in builds:
            _limit_faiss(os.cpu_count() or 1)
            index = _built(build, base, m, construction, allowed)
            _limit_faiss(1)
            label = f"{name} M{m}/efc{construction}"
            indexes[label] = index
            print(
                f"  built {label}: {index.seconds:.0f} s, +{index.memory / 2**20:,.0f} MiB, "
                f"load {os.getloadavg()[0]:.1f}",
                flush=True,
            )

    print(
        f"  {'index':28} {'ef':>4} {'recall@10':>9} {'p50 ms':>7} {'p99 ms':>7} {'p99/exact':>9} "
        f"{'filtered recall':>15} {'f p50':>6} {'f p99':>6}"
    )
    for ef in efs:
        for index in indexes.values():
            index.set_ef(ef)
        results = {
            label: [index.search(q, K) for q in questions] for label, index in indexes.items()
        }
        filtered = {
            label: [index.filtered(q, K) for q in questions] for label, index in indexes.items()
        }
        plain = _alternate(
            {label: _pass(index.search, questions) for label, index in indexes.items()}, rounds
        )
        sieved = _alternate(
            {label: _pass(index.filtered, questions) for label, index in indexes.items()}, rounds
        )
        for label in indexes:
            hit, p50, p99 = (
                recall(results[label], truth),
                plain[label].latency(0.5).median,
                plain[label].latency(0.99).median,
            )
            mark = "*" if hit >= TARGET_RECALL and p99 <= TARGET_P99_MS else " "
            print(
                f"  {label:28} {ef:>4} {hit:>9.4f} {p50:>7.2f} {p99:>7.2f} {p99 / exact_p99:>9.3f} "
                f"{recall(filtered[label], truth_allowed):>15.4f} "
                f"{sieved[label].latency(0.5).median:>6.2f} "
                f"{sieved[label].latency(0.99).median:>6.2f} {mark}",
                flush=True,
            )
    print(
        f"  * recall@10 >= {TARGET_RECALL} and p99 <= {TARGET_P99_MS} ms; "
        f"load {os.getloadavg()[0]:.1f}"
    )


def _alternate(systems: dict[str, Callable[[], list[float]]], rounds: int) -> dict[str, Figure]:
    return asyncio.run(alternate(dict(systems), rounds))


def _pass(
    search: Callable[[Vectors, int], np.ndarray], questions: Vectors
) -> Callable[[], list[float]]:
    return lambda: timed([lambda q=q: search(q, K) for q in questions])


def _numpy_top(base: Vectors, query: Vectors) -> np.ndarray:
    scores = base @ query
    top = np.argpartition(-scores, K - 1)[:K]
    return top[np.argsort(-scores[top])]


def _numpy_filtered(base: Vectors, allowed: np.ndarray, query: Vectors) -> np.ndarray:
    rows = np.flatnonzero(allowed)
    return rows[_numpy_top(base[rows], query)]


def _limit_faiss(threads: int) -> None:
    if importlib.util.find_spec("faiss") is not None:
        import faiss

        faiss.omp_set_num_threads(threads)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[100_000])
    parser.add_argument("--queries", type=int, default=1_000)
    parser.add_argument("--builds", nargs="+", default=["16/128"], help="M/ef_construction pairs")
    parser.add_argument("--efs", type=int, nargs="+", default=[64, 128, 256])
    parser.add_argument(
        "--libraries", nargs="*", default=[], help="only these (default: all installed)"
    )
    parser.add_argument("--rounds", type=int, default=2, help="timed passes over the queries")
    parser.add_argument(
        "--overfetch", type=int, default=2, help="usearch filtered: k / fraction x this"
    )
    parser.add_argument(
        "--calibrate", action="store_true", help="compare the generator with MiniLM vectors"
    )
    parser.add_argument("--sentences", type=int, default=2_000, help="--calibrate: texts to embed")
    arguments = parser.parse_args()
    if arguments.calibrate:
        calibrate(arguments.sentences)
    else:
        pairs = [tuple(int(part) for part in build.split("/")) for build in arguments.builds]
        for size in arguments.sizes:
            measure(
                size,
                arguments.queries,
                pairs,
                arguments.efs,
                arguments.rounds,
                arguments.overfetch,
                arguments.libraries,
            )  # type: ignore[arg-type]
