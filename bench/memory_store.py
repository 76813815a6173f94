"""MEMORY on the embedded SQLite store beside raw ``sqlite3`` and LangGraph's ``SqliteStore``,
same run, defaults on (usage tracking included).

Three systems, measured in turns (``timing.alternate``: every round runs each system once, the
first one rotating; figures are the median over rounds with the lowest and highest round):

* **Ditto** — ``runtime.invoke("MEMORY.…")`` on a ``SqliteMemoryStore``: validation, access
  rules, history, keyword index and usage tracking included.
* **raw sqlite3** — the plain thing one would write on the same file layout: the same INSERTs
  (record, keyword index row, history row) in one transaction per batch; ``SELECT`` by id with
  the JSON columns decoded; a plain FTS5 ``MATCH`` of the query's words ranked by ``bm25``.
* **LangGraph** — ``langgraph.store.sqlite.SqliteStore`` doing the same puts and gets (it keeps
  no keyword index and no history; install with ``pip install -e '.[bench]'``).

Measured:

* **WRITE** — batches of 1,000; single records one after another; single records from 32
  concurrent callers (where group commit shares one transaction among queued writes).
* For each corpus size (default 10,000 and 100,000 records of Zipf-distributed synthetic text):
  **GET by id**, **QUERY page of 100**, and keyword **SEARCH** p50 / p99 (through the runtime,
  and the store's own ``search`` without it) beside plain FTS5 OR and AND queries of the same
  words, alternated in the same rounds, with the top-10 overlap against exact BM25 (FTS5 ranking
  every record that holds any of the query's words; target >= 0.99 at every size).

* **Vector ANN** (``ann_store.py``, after the rest, unless ``--skip-vectors``): at each size,
  the stores' vector index with its HNSW graph against its own exact search — recall@10 and
  p50 / p99 of both, alternating — on synthetic MiniLM-like vectors (``ann_vectors.py``).

Targets: WRITE batch >= 25,000 records/s; single writes (concurrent callers) >= 5,000/s; GET
by id <= 2x raw; SEARCH at 100,000 records and more p50 <= 5 ms and p99 <= 20 ms; at 10,000
records the store's keyword search no slower than the plain FTS5 OR query. The PostgreSQL store
has its own bench (``bench/postgres_store.py``).

    python3 tasks.py bench memory_store
    .venv/bin/python bench/memory_store.py --sizes 10000 --rounds 3
    .venv/bin/python bench/memory_store.py --sizes 10000,100000,1000000 --skip-writes \
        --cache /tmp/ditto-bench-cache

``--cache`` keeps each generated store in that folder and reuses it (a 1M store takes minutes
to write); keep it under ``/tmp``, never in the repository. Cached sizes skip LangGraph.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import itertools
import json
import random
import sqlite3
import statistics
import sys
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from time import perf_counter
from typing import Any, ClassVar

import msgspec
from timing import Figure, Spread, alternate, timed, timed_async

from ditto import Ditto, create_ditto
from workers.memory import (
    MemoryDraft,
    MemoryItem,
    SearchInput,
    SqliteMemoryStore,
    create_memory_worker,
)
from workers.memory.model.planning import new_item
from workers.memory.model.records import to_micros, utc_now
from workers.memory.retrieval.text import query_words
from workers.memory.stores.sqlite.sql import COLUMNS, INSERT_COLUMNS, fts_row, item_row

BATCH = 1_000
CONCURRENT_CALLERS = 32
INSERT = (
    f"INSERT INTO memories ({INSERT_COLUMNS}) "
    f"VALUES ({', '.join('?' * len(INSERT_COLUMNS.split(',')))})"
)
FTS_INSERT = "INSERT INTO memory_fts(rowid, key, summary, body) VALUES (?, ?, ?, ?)"
HISTORY_INSERT = (
    "INSERT INTO memory_history (id, version, change, at, record) VALUES (?, ?, ?, ?, ?)"
)
TARGETS = {
    "batch": 25_000.0,
    "single": 5_000.0,
    "get": 2.0,
    "p50": 5.0,
    "p99": 20.0,
    "overlap": 0.99,
    "plain": 1.0,
}


# ------------------------------------------------------------------------------ corpus


class Corpus:
    """Deterministic synthetic text: a few hundred very common words (including stop words) and
    a long tail of rare ones, drawn Zipf-like so frequent terms hit most records."""

    COMMON: tuple[str, ...] = tuple(
        """
        the of and to in is for that with on as it be by this are from or at an was memory
        context agent data user task store search record time work system session model note
        plan tool result value file run state cache query index update delete write
        """.split()  # noqa: SIM905 - a word list reads better as text
    )

    def __init__(self, seed: int = 7, vocabulary: int = 30_000) -> None:
        self.random = random.Random(seed)
        syllables = ["ka", "lo", "mi", "ne", "ru", "sa", "ti", "vo", "ze", "pa", "qui", "dro"]
        rare = {
            "".join(self.random.choice(syllables) for _ in range(self.random.randint(2, 4)))
            for _ in range(vocabulary)
        }
        self.words = [*self.COMMON, *sorted(rare - set(self.COMMON))]
        self.weights = [1.0 / (rank + 1) ** 1.07 for rank in range(len(self.words))]
        # Summed once: random.choices would sum 30,000 weights for every sentence (the same
        # floats, so the same draws).
        self.cumulative = list(itertools.accumulate(self.weights))

    def sentence(self, length: int) -> str:
        return " ".join(self.random.choices(self.words, cum_weights=self.cumulative, k=length))

    def drafts(self, count: int) -> list[MemoryDraft]:
        return [
            MemoryDraft(
                content={"text": self.sentence(self.random.randint(15, 45))},
                summary=self.sentence(5),
                namespace=self.random.choice(("alice", "bob", "team")),
                tags=[self.random.choice(("fact", "pref", "event"))],
            )
            for _ in range(count)
        ]

    def questions(self, count: int) -> list[str]:
        starts = ("how do I", "what is the", "where did we", "why does the", "when was the")
        questions = []
        for _ in range(count):
            picked = [
                self.random.choice(self.words[:40]),  # frequent
                self.words[self.random.randint(40, 400)],  # mid
                self.words[self.random.randint(400, len(self.words) - 1)],  # rare
            ]
            self.random.shuffle(picked)
            questions.append(f"{self.random.choice(starts)} {' '.join(picked)}?")
        return questions


# ------------------------------------------------------------------------------ raw sqlite3


def raw_connection(path: Path) -> sqlite3.Connection:
    """A plain connection with the store's durability settings (WAL, synchronous NORMAL)."""
    connection = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    connection.execute("PRAGMA journal_mode = WAL")
    connection.execute("PRAGMA synchronous = NORMAL")
    return connection


