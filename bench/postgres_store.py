"""Keyword MEMORY.SEARCH and WRITE on PostgreSQL through the runtime, against raw asyncpg.

For each corpus size (default 10,000 and 100,000 records of the synthetic Zipf text
``memory_store.py`` writes, so some words are in many records and most words are rare), in a
private schema dropped afterwards:

* **Keyword SEARCH p50 / p99** of natural-language questions through
  ``runtime.invoke("MEMORY.SEARCH")`` (exact BM25 top-k, usage tracking on), against raw
  asyncpg running what a user would write by hand: every word OR-ed with
  ``websearch_to_tsquery``, ranked by ``ts_rank_cd``, ``LIMIT 10``. The two alternate query by
  query, the first of each pair rotating; the whole pass repeats ``--rounds`` times and the
  median round is printed with the spread (min-max) of the rounds.
* **Top-10 overlap** of MEMORY.SEARCH with the exact ranking of every match of the OR of all
  words: Okapi BM25 over the whole table with exact statistics, computed here without the
  store's counters or pruning (``ExactBM25``, ties by id).
* **WRITE throughput**, batches of 1,000 through ``MEMORY.WRITE`` against raw asyncpg writing
  the same rows (COPY of the records and the history INSERTs, one transaction per batch) into a
  twin schema, alternating.

Targets: keyword SEARCH p50 <= 15 ms and p99 <= 50 ms at 100,000 records.

    python3 tasks.py bench postgres_store
    .venv/bin/python bench/postgres_store.py --sizes 10000 --queries 100 --postgres URL

The URL comes from ``--postgres`` or ``$DITTO_TEST_POSTGRES_URL``; without either the bench
says so and exits.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from time import perf_counter
from typing import Any

import anyio
import asyncpg
import msgspec
from memory_store import Corpus  # bench/ is the script's folder

from ditto import Ditto, create_ditto
from workers.memory import MemoryDraft, MemoryItem, create_memory_worker
from workers.memory.model.planning import new_item
from workers.memory.model.records import to_micros, utc_now
from workers.memory.retrieval.keyword import idf
from workers.memory.retrieval.text import query_words
from workers.memory.stores.postgres import PostgresMemoryStore
from workers.memory.stores.postgres.sql import STORED_COLUMNS, item_values

BATCH = 1_000
TARGET_P50_MS = 15.0
TARGET_P99_MS = 50.0
TARGET_SIZE = 100_000


# ------------------------------------------------------------------------------ helpers


def percentile(samples: Sequence[float], fraction: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


def spread(values: Sequence[float]) -> str:
    """The median of ``values`` (milliseconds) with their range."""
    return f"{statistics.median(values):7.2f} ({min(values):.2f}-{max(values):.2f})"


def history_row(item: MemoryItem) -> tuple[Any, ...]:
    """The history entry the store appends for a created record."""
    record = msgspec.json.encode(item).decode()
    return (item.id, item.version, "create", to_micros(item.updated_at), record)


async def write(runtime: Ditto, drafts: Sequence[MemoryDraft]) -> None:
    (await runtime.invoke("MEMORY.WRITE", {"memories": drafts})).unwrap()


async def search(runtime: Ditto, question: str) -> list[str]:
    result = (await runtime.invoke("MEMORY.SEARCH", {"query": question})).unwrap()
    return [hit.memory.id for hit in result.hits]


# ------------------------------------------------------------------------------ measurements


async def measure_writes(
    runtime: Ditto, connection: asyncpg.Connection, raw_schema: str, corpus: Corpus, batches: int
) -> tuple[float, float]:
    """Records per second through MEMORY.WRITE and through raw asyncpg, batches alternating."""

    async def raw(batch: Sequence[MemoryDraft]) -> None:
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
    for n in range(batches):
        batch = await anyio.to_thread.run_sync(corpus.drafts, BATCH)
        for side in (n % 2, 1 - n % 2):  # the first of the pair rotates
            started = perf_counter()
            await (write(runtime, batch) if side == 0 else raw(batch))
            if side == 0:
                ditto_time += perf_counter() - started
            else:
                raw_time += perf_counter() - started
    return batches * BATCH / ditto_time, batches * BATCH / raw_time


async def measure_search(
    runtime: Ditto,
    connection: asyncpg.Connection,
    schema: str,
    questions: Sequence[str],
    rounds: int,
) -> tuple[list[float], list[float], list[float], list[float]]:
    """p50 and p99 (ms) of each round, through MEMORY.SEARCH and raw asyncpg."""
    plain = (
        f'SELECT m.*, ts_rank_cd(m.tsv, q) AS score FROM "{schema}".memories m, '
        "websearch_to_tsquery('english', $1) q WHERE m.tsv @@ q ORDER BY score DESC LIMIT 10"
    )

    async def raw(question: str) -> None:
        await connection.fetch(plain, " or ".join(query_words(question)))

    for question in questions[:20]:  # warm both sides' caches the same way
        await search(runtime, question)
        await raw(question)
    p50s: list[float] = []
    p99s: list[float] = []
    raw50s: list[float] = []
    raw99s: list[float] = []
    for round_ in range(rounds):
        ditto: list[float] = []
        plain_samples: list[float] = []
        for n, question in enumerate(questions):
            for side in ((n + round_) % 2, 1 - (n + round_) % 2):
                started = perf_counter()
                await (search(runtime, question) if side == 0 else raw(question))
                (ditto if side == 0 else plain_samples).append(perf_counter() - started)
        p50s.append(percentile(ditto, 0.5) * 1e3)
        p99s.append(percentile(ditto, 0.99) * 1e3)
        raw50s.append(percentile(plain_samples, 0.5) * 1e3)
        raw99s.append(percentile(plain_samples, 0.99) * 1e3)
    return p50s, p99s, raw50s, raw99s


class ExactBM25:
    """The exact keyword ranking MEMORY.SEARCH is measured against: Okapi BM25 (k1 1.2, b 0.75,
    FTS5's IDF floored just above 0) of the question's lexemes, for every record matching any
    of its words, with exact statistics over the whole table (``N``, each term's document count
    (``ts_stat``) and the average length, all counted) and frequencies read with
    ``unnest(tsv)``, ties by id. A record's length is its words, stop words included (the
    positions of ``to_tsvector('simple', ...)``), as the store and FTS5 count it.
    Slow (it reads every match), which is what the pruned search avoids."""

    def __init__(self, connection: asyncpg.Connection, schema: str) -> None:
        self.connection = connection
        self.schema = schema
        self.documents = 0
        self.average = 1.0
        self.frequency: dict[str, int] = {}

    async def prepare(self) -> None:
        """Measure the table: every record's length (its words, in a temporary table),
        ``N``, the average length and every lexeme's document count."""
        await self.connection.execute(
            "CREATE TEMP TABLE IF NOT EXISTS bench_lengths (id text PRIMARY KEY, length float8)"
        )
        await self.connection.execute("TRUNCATE bench_lengths")
        await self.connection.execute(
            "INSERT INTO bench_lengths SELECT m.id, coalesce((SELECT sum(cardinality(u.positions)) "
            "FROM unnest(to_tsvector('simple', m.search_text)) u), 0) "
            f'FROM "{self.schema}".memories m'
        )
        await self.connection.execute("ANALYZE bench_lengths")
        row = await self.connection.fetchrow("SELECT count(*), avg(length) FROM bench_lengths")
        assert row is not None  # an aggregate has one row
        self.documents, self.average = int(row[0]), float(row[1] or 1.0)
        rows = await self.connection.fetch(
            f"SELECT word, ndoc FROM ts_stat('SELECT tsv FROM \"{self.schema}\".memories')"
        )
        self.frequency = {word: int(count) for word, count in rows}

    async def top(self, words: Sequence[str], limit: int = 10) -> list[str]:
        lexemes = await self.connection.fetchval(
            "SELECT coalesce(array_agg(DISTINCT l), '{}') FROM unnest($1::text[]) w, "
            "unnest(tsvector_to_array(to_tsvector('english', w))) l",
            list(words),
        )
        if not lexemes:
            return []
        weights = [idf(self.documents, self.frequency.get(lexeme, 0)) for lexeme in lexemes]
        rows = await self.connection.fetch(
            "SELECT m.id, sum(t.weight * cardinality(u.positions) * 2.2 / (cardinality(u.positions)"
            " + 1.2 * (0.25 + 0.75 * l.length / $3))) AS score "
            f'FROM "{self.schema}".memories m JOIN bench_lengths l ON l.id = m.id, '
            "unnest(m.tsv) u JOIN unnest($1::text[], $2::float8[]) t(lexeme, weight) "
            "ON t.lexeme = u.lexeme WHERE m.tsv @@ websearch_to_tsquery('english', $4) "
            "GROUP BY m.id ORDER BY score DESC, m.id LIMIT $5",
            lexemes,
            weights,
            self.average,
            " or ".join(words),
            limit,
        )
        return [row["id"] for row in rows]


