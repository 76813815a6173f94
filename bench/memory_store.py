"""MEMORY on the embedded SQLite store against raw ``sqlite3`` running the same SQL, same run.

Measured, for each corpus size (default 10,000 and 100,000 records of synthetic text with a
Zipf-distributed vocabulary, so some words are in most records and most words are rare):

* **WRITE throughput** — batches of 1,000 and single-record writes through
  ``runtime.invoke("MEMORY.WRITE")``, against raw ``sqlite3`` executing the same INSERTs (records
  and FTS rows) in one transaction per batch, with the same JSON encoding.
* **GET by id** and **QUERY page of 100** — through the runtime, against the same SELECT.
* **Keyword SEARCH p50 / p99** — natural-language questions through ``MEMORY.SEARCH``, against
  raw ``sqlite3`` running the store's planned statements (tokenize, vocabulary lookup, ranked
  MATCH) on one connection. For context it also times the two naive plans the planner avoids: an
  OR of every query word and an AND of two frequent words.

Targets: write throughput >= 50% of raw; SEARCH p50 <= 1.5x raw and p99 <= 20 ms at 100k.

With ``--postgres URL`` (default ``$DITTO_TEST_POSTGRES_URL``) it adds the PostgreSQL column:
WRITE batches and SEARCH p50/p99 through ``PostgresMemoryStore`` against raw asyncpg running the
same SQL (targets: >= 70% of raw write throughput, SEARCH p50 <= 1.5x raw).
Ratios are what count: absolute numbers depend on the machine.

    python3 tasks.py bench memory_store
    .venv/bin/python bench/memory_store.py --sizes 10000 --queries 100
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import random
import sqlite3
import statistics
import sys
import tempfile
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from time import perf_counter
from typing import Any

import msgspec

from ditto import Ditto, create_ditto
from workers.memory import (
    MemoryDraft,
    MemoryFilter,
    MemoryItem,
    SqliteMemoryStore,
    create_memory_worker,
)
from workers.memory.records import new_item, to_micros, utc_now
from workers.memory.search.text import query_words
from workers.memory.stores.sqlite.search import DEFAULT_BUDGET, KeywordPlanner, keyword_search
from workers.memory.stores.sqlite.sql import COLUMNS, INSERT_COLUMNS, connect, fts_row, item_row

BATCH = 1_000
SINGLE_WRITES = 500
POINT_READS = 2_000
PAGES = 300
INSERT = (
    f"INSERT INTO memories ({INSERT_COLUMNS}) "
    f"VALUES ({', '.join('?' * len(INSERT_COLUMNS.split(',')))})"
)
FTS_INSERT = "INSERT INTO memory_fts(rowid, key, summary, body) VALUES (?, ?, ?, ?)"
HISTORY_INSERT = (
    "INSERT INTO memory_history (id, version, change, at, record) VALUES (?, ?, ?, ?, ?)"
)


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

    def sentence(self, length: int) -> str:
        return " ".join(self.random.choices(self.words, self.weights, k=length))

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


# ------------------------------------------------------------------------------ timing


def percentile(samples: Sequence[float], fraction: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


async def timed_async(calls: Sequence[Callable[[], Awaitable[Any]]]) -> list[float]:
    samples = []
    for call in calls:
        started = perf_counter()
        await call()
        samples.append(perf_counter() - started)
    return samples


def timed(calls: Sequence[Callable[[], Any]]) -> list[float]:
    samples = []
    for call in calls:
        started = perf_counter()
        call()
        samples.append(perf_counter() - started)
    return samples


async def interleaved(
    pairs: Sequence[tuple[Callable[[], Awaitable[Any]], Callable[[], Any]]],
) -> tuple[list[float], list[float]]:
    """Time each (Ditto call, raw call) pair back to back."""
    ditto: list[float] = []
    raw: list[float] = []
    for ditto_call, raw_call in pairs:
        ditto.extend(await timed_async([ditto_call]))
        raw.extend(timed([raw_call]))
    return ditto, raw


@dataclass
class Row:
    name: str
    ditto: float
    raw: float
    unit: str
    higher_is_better: bool
    target: float | None = None

    @property
    def ratio(self) -> float:
        return self.ditto / self.raw

    def verdict(self) -> str:
        if self.target is None:
            return ""
        met = self.ratio >= self.target if self.higher_is_better else self.ratio <= self.target
        sign = ">=" if self.higher_is_better else "<="
        return f"{'ok' if met else 'TARGET MISSED'} ({sign} {self.target:g})"


# ------------------------------------------------------------------------------ raw baseline


def raw_connection(path: Path) -> sqlite3.Connection:
    return connect(str(path))


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


def raw_search(planner: KeywordPlanner, question: str) -> list[Any]:
    return keyword_search(planner, query_words(question), _EMPTY_FILTER, 10, DEFAULT_BUDGET)


def naive_search(connection: sqlite3.Connection, words: Sequence[str], joiner: str) -> list[Any]:
    expression = f" {joiner} ".join(f'"{word}"' for word in words)
    return connection.execute(
        f"SELECT {COLUMNS}, bm25(memory_fts) FROM memory_fts JOIN memories m "
        "ON m.seq = memory_fts.rowid WHERE memory_fts MATCH ? ORDER BY bm25(memory_fts) LIMIT 10",
        (expression,),
    ).fetchall()


_EMPTY_FILTER = MemoryFilter()


# ------------------------------------------------------------------------------ measurements


async def measure_writes(directory: Path, corpus: Corpus, batches: int) -> list[Row]:
    drafts = corpus.drafts(batches * BATCH + 2 * SINGLE_WRITES)
    batch_drafts = [drafts[n * BATCH : (n + 1) * BATCH] for n in range(batches)]
    singles = drafts[batches * BATCH :]

    async with SqliteMemoryStore(directory / "write-ditto.sqlite") as store:
        async with create_ditto(workers=[create_memory_worker(store)]) as runtime:
            batch_time = sum(
                await timed_async([_write_call(runtime, batch) for batch in batch_drafts])
            )
            single_time = sum(
                await timed_async([_write_call(runtime, [d]) for d in singles[:SINGLE_WRITES]])
            )
    async with SqliteMemoryStore(directory / "write-raw.sqlite"):
        pass  # create the schema the raw baseline writes into
    connection = raw_connection(directory / "write-raw.sqlite")
    raw_batch = sum(timed([lambda b=b: raw_write_batch(connection, b) for b in batch_drafts]))
    raw_single = sum(
        timed([lambda d=d: raw_write_batch(connection, [d]) for d in singles[SINGLE_WRITES:]])
    )
    connection.close()
    records = batches * BATCH
    return [
        Row(
            "WRITE batch of 1,000 (records/s)",
            records / batch_time,
            records / raw_batch,
            "rec/s",
            True,
            0.5,
        ),
        Row(
            "WRITE single record (records/s)",
            SINGLE_WRITES / single_time,
            SINGLE_WRITES / raw_single,
            "rec/s",
            True,
            0.5,
        ),
    ]


def _write_call(runtime: Ditto, drafts: Sequence[MemoryDraft]) -> Callable[[], Awaitable[Any]]:
    async def call() -> None:
        result = await runtime.invoke("MEMORY.WRITE", {"memories": drafts})
        result.unwrap()

    return call


async def measure_reads(
    path: Path, corpus: Corpus, size: int, queries: int, track_usage: bool
) -> list[Row]:
    rows: list[Row] = []
    connection = raw_connection(path)
    ids = [row[0] for row in connection.execute("SELECT id FROM memories")]
    picked = corpus.random.sample(ids, min(POINT_READS, len(ids)))
    questions = corpus.questions(queries)
    async with SqliteMemoryStore(path) as store:
        worker = create_memory_worker(store, track_usage=track_usage)
        async with create_ditto(workers=[worker]) as runtime:

            async def get(item_id: str) -> None:
                (await runtime.invoke("MEMORY.GET", {"ids": [item_id]})).unwrap()

            async def page() -> None:
                (await runtime.invoke("MEMORY.QUERY", {"limit": 100})).unwrap()

            async def search(question: str) -> None:
                (await runtime.invoke("MEMORY.SEARCH", {"query": question})).unwrap()

            get_sql = f"SELECT {COLUMNS} FROM memories m WHERE m.id IN (?)"
            page_sql = f"SELECT {COLUMNS} FROM memories m ORDER BY m.created_at, m.id LIMIT 101"
            planner = KeywordPlanner(connection)
            for question in questions[:20]:  # warm both sides' caches the same way
                await search(question)
                raw_search(planner, question)
            # Ditto and raw calls alternate, so drift in machine load hits both sides alike.
            ditto_get, raw_get = await interleaved(
                [
                    (lambda i=i: get(i), lambda i=i: connection.execute(get_sql, (i,)).fetchall())
                    for i in picked
                ]
            )
            ditto_page, raw_page = await interleaved(
                [(page, lambda: connection.execute(page_sql).fetchall())] * PAGES
            )
            ditto_search, raw = await interleaved(
                [(lambda q=q: search(q), lambda q=q: raw_search(planner, q)) for q in questions]
            )

    words = [query_words(q) for q in questions]
    naive_or = timed([lambda w=w: naive_search(connection, w, "OR") for w in words[:50]])
    common = Corpus.COMMON[20:]
    naive_and = timed(
        [
            lambda n=n: naive_search(connection, [common[n % 20], common[(n * 7 + 3) % 20]], "AND")
            for n in range(50)
        ]
    )
    connection.close()

    label = f"{size // 1000}k"
    median = statistics.median
    rows.append(
        Row(
            f"GET by id, {label} (µs/call)",
            _us(median(ditto_get)),
            _us(median(raw_get)),
            "µs",
            False,
        )
    )
    rows.append(
        Row(
            f"QUERY page of 100, {label} (µs/call)",
            _us(median(ditto_page)),
            _us(median(raw_page)),
            "µs",
            False,
        )
    )
    for share, target in ((0.5, 1.5), (0.99, None)):
        rows.append(
            Row(
                f"SEARCH p{round(share * 100)}, {label} (ms)",
                _ms(percentile(ditto_search, share)),
                _ms(percentile(raw, share)),
                "ms",
                False,
                target,
            )
        )
    print(
        f"  naive plans on raw FTS5 at {label}: OR of every word p50 "
        f"{_ms(percentile(naive_or, 0.5)):.2f} ms / p99 {_ms(percentile(naive_or, 0.99)):.2f} ms; "
        f"AND of two frequent words p50 {_ms(percentile(naive_and, 0.5)):.2f} ms / "
        f"p99 {_ms(percentile(naive_and, 0.99)):.2f} ms"
    )
    print(
        f"  SEARCH p99 at {label}: {_ms(percentile(ditto_search, 0.99)):.2f} ms"
        + (" (target <= 20 ms)" if size >= 100_000 else "")
    )
    return rows


def _us(seconds: float) -> float:
    return seconds * 1e6


def _ms(seconds: float) -> float:
    return seconds * 1e3


async def build(path: Path, corpus: Corpus, size: int) -> None:
    async with SqliteMemoryStore(path) as store:
        async with create_ditto(workers=[create_memory_worker(store)]) as runtime:
            for start in range(0, size, BATCH):
                drafts = corpus.drafts(min(BATCH, size - start))
                (await runtime.invoke("MEMORY.WRITE", {"memories": drafts})).unwrap()
                print(f"\r  building {start + len(drafts):,}/{size:,} records", end="", flush=True)
    print()


# ------------------------------------------------------------------------------ PostgreSQL


async def measure_postgres(
    url: str, corpus: Corpus, sizes: Sequence[int], queries: int, batches: int
) -> list[Row]:
    """The PostgreSQL column: the store through the runtime against raw asyncpg running the
    store's own SQL — COPY in one transaction per batch (into a twin schema), and the ranked
    tsquery search (on the store's own tables). Private schemas, dropped afterwards."""
    import asyncpg

    from workers.memory.stores.postgres import PostgresMemoryStore
    from workers.memory.stores.postgres.sql import (
        STORED_COLUMNS,
        Params,
        item_values,
        keyword_search_sql,
    )

    schema = f"ditto_bench_{uuid.uuid4().hex[:12]}"
    raw_schema = f"{schema}_raw"
    rows: list[Row] = []
    store = PostgresMemoryStore.from_url(url, schema=schema, pool_size=4)
    mirror = PostgresMemoryStore.from_url(url, schema=raw_schema, pool_size=1)
    await mirror.open()  # the same tables for the raw side
    await mirror.aclose()
    connection = await asyncpg.connect(url)
    try:
        async with store:
            async with create_ditto(workers=[create_memory_worker(store)]) as runtime:
                drafts = corpus.drafts(batches * BATCH)
                batch_drafts = [drafts[n * BATCH : (n + 1) * BATCH] for n in range(batches)]

                async def raw_batch(batch: Sequence[MemoryDraft]) -> None:
                    now = utc_now()
                    items = [new_item(draft, now) for draft in batch]
                    async with connection.transaction():
                        await connection.copy_records_to_table(
                            "memories",
                            schema_name=raw_schema,
                            columns=list(STORED_COLUMNS),
                            records=[item_values(item) for item in items],
                        )
                        await connection.executemany(
                            f'INSERT INTO "{raw_schema}".memory_history '
                            "(id, version, change, at, record) VALUES ($1, $2, $3, $4, $5)",
                            [history_row(item) for item in items],
                        )

                ditto_time = raw_time = 0.0
                for batch in batch_drafts:  # alternate, so load drift hits both alike
                    ditto_time += (await timed_async([_write_call(runtime, batch)]))[0]
                    started = perf_counter()
                    await raw_batch(batch)
                    raw_time += perf_counter() - started
                written = batches * BATCH
                rows.append(
                    Row(
                        "PG WRITE batch of 1,000 (records/s)",
                        written / ditto_time,
                        written / raw_time,
                        "rec/s",
                        True,
                        0.7,
                    )
                )

                for size in sizes:
                    while written < size:  # grow the corpus to the size
                        batch = corpus.drafts(min(BATCH, size - written))
                        (await runtime.invoke("MEMORY.WRITE", {"memories": batch})).unwrap()
                        written += len(batch)
                    questions = corpus.questions(queries)

                    async def search(question: str) -> None:
                        (await runtime.invoke("MEMORY.SEARCH", {"query": question})).unwrap()

                    # Fresh statistics, and both sides search the same tables (the store's), as
                    # the SQLite rows read the same file: only the path to the data differs.
                    await connection.execute(f'ANALYZE "{schema}".memories')
                    await connection.execute(f'ANALYZE "{schema}".memory_usage')

                    async def raw_search_pg(question: str) -> None:
                        params = Params([" or ".join(query_words(question))])
                        sql = keyword_search_sql(f'"{schema}"', MemoryFilter(), params, 10)
                        await connection.fetch(sql, *params.values)

                    for question in questions[:20]:
                        await search(question)
                        await raw_search_pg(question)
                    ditto, raw = [], []
                    for question in questions:
                        ditto += await timed_async([lambda q=question: search(q)])
                        raw += await timed_async([lambda q=question: raw_search_pg(q)])
                    label = f"{size // 1000}k"
                    rows.append(
                        Row(
                            f"PG SEARCH p50, {label} (ms)",
                            _ms(percentile(ditto, 0.5)),
                            _ms(percentile(raw, 0.5)),
                            "ms",
                            False,
                            1.5,
                        )
                    )
                    rows.append(
                        Row(
                            f"PG SEARCH p99, {label} (ms)",
                            _ms(percentile(ditto, 0.99)),
                            _ms(percentile(raw, 0.99)),
                            "ms",
                            False,
                        )
                    )
    finally:
        for name in (schema, raw_schema):
            await connection.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')
        await connection.close()
    return rows


async def main(
    sizes: Sequence[int], queries: int, batches: int, track_usage: bool, postgres: str | None
) -> None:
    corpus = Corpus()
    rows: list[Row] = []
    with tempfile.TemporaryDirectory(prefix="ditto-bench-") as temporary:
        directory = Path(temporary)
        print(f"sqlite {sqlite3.sqlite_version}, python {sys.version.split()[0]}")
        rows += await measure_writes(directory, corpus, batches)
        gc.collect()
        for size in sizes:
            path = directory / f"corpus-{size}.sqlite"
            await build(path, corpus, size)
            rows += await measure_reads(path, corpus, size, queries, track_usage)
            gc.collect()
    if postgres:
        rows += await measure_postgres(postgres, corpus, sizes, queries, batches)
    else:
        print("PostgreSQL column skipped: pass --postgres URL or set DITTO_TEST_POSTGRES_URL")
    print()
    print(f"{'measurement':42} {'Ditto':>12} {'raw':>12} {'ratio':>8}  target")
    for row in rows:
        print(f"{row.name:42} {row.ditto:12.2f} {row.raw:12.2f} {row.ratio:7.2f}x  {row.verdict()}")
    print("(raw = sqlite3, or asyncpg for PG rows, running the same SQL; ratio = Ditto / raw;")
    print(" for throughput higher is better, for latency lower is better)")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10000,100000", help="corpus sizes, comma-separated")
    parser.add_argument("--queries", type=int, default=300, help="SEARCH calls per size")
    parser.add_argument("--batches", type=int, default=20, help="WRITE batches of 1,000 to time")
    parser.add_argument(
        "--no-usage", action="store_true", help="SEARCH without usage tracking (track_usage=False)"
    )
    parser.add_argument(
        "--postgres",
        default=os.environ.get("DITTO_TEST_POSTGRES_URL"),
        help="PostgreSQL URL for the PG rows (a private schema, dropped afterwards)",
    )
    arguments = parser.parse_args()
    sizes = [int(size) for size in arguments.sizes.split(",")]
    asyncio.run(
        main(
            sizes, arguments.queries, arguments.batches, not arguments.no_usage, arguments.postgres
        )
    )
