"""The approximate (HNSW) graph a :class:`~.vector_index.VectorIndex` answers from at scale.

Exact top-k is one matrix product over every row: fine to ~100k rows, ~10x slower at 1M. Above a
row threshold (:class:`AnnSettings`) the index also keeps an HNSW graph of its rows in usearch
(the ``ann`` extra) and ranks from it. The measurement that chose the library and the
parameters is in the README ("Approximate vectors"): usearch with ``dtype="f16"`` (f32 is
the other choice) and ``metric="ip"`` (its defaults, bf16 storage and a renormalising cosine,
lost recall), M 32.

One graph node per chunk row, keyed by a number that names the row's record (see
:func:`chunk_key`), so a hit maps back to its record without a table per row. The graph is
built in a background thread from a snapshot of the rows: a search never waits for it, exact
search answers until it is ready. Changes made while it builds are logged and replayed onto it
before it takes over, under the index's lock, so it never misses one.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from ditto.errors import InvalidInputError
from ditto.extras import install_hint

__all__ = (
    "CHUNK_BITS",
    "AnnSettings",
    "ApproximateIndex",
    "chunk_key",
    "new_graph",
    "record_of",
)

log = logging.getLogger(__name__)

CHUNK_BITS = 20
"""Low bits of a graph key that number a record's chunk (a record has < 2**20 chunks)."""

Keys = npt.NDArray[np.uint64]
_CATCH_UP = 2_000
"""Changes a finished build replays holding the lock; more are replayed outside it first."""
Starter = Callable[[Callable[[], None]], None]
"""Runs a build: by default in a daemon thread; a test may run it when it chooses."""


def chunk_key(serial: int, chunk: int) -> int:
    """The graph key of chunk ``chunk`` of the record numbered ``serial``."""
    return (serial << CHUNK_BITS) | chunk


def record_of(keys: Keys) -> npt.NDArray[np.uint64]:
    """The record numbers of graph keys."""
    return keys >> np.uint64(CHUNK_BITS)