def raw_write_batch(connection: sqlite3.Connection, drafts: Sequence[MemoryDraft]) -> None:
    now = utc_now()
    items = [new_item(draft, now) for draft in drafts]
    connection.execute("BEGIN IMMEDIATE")
    connection.executemany(INSERT, [item_row(item) for item in items])
    last = connection.execute("SELECT last_insert_rowid()").fetchone()[0]
    first = last - len(items) + 1
    connection.executemany(
        FTS_INSERT, [(first + offset, *fts_row(item)) for offset, item in enumerate(items)]
    )
    connection.executemany(HISTORY_INSERT, [history_row(item) for item in items])
    connection.execute("COMMIT")


def history_row(item: MemoryItem) -> tuple[Any, ...]:
    """The history entry the store appends for a created record (the same SQL, by hand)."""
    record = msgspec.json.encode(item).decode()
    return (item.id, item.version, "create", to_micros(item.updated_at), record)


_RAW_GET = f"SELECT {COLUMNS} FROM memories m WHERE m.id = ?"


def raw_get(connection: sqlite3.Connection, item_id: str) -> dict[str, Any] | None:
    """A record by id as a dict, its JSON columns decoded."""
    row = connection.execute(_RAW_GET, (item_id,)).fetchone()
    if row is None:
        return None
    names = ("id", "key", "namespace", "content", "summary", "category")
    record = dict(zip(names, row[:6], strict=True))
    record.update(content=json.loads(row[3]), tags=json.loads(row[6]), metadata=json.loads(row[7]))
    return record