@dataclass
class Recall:
    """How MEMORY.SEARCH's top 10 compares with the exact ranking of every match of the OR of
    all words (:class:`ExactBM25`, ties by id), over the questions with any match."""

    overlap: list[float] = field(default_factory=list)
    """Share of the exact top 10 that MEMORY.SEARCH also returns, per question."""
    rarest_wanted: int = 0
    """Records holding the question's rarest matching word a top 10 could hold, summed."""
    rarest_planned: int = 0
    rarest_exact: int = 0

    def show(self, label: str) -> list[str]:
        return [
            f"top-10 overlap with exact BM25 over every match, {label}: "
            f"{statistics.mean(self.overlap):.3f} over {len(self.overlap)} questions",
            f"top-10 records holding the question's rarest word, {label}: MEMORY "
            f"{self.rarest_planned / self.rarest_wanted:.0%}, exact BM25 "
            f"{self.rarest_exact / self.rarest_wanted:.0%} (of {self.rarest_wanted})",
        ]


async def measure_recall(
    runtime: Ditto,
    connection: asyncpg.Connection,
    schema: str,
    questions: Sequence[str],
) -> Recall:
    count = (
        f'SELECT count(*) FROM "{schema}".memories '
        "WHERE tsv @@ websearch_to_tsquery('english', $1)"
    )
    holding = (
        f'SELECT count(*) FROM "{schema}".memories '
        "WHERE id = ANY($1::text[]) AND tsv @@ websearch_to_tsquery('english', $2)"
    )
    reference = ExactBM25(connection, schema)
    await reference.prepare()
    recall = Recall()
    for question in questions:
        words = query_words(question)
        exact = await reference.top(words)
        if not exact:
            continue
        planned = await search(runtime, question)
        recall.overlap.append(len(set(exact) & set(planned)) / len(exact))
        counts = [(await connection.fetchval(count, word), word) for word in words]
        rarest = min((found, word) for found, word in counts if found)
        recall.rarest_wanted += min(rarest[0], 10)
        recall.rarest_planned += await connection.fetchval(holding, planned, rarest[1])
        recall.rarest_exact += await connection.fetchval(holding, exact, rarest[1])
    return recall