@dataclass(frozen=True, slots=True)
class AnnSettings:
    """When and how a vector index keeps an approximate graph.

    Args:
        threshold: Rows (chunks) from which searches use the graph; ``None`` or 0: never
            (exact always). The graph is dropped again below half of it.
        connectivity: HNSW ``M``: edges per node (16 reached only 0.92 recall@10 at 1M).
        expansion_add: ``ef_construction``: candidates kept while linking a new node.
        expansion_search: ``ef``: candidates kept while searching (recall against speed).
        build_threads: Threads a build uses (0: every core).
        dtype: How the graph stores its copy of the vectors: ``f16`` (half precision, the
            default: half the memory, about twice as fast to build and search; recall@10 0.988
            at 1M, 0.9997 at 50k MiniLM-like rows, ``bench/ann_store.py --dtype``) or ``f32``.
    """

    threshold: int | None = 100_000
    connectivity: int = 32
    expansion_add: int = 200
    expansion_search: int = 512
    build_threads: int = 0
    dtype: str = "f16"

    def __post_init__(self) -> None:
        if self.dtype not in ("f32", "f16"):
            raise InvalidInputError("ann dtype must be f32 or f16")
        for name in ("connectivity", "expansion_add", "expansion_search"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or not 2 <= value <= 4096:
                raise InvalidInputError(f"ann {name} must be an integer from 2 to 4096")
        threshold = self.threshold
        if threshold is not None and (
            isinstance(threshold, bool) or not isinstance(threshold, int) or threshold < 0
        ):
            raise InvalidInputError("ann threshold must be a row count (0 or null: off)")
        if not isinstance(self.build_threads, int) or self.build_threads < 0:
            raise InvalidInputError("ann build_threads must be 0 (every core) or more")

    @property
    def enabled(self) -> bool:
        return bool(self.threshold)


class ApproximateIndex:
    """An HNSW graph over a vector index's rows, built in the background.

    Every method except the build itself is called holding the owning index's ``lock`` (the
    same lock is passed in, for the build's last step).

    Args:
        settings: The graph's parameters.
        dimension: Vector length.
        lock: The owning index's lock.
        starter: Runs the build function (default: a daemon thread).
    """

    def __init__(
        self,
        settings: AnnSettings,
        dimension: int,
        lock: threading.RLock,
        starter: Starter | None = None,
    ) -> None:
        self.settings = settings
        self.dimension = dimension
        self._lock = lock
        self._starter = starter or _thread
        self._graph: Any = None
        """The usearch index once built (searches use it from then on)."""
        self._pending: list[tuple[Keys, npt.NDArray[np.float32] | None]] | None = None
        """Changes made while building: (keys, vectors) adds, (keys, None) removes."""
        self.discarded = False
        self.failed: BaseException | None = None
        self.finished = threading.Event()
        """Set when a build ends: ready, failed or discarded."""

    @property
    def ready(self) -> bool:
        return self._graph is not None

    @property
    def building(self) -> bool:
        return self._pending is not None

    @property
    def graph(self) -> Any:
        """The usearch index (``None`` until built)."""
        return self._graph

    def adopt(self, graph: Any) -> None:
        """Use a graph built before (loaded from a file) instead of building one."""
        self._graph = graph
        self.finished.set()

    def start(self, keys: Keys, vectors: npt.NDArray[np.float32]) -> None:
        """Build the graph over a snapshot of the rows (``keys``/``vectors`` are the caller's
        copies), in the background."""
        self._pending = []
        self._starter(lambda: self._build(keys, vectors))

    def _build(self, keys: Keys, vectors: npt.NDArray[np.float32]) -> None:
        try:
            self._link(keys, vectors)
        finally:
            self.finished.set()

    def _link(self, keys: Keys, vectors: npt.NDArray[np.float32]) -> None:
        threads = self.settings.build_threads or os.cpu_count() or 1
        try:
            graph = new_graph(self.settings, self.dimension)
            step = 20_000  # batches: a discarded build stops within one
            for start in range(0, len(keys), step):
                if self.discarded:
                    return
                _apply(graph, keys[start : start + step], vectors[start : start + step], threads)
            del keys, vectors
            while True:
                with self._lock:
                    if self.discarded:
                        return
                    pending, self._pending = self._pending or [], []
                    if sum(len(changed) for changed, _ in pending) <= _CATCH_UP:
                        for changed, added in pending:
                            _apply(graph, changed, added, 1)
                        self._pending, self._graph = None, graph
                        return
                # Many changes came while it was building (a store loading its rows): apply
                # them outside the lock, then look again.
                for changed, added in pending:
                    _apply(graph, changed, added, threads)
        except Exception as exc:  # the graph is an optimisation: exact search goes on
            log.warning("building the approximate vector index failed: %s", exc)
            with self._lock:
                self.failed, self._pending = exc, None

    def add(self, keys: Keys, vectors: npt.NDArray[np.float32]) -> None:
        if self._graph is not None:
            # A batch (an import, a store loading other processes' rows) links on every core:
            # about a millisecond a row on one at 1M rows, and searches wait for it.
            threads = 1 if len(keys) < 256 else self.settings.build_threads or os.cpu_count() or 1
            _apply(self._graph, keys, vectors, threads)
        elif self._pending is not None:
            self._pending.append((keys.copy(), np.array(vectors, dtype=np.float32)))

    def remove(self, keys: Keys) -> None:
        if self._graph is not None:
            _apply(self._graph, keys, None)
        elif self._pending is not None:
            self._pending.append((keys.copy(), None))

    def search(self, query: npt.NDArray[np.float32], count: int) -> tuple[Keys, npt.NDArray[Any]]:
        """The keys of about the ``count`` nearest rows, nearest first, and their cosines."""
        found = self._graph.search(query, count, threads=1)
        return found.keys, 1.0 - found.distances

    def discard(self) -> None:
        """Drop the graph (a build under way stops at its next batch and is thrown away)."""
        self.discarded = True
        self._graph = None
        self._pending = None
        self.finished.set()

    @property
    def nodes(self) -> int:
        return len(self._graph) if self._graph is not None else 0


def _apply(
    graph: Any, keys: Keys, vectors: npt.NDArray[np.float32] | None, threads: int = 1
) -> None:
    """Remove ``keys`` from the graph (absent ones are skipped), then add ``vectors`` under
    them (an update is a removal and an add: a key is never in the graph twice)."""
    if not len(keys):
        return
    graph.remove(keys)
    if vectors is not None:
        graph.add(keys, np.ascontiguousarray(vectors, dtype=np.float32), threads=threads)


def new_graph(settings: AnnSettings, dimension: int) -> Any:
    try:
        from usearch.index import Index
    except ImportError as exc:
        raise ImportError(
            f"the approximate vector index needs usearch: {install_hint('ann')} "
            "(or set workers.memory.ann.threshold: null)"
        ) from exc
    return Index(
        ndim=dimension,
        metric="ip",  # rows are unit vectors: cosine is the inner product
        dtype=settings.dtype,
        connectivity=settings.connectivity,
        expansion_add=settings.expansion_add,
        expansion_search=settings.expansion_search,
    )


def _thread(build: Callable[[], None]) -> None:
    threading.Thread(target=build, name="ditto-ann-build", daemon=True).start()