def plain_search(
    connection: sqlite3.Connection, words: Sequence[str], joiner: str, limit: int = 10
) -> list[Any]:
    """A plain FTS5 query: the words joined by OR (or AND), ranked by bm25, ties by id."""
    expression = f" {joiner} ".join('"' + word.replace('"', '""') + '"' for word in words)
    return connection.execute(
        f"SELECT {COLUMNS} FROM memory_fts JOIN memories m ON m.seq = memory_fts.rowid "
        "WHERE memory_fts MATCH ? ORDER BY bm25(memory_fts), m.id LIMIT ?",
        (expression, limit),
    ).fetchall()


# ------------------------------------------------------------------------------ LangGraph


class LangGraph:
    """LangGraph's SqliteStore on its own file, or ``None`` when it is not installed."""

    NAMESPACES: ClassVar[dict[str, tuple[str, ...]]] = {
        "alice": ("alice",),
        "bob": ("bob",),
        "team": ("team",),
    }

    def __init__(self, path: Path) -> None:
        from langgraph.store.sqlite import SqliteStore

        self._context = SqliteStore.from_conn_string(str(path))
        self.store = self._context.__enter__()
        self.store.setup()

    @classmethod
    def open(cls, path: Path) -> LangGraph | None:
        try:
            return cls(path)
        except ImportError:
            return None

    def close(self) -> None:
        self._context.__exit__(None, None, None)

    def put_batch(self, drafts: Sequence[MemoryDraft], keys: Sequence[str]) -> None:
        from langgraph.store.base import PutOp

        self.store.batch(
            [
                PutOp(self.NAMESPACES[draft.namespace], key, _value(draft), index=False)
                for draft, key in zip(drafts, keys, strict=True)
            ]
        )

    def put(self, draft: MemoryDraft, key: str) -> None:
        self.store.put(self.NAMESPACES[draft.namespace], key, _value(draft), index=False)

    def get(self, namespace: str, key: str) -> Any:
        return self.store.get(self.NAMESPACES[namespace], key)


def _value(draft: MemoryDraft) -> dict[str, Any]:
    return {"content": draft.content, "summary": draft.summary, "tags": draft.tags}


# ------------------------------------------------------------------------------ rows


@dataclass
class Row:
    name: str
    unit: str
    ditto: Spread
    raw: Spread | None = None
    langgraph: Spread | None = None
    verdict: str = ""


def verdict(value: float, target: float, higher_is_better: bool, what: str) -> str:
    met = value >= target if higher_is_better else value <= target
    sign = ">=" if higher_is_better else "<="
    return f"{'met' if met else 'MISSED'} ({what} {sign} {target:g})"


def print_rows(rows: Sequence[Row]) -> None:
    print()
    print(
        f"{'measurement':38} {'Ditto':>22} {'raw sqlite3':>22} {'LangGraph':>22} "
        f"{'Ditto/raw':>9}  target"
    )
    for row in rows:
        cells = [
            f"{spread.show(1 if row.unit != 'ms' else 2):>22}" if spread else f"{'-':>22}"
            for spread in (row.ditto, row.raw, row.langgraph)
        ]
        ratio = f"{row.ditto.median / row.raw.median:8.2f}x" if row.raw else f"{'':9}"
        print(f"{row.name + ' (' + row.unit + ')':38} {' '.join(cells)} {ratio}  {row.verdict}")
    print("(median over rounds [lowest-highest round]; throughput: higher is better,")
    print(" latency: lower is better)")


# ------------------------------------------------------------------------------ writes


