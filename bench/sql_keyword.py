"""Keyword MEMORY.SEARCH on SQLite, PostgreSQL and MySQL/MariaDB through the runtime, in one
run on the same records.

For each corpus size (default 10,000 and 100,000 records of the synthetic Zipf text
``memory_store.py`` writes, so some words are in many records and most words are rare), written
through the stores' WRITE path into a SQLite file, a private PostgreSQL schema and a private
MySQL database (both dropped afterwards), with the same ids:

* **Keyword SEARCH p50 / p99** of natural-language questions through
  ``runtime.invoke("MEMORY.SEARCH")`` on each store, alternating the stores question by
  question (rotating who goes first); the whole pass repeats ``--rounds`` times and the median
  round is printed with the spread of the rounds.
* **Top-10 overlap** of each store's hits with the exact ranking: Okapi BM25 over every record
  with exact statistics, which the in-process store computes (it is given the same records),
  on the same calibrated scale and with the same terms.

    python3 tasks.py bench sql_keyword
    .venv/bin/python bench/sql_keyword.py --sizes 10000 --queries 100 --mysql URL --postgres URL

The URLs come from ``--mysql`` / ``--postgres`` or ``$DITTO_TEST_MYSQL_URL`` /
``$DITTO_TEST_POSTGRES_URL``; a server without one is left out (and the bench says so).
``bench/postgres_store.py`` has PostgreSQL's plan-by-plan figures.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import tempfile
import uuid
from collections.abc import Sequence
from contextlib import AsyncExitStack
from pathlib import Path
from time import perf_counter

import anyio
import asyncpg
import pymysql
from memory_store import Corpus  # bench/ is the script's folder

from ditto import Ditto, create_ditto
from workers.memory import (
    InProcessMemoryStore,
    MemoryFilter,
    SqliteMemoryStore,
    create_memory_worker,
)
from workers.memory.ports import MemoryStore
from workers.memory.stores.mysql import MysqlMemoryStore
from workers.memory.stores.mysql.asyncmy_driver import MysqlUrl
from workers.memory.stores.postgres import PostgresMemoryStore

BATCH = 1_000


def percentile(samples: Sequence[float], fraction: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def spread(values: Sequence[float]) -> str:
    return f"{statistics.median(values):7.2f} [{min(values):.2f}-{max(values):.2f}]"


def admin(url: str, statement: str) -> None:
    parts = MysqlUrl.parse(url)
    connection = pymysql.connect(
        host=parts.host, port=parts.port, user=parts.user, password=parts.password,
        autocommit=True,
    )  # fmt: skip
    try:
        with connection.cursor() as cursor:
            cursor.execute(statement)
    finally:
        connection.close()


async def search(runtime: Ditto, question: str) -> list[str]:
    result = await runtime.invoke("MEMORY.SEARCH", {"query": question, "limit": 10})
    return [hit.memory.id for hit in result.unwrap().hits]


async def measure(
    runtimes: dict[str, Ditto], questions: Sequence[str], rounds: int
) -> dict[str, tuple[list[float], list[float]]]:
    """Per store: the p50s and p99s (ms) of each round."""
    results: dict[str, tuple[list[float], list[float]]] = {name: ([], []) for name in runtimes}
    for round_number in range(rounds):
        times: dict[str, list[float]] = {name: [] for name in runtimes}
        names = list(runtimes)
        for index, question in enumerate(questions):
            shift = (index + round_number) % len(names)
            for name in names[shift:] + names[:shift]:
                started = perf_counter()
                await search(runtimes[name], question)
                times[name].append(perf_counter() - started)
        for name, samples in times.items():
            results[name][0].append(percentile(samples, 0.5) * 1e3)
            results[name][1].append(percentile(samples, 0.99) * 1e3)
    return results


async def postgres_admin(url: str, statement: str) -> None:
    connection = await asyncpg.connect(url)
    try:
        await connection.execute(statement)
    finally:
        await connection.close()


async def main(
    mysql_url: str | None,
    postgres_url: str | None,
    sizes: Sequence[int],
    queries: int,
    rounds: int,
) -> None:
    corpus = Corpus()
    private = f"ditto_bench_{uuid.uuid4().hex[:12]}"
    lines: list[str] = []
    if mysql_url:
        admin(mysql_url, f"CREATE DATABASE `{private}` CHARACTER SET utf8mb4")
    try:
        with tempfile.TemporaryDirectory() as folder:
            stores: dict[str, MemoryStore] = {
                "SQLite": SqliteMemoryStore(Path(folder) / "memory.sqlite")
            }
            if postgres_url:
                stores["PostgreSQL"] = PostgresMemoryStore.from_url(
                    postgres_url, schema=private, pool_size=4
                )
            if mysql_url:
                base, _, _ = mysql_url.rpartition("/")
                stores["MySQL"] = MysqlMemoryStore.from_url(f"{base}/{private}", pool_size=4)
            exact = InProcessMemoryStore()
            async with AsyncExitStack() as stack:
                for store in stores.values():
                    await stack.enter_async_context(store)
                runtimes = {
                    name: await stack.enter_async_context(
                        create_ditto(workers=[create_memory_worker(store)], config=None)
                    )
                    for name, store in stores.items()
                }
                on_exact = await stack.enter_async_context(
                    create_ditto(workers=[create_memory_worker(exact)], config=None)
                )
                first, *others = stores.values()
                written = 0
                for size in sizes:
                    while written < size:
                        count = min(BATCH, size - written)
                        drafts = await anyio.to_thread.run_sync(corpus.drafts, count)
                        # The same records everywhere (ids included): the first store writes.
                        items = await first.write(drafts, "create")
                        for store in [*others, exact]:
                            await store.restore(items)
                        written += count
                        print(f"\r  building {written:,}/{size:,}", end="", flush=True)
                    print()
                    for store in stores.values():
                        await store.flush()
                        assert await store.count(MemoryFilter()) == written
                    questions = corpus.questions(queries)
                    timed = await measure(runtimes, questions, rounds)
                    label = f"{size // 1000}k"
                    for name, (p50s, p99s) in timed.items():
                        lines.append(
                            f"SEARCH {label} {name:10}  p50 {spread(p50s)} ms   "
                            f"p99 {spread(p99s)} ms"
                        )
                    # The exact ranking reads every record: once a question, for every store.
                    wanted = {question: await search(on_exact, question) for question in questions}
                    for name, runtime in runtimes.items():
                        shares = []
                        for question in questions:
                            if wanted[question]:
                                got = await search(runtime, question)
                                best = set(wanted[question])
                                shares.append(len(best & set(got)) / len(best))
                        lines.append(
                            f"top-10 overlap with exact BM25, {label} {name}: "
                            f"{statistics.mean(shares):.3f} over {len(shares)} questions"
                        )
    finally:
        if mysql_url:
            admin(mysql_url, f"DROP DATABASE IF EXISTS `{private}`")
        if postgres_url:
            await postgres_admin(postgres_url, f'DROP SCHEMA IF EXISTS "{private}" CASCADE')
    print()
    for line in lines:
        print(line)
    print(f"(median of {rounds} rounds of {queries} questions, range in brackets)")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10000,100000", help="corpus sizes, comma-separated")
    parser.add_argument("--queries", type=int, default=200, help="questions per round")
    parser.add_argument("--rounds", type=int, default=3, help="timed passes over the questions")
    parser.add_argument(
        "--mysql",
        default=os.environ.get("DITTO_TEST_MYSQL_URL"),
        help="MySQL URL (a private database, dropped afterwards)",
    )
    parser.add_argument(
        "--postgres",
        default=os.environ.get("DITTO_TEST_POSTGRES_URL"),
        help="PostgreSQL URL (a private schema, dropped afterwards)",
    )
    arguments = parser.parse_args()
    for name, url, option in (
        ("MySQL", arguments.mysql, "--mysql URL or DITTO_TEST_MYSQL_URL"),
        ("PostgreSQL", arguments.postgres, "--postgres URL or DITTO_TEST_POSTGRES_URL"),
    ):
        if not url:
            print(f"{name} left out: give {option}")
    asyncio.run(
        main(
            arguments.mysql,
            arguments.postgres,
            [int(size) for size in arguments.sizes.split(",")],
            arguments.queries,
            arguments.rounds,
        )
    )