# ------------------------------------------------------------------------------ main


async def main(url: str, sizes: Sequence[int], queries: int, rounds: int, batches: int) -> None:
    corpus = Corpus()
    schema = f"ditto_bench_pg_{uuid.uuid4().hex[:12]}"
    raw_schema = f"{schema}_raw"
    connection = await asyncpg.connect(url)
    print(f"PostgreSQL {connection.get_server_version().major}")
    lines: list[str] = []
    verdicts: list[str] = []
    try:
        async with PostgresMemoryStore.from_url(url, schema=raw_schema, pool_size=1):
            pass  # the same tables, for the raw writes
        async with PostgresMemoryStore.from_url(url, schema=schema, pool_size=4) as store:
            async with create_ditto(workers=[create_memory_worker(store)], config=None) as runtime:
                ditto_rate, raw_rate = await measure_writes(
                    runtime, connection, raw_schema, corpus, batches
                )
                lines.append(
                    f"WRITE batch of 1,000 (records/s): MEMORY {ditto_rate:,.0f}, "
                    f"raw {raw_rate:,.0f} ({ditto_rate / raw_rate:.0%} of raw)"
                )
                written = batches * BATCH
                for size in sizes:
                    while written < size:
                        count = min(BATCH, size - written)
                        # Off the event loop: the runtime's watchdog reports a blocked loop.
                        drafts = await anyio.to_thread.run_sync(corpus.drafts, count)
                        await write(runtime, drafts)
                        written += count
                        print(f"\r  building {written:,}/{size:,} records", end="", flush=True)
                    print()
                    await connection.execute(f'VACUUM ANALYZE "{schema}".memories')
                    questions = corpus.questions(queries)
                    p50s, p99s, raw50s, raw99s = await measure_search(
                        runtime, connection, schema, questions, rounds
                    )
                    recall = await measure_recall(runtime, connection, schema, questions)
                    label = f"{size // 1000}k"
                    lines += [
                        f"SEARCH p50, {label} (ms): MEMORY {spread(p50s)}   raw {spread(raw50s)}",
                        f"SEARCH p99, {label} (ms): MEMORY {spread(p99s)}   raw {spread(raw99s)}",
                        *recall.show(label),
                    ]
                    if size >= TARGET_SIZE:
                        for name, values, target in (
                            ("p50", p50s, TARGET_P50_MS),
                            ("p99", p99s, TARGET_P99_MS),
                        ):
                            value = statistics.median(values)
                            verdict = "met" if value <= target else "MISSED"
                            verdicts.append(
                                f"target keyword SEARCH {name} <= {target:g} ms at {label}: "
                                f"{value:.2f} ms, {verdict}"
                            )
    finally:
        for name in (schema, raw_schema):
            await connection.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')
        await connection.close()
    print()
    for line in [*lines, *verdicts]:
        print(line)
    print(f"(median of {rounds} rounds of {queries} questions, range in brackets; raw = asyncpg")
    print(" running a plain websearch_to_tsquery OR ranked by ts_rank_cd, LIMIT 10)")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10000,100000", help="corpus sizes, comma-separated")
    parser.add_argument("--queries", type=int, default=300, help="questions per round")
    parser.add_argument("--rounds", type=int, default=3, help="timed passes over the questions")
    parser.add_argument("--batches", type=int, default=10, help="WRITE batches of 1,000 to time")
    parser.add_argument(
        "--postgres",
        default=os.environ.get("DITTO_TEST_POSTGRES_URL"),
        help="PostgreSQL URL (a private schema, dropped afterwards)",
    )
    arguments = parser.parse_args()
    if not arguments.postgres:
        print("skipped: pass --postgres URL or set DITTO_TEST_POSTGRES_URL")
    else:
        asyncio.run(
            main(
                arguments.postgres,
                [int(size) for size in arguments.sizes.split(",")],
                arguments.queries,
                arguments.rounds,
                arguments.batches,
            )
        )