async def measure_writes(directory: Path, corpus: Corpus, rounds: int, batches: int) -> list[Row]:
    singles = 300
    per_round = batches * BATCH
    plan = {
        system: [
            (corpus.drafts(per_round), corpus.drafts(singles), corpus.drafts(singles))
            for _ in range(rounds)
        ]
        for system in ("ditto", "raw", "langgraph")
    }
    keys = iter(range(10**9))
    async with SqliteMemoryStore(directory / "write-ditto.sqlite") as store:
        async with create_ditto(workers=[create_memory_worker(store)], config=None) as runtime:
            async with SqliteMemoryStore(directory / "write-raw.sqlite"):
                pass  # the schema the raw side writes into
            connection = raw_connection(directory / "write-raw.sqlite")
            langgraph = LangGraph.open(directory / "write-langgraph.sqlite")
            state = {"ditto": 0, "raw": 0, "langgraph": 0}

            def work(system: str) -> tuple[list[MemoryDraft], list[MemoryDraft], list[MemoryDraft]]:
                drafts = plan[system][state[system]]
                state[system] += 1
                return drafts

            async def ditto_batches() -> list[float]:
                drafts, _, _ = plan["ditto"][state["ditto"]]
                return await timed_async(
                    [_write(runtime, drafts[n : n + BATCH]) for n in range(0, per_round, BATCH)]
                )

            batch_systems: dict[str, Callable[[], Any]] = {
                "ditto": ditto_batches,
                "raw": lambda: timed(
                    [
                        lambda n=n: raw_write_batch(
                            connection, plan["raw"][state["raw"]][0][n : n + BATCH]
                        )
                        for n in range(0, per_round, BATCH)
                    ]
                ),
            }
            if langgraph is not None:
                batch_systems["langgraph"] = lambda: timed(
                    [
                        lambda n=n: langgraph.put_batch(
                            plan["langgraph"][state["langgraph"]][0][n : n + BATCH],
                            [f"k{next(keys)}" for _ in range(BATCH)],
                        )
                        for n in range(0, per_round, BATCH)
                    ]
                )

            async def ditto_singles() -> list[float]:
                _, drafts, _ = work("ditto")
                return await timed_async([_write(runtime, [draft]) for draft in drafts])

            single_systems: dict[str, Callable[[], Any]] = {
                "ditto": ditto_singles,
                "raw": lambda: timed(
                    [lambda d=d: raw_write_batch(connection, [d]) for d in work("raw")[1]]
                ),
            }
            if langgraph is not None:
                single_systems["langgraph"] = lambda: timed(
                    [lambda d=d: langgraph.put(d, f"k{next(keys)}") for d in work("langgraph")[1]]
                )

            async def ditto_concurrent() -> list[float]:
                drafts = plan["ditto"][state["ditto"] - 1][2]
                share = len(drafts) // CONCURRENT_CALLERS
                began = perf_counter()

                async def caller(mine: Sequence[MemoryDraft]) -> None:
                    for draft in mine:
                        await _write(runtime, [draft])()

                await asyncio.gather(
                    *(
                        caller(drafts[n * share : (n + 1) * share])
                        for n in range(CONCURRENT_CALLERS)
                    )
                )
                elapsed = perf_counter() - began
                return [elapsed / (share * CONCURRENT_CALLERS)] * (share * CONCURRENT_CALLERS)

            batch = await alternate(batch_systems, rounds)
            single = await alternate(single_systems, rounds)
            concurrent = await alternate({"ditto": ditto_concurrent}, rounds)
            connection.close()
            if langgraph is not None:
                langgraph.close()
            else:
                print("LangGraph column skipped: pip install -e '.[bench]' adds it")

    def rates(figures: dict[str, Figure], per_call: int) -> dict[str, Spread]:
        return {name: figure.rate(per_call) for name, figure in figures.items()}

    batch_rates, single_rates = rates(batch, BATCH), rates(single, 1)
    concurrent_rate = concurrent["ditto"].rate(1)
    return [
        Row(
            "WRITE batch of 1,000",
            "rec/s",
            batch_rates["ditto"],
            batch_rates["raw"],
            batch_rates.get("langgraph"),
            verdict(batch_rates["ditto"].median, TARGETS["batch"], True, "rec/s"),
        ),
        Row(
            "WRITE single, one caller",
            "rec/s",
            single_rates["ditto"],
            single_rates["raw"],
            single_rates.get("langgraph"),
        ),
        Row(
            f"WRITE single, {CONCURRENT_CALLERS} callers",
            "rec/s",
            concurrent_rate,
            single_rates["raw"],
            single_rates.get("langgraph"),
            verdict(concurrent_rate.median, TARGETS["single"], True, "rec/s"),
        ),
    ]


def _write(runtime: Ditto, drafts: Sequence[MemoryDraft]) -> Callable[[], Any]:
    async def call() -> None:
        (await runtime.invoke("MEMORY.WRITE", {"memories": drafts})).unwrap()

    return call


# ------------------------------------------------------------------------------ reads


async def build(path: Path, corpus: Corpus, size: int, langgraph: LangGraph | None) -> None:
    async with SqliteMemoryStore(path) as store:
        async with create_ditto(workers=[create_memory_worker(store)], config=None) as runtime:
            for start in range(0, size, BATCH):
                drafts = corpus.drafts(min(BATCH, size - start))
                items = (await runtime.invoke("MEMORY.WRITE", {"memories": drafts})).unwrap()
                if langgraph is not None:  # the same records under the same ids
                    langgraph.put_batch(drafts, [item.id for item in items.items])
                print(f"\r  building {start + len(drafts):,}/{size:,} records", end="", flush=True)
    print()


async def measure_reads(
    path: Path, langgraph: LangGraph | None, corpus: Corpus, size: int, rounds: int, queries: int
) -> list[Row]:
    connection = raw_connection(path)
    records = connection.execute("SELECT id, namespace FROM memories").fetchall()
    picked = corpus.random.sample(records, min(500, len(records)))
    questions = corpus.questions(queries)
    words = [query_words(question) for question in questions]
    async with SqliteMemoryStore(path) as store:
        async with create_ditto(workers=[create_memory_worker(store)], config=None) as runtime:

            async def get(item_id: str) -> None:
                (await runtime.invoke("MEMORY.GET", {"ids": [item_id]})).unwrap()

            async def page() -> None:
                (await runtime.invoke("MEMORY.QUERY", {"limit": 100})).unwrap()

            async def search(question: str) -> list[str]:
                result = await runtime.invoke("MEMORY.SEARCH", {"query": question})
                return [hit.memory.id for hit in result.unwrap().hits]

            async def store_search(question: str) -> None:
                await store.search(SearchInput(query=question, limit=10))

            for question in questions[:20]:  # warm both sides' caches alike
                await search(question)
                plain_search(connection, query_words(question), "OR")
            gets: dict[str, Callable[[], Any]] = {
                "ditto": lambda: timed_async([lambda i=i: get(i) for i, _ in picked]),
                "raw": lambda: timed([lambda i=i: raw_get(connection, i) for i, _ in picked]),
            }
            if langgraph is not None:
                gets["langgraph"] = lambda: timed(
                    [lambda i=i, n=n: langgraph.get(n, i) for i, n in picked]
                )
            page_sql = f"SELECT {COLUMNS} FROM memories m ORDER BY m.created_at, m.id LIMIT 101"
            pages: dict[str, Callable[[], Any]] = {
                "ditto": lambda: timed_async([page] * 100),
                "raw": lambda: timed([lambda: connection.execute(page_sql).fetchall()] * 100),
            }
            searches: dict[str, Callable[[], Any]] = {
                "ditto": lambda: timed_async([lambda q=q: search(q) for q in questions]),
                "store": lambda: timed_async([lambda q=q: store_search(q) for q in questions]),
                "plain OR": lambda: timed(
                    [lambda w=w: plain_search(connection, w, "OR") for w in words]
                ),
                "plain AND": lambda: timed(
                    [lambda w=w: plain_search(connection, w, "AND") for w in words]
                ),
            }
            got = await alternate(gets, rounds)
            paged = await alternate(pages, rounds)
            searched = await alternate(searches, rounds)
            overlap = []
            for question, terms in zip(questions, words, strict=True):
                exact = [row[0] for row in plain_search(connection, terms, "OR")]
                if exact:
                    found = await search(question)
                    overlap.append(len(set(found) & set(exact)) / len(exact))
    connection.close()

    label = f"{size // 1000}k"
    get_us = {name: figure.latency(0.5, 1e6) for name, figure in got.items()}
    page_us = {name: figure.latency(0.5, 1e6) for name, figure in paged.items()}
    rows = [
        Row(
            f"GET by id, {label}",
            "µs",
            get_us["ditto"],
            get_us["raw"],
            get_us.get("langgraph"),
            verdict(get_us["ditto"].median / get_us["raw"].median, TARGETS["get"], False, "x raw"),
        ),
        Row(f"QUERY page of 100, {label}", "µs", page_us["ditto"], page_us["raw"]),
    ]
    for share in (0.5, 0.99):
        name = f"p{round(share * 100)}"
        ours = searched["ditto"].latency(share)
        target = ""
        if size >= 100_000:
            target = verdict(ours.median, TARGETS[name], False, "ms")
        rows.append(
            Row(
                f"SEARCH {name}, {label}",
                "ms",
                ours,
                searched["plain OR"].latency(share),
                None,
                target,
            )
        )
        direct = searched["store"].latency(share)
        plain = searched["plain OR"].latency(share)
        rows.append(
            Row(
                f"  store.search {name}, {label}",
                "ms",
                direct,
                plain,
                None,
                verdict(direct.median / plain.median, TARGETS["plain"], False, "x plain OR")
                if size <= 10_000
                else "",
            )
        )
        rows.append(
            Row(f"  plain FTS5 AND {name}, {label}", "ms", searched["plain AND"].latency(share))
        )
    agreement = statistics.fmean(overlap)
    print(
        f"  {label}: top-10 overlap of SEARCH with exact BM25 (every record holding any query "
        f"word): {agreement:.3f} over {len(overlap)} queries, "
        + verdict(agreement, TARGETS["overlap"], True, "overlap")
    )
    return rows


# ------------------------------------------------------------------------------ main


def cached_store(cache: Path, size: int) -> tuple[Path, Path | None]:
    """The cached store of ``size`` records, and where to build it first if it is missing."""
    cache.mkdir(parents=True, exist_ok=True)
    path = cache / f"corpus-{size}.sqlite"
    if path.exists():
        return path, None
    building = path.with_name(path.name + ".building")
    for leftover in cache.glob(building.name + "*"):  # with its -wal and -shm
        leftover.unlink()
    return path, building


async def main(
    sizes: Sequence[int],
    rounds: int,
    queries: int,
    batches: int,
    cache: Path | None = None,
    writes: bool = True,
    vectors: bool = True,
) -> None:
    corpus = Corpus()
    rows: list[Row] = []
    print(f"sqlite {sqlite3.sqlite_version}, python {sys.version.split()[0]}, {rounds} rounds")
    with tempfile.TemporaryDirectory(prefix="ditto-bench-") as temporary:
        directory = Path(temporary)
        if writes:
            rows += await measure_writes(directory, corpus, rounds, batches)
            gc.collect()
        for size in sizes:
            langgraph = None
            if cache is None:
                path = directory / f"corpus-{size}.sqlite"
                langgraph = LangGraph.open(directory / f"corpus-{size}-langgraph.sqlite")
                await build(path, corpus, size, langgraph)
            else:
                path, building = cached_store(cache, size)
                if building is not None:
                    await build(building, corpus, size, None)
                    building.rename(path)  # only a finished store is ever reused
                print(f"  {size:,} records: cached store {path}")
            rows += await measure_reads(path, langgraph, corpus, size, rounds, queries)
            if langgraph is not None:
                langgraph.close()
            gc.collect()
    print_rows(rows)
    print("(SEARCH's raw column is the plain FTS5 OR query of the same words)")
    if vectors:
        import ann_store

        from workers.memory.retrieval.ann_index import AnnSettings

        print("vector ANN (the stores' VectorIndex, its graph against its exact search):")
        await ann_store.main(list(sizes), min(queries * 2, 500), rounds, AnnSettings())


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10000,100000", help="corpus sizes, comma-separated")
    parser.add_argument("--rounds", type=int, default=5, help="rounds per measurement")
    parser.add_argument("--queries", type=int, default=150, help="SEARCH calls per round")
    parser.add_argument("--batches", type=int, default=4, help="WRITE batches of 1,000 per round")
    parser.add_argument("--cache", type=Path, help="a folder to keep generated stores in (/tmp)")
    parser.add_argument("--skip-writes", action="store_true", help="measure reads only")
    parser.add_argument("--skip-vectors", action="store_true", help="no vector ANN measurement")
    arguments = parser.parse_args()
    sizes = [int(size) for size in arguments.sizes.split(",")]
    asyncio.run(
        main(
            sizes,
            arguments.rounds,
            arguments.queries,
            arguments.batches,
            arguments.cache,
            not arguments.skip_writes,
            not arguments.skip_vectors,
        )
    )
