"""PostgreSQL keyword search with per-term impact bounds against the loosest bounds, same run.

For each corpus size (default 100,000 and 1,000,000 records of the synthetic Zipf text
``memory_store.py`` writes), in one private schema written with raw ``COPY`` of the store's
columns in batches of 10,000 (the store's triggers keep the statistics and impacts):

* **SEARCH p50 / p99** through ``runtime.invoke("MEMORY.SEARCH")`` (limit 10) on two stores
  over the same schema: one pruning with the impact bounds the database keeps
  (``stores.postgres.search_impacts``), one whose planner replaces them with ``k1 + 1`` (the
  bound main used, so the same rounds as before). The two alternate question by question, the
  first of each pair rotating; the whole pass repeats ``--rounds`` times; the median round is
  printed with the range of the rounds, and the ratio of the medians.
* **Top-10 overlap** of both with exact BM25 over every match (``postgres_store.ExactBM25``)
  on the first ``--checked`` questions.
* **WRITE cost of the trigger change**: batches of 1,000 records ``COPY``-ed into the same
  table, alternating the insert trigger's function between schema step 8's (counts only) and
  step 9's (counts and impacts), median seconds a batch.

    nice -n 10 .venv/bin/python bench/postgres_impacts.py --sizes 100000,1000000 \
        --postgres postgresql://postgres@127.0.0.1:5432/test

``--schema NAME --keep`` builds into (or reuses) that schema and leaves it; without ``--keep``
the schema is dropped at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import os
import statistics
from collections.abc import Sequence
from time import perf_counter

import anyio
import asyncpg
from memory_store import Corpus  # bench/ is the script's folder
from postgres_store import ExactBM25, percentile, search, spread

from ditto import Ditto, create_ditto
from workers.memory import create_memory_worker
from workers.memory.model.planning import new_item
from workers.memory.model.records import utc_now
from workers.memory.retrieval.text import query_words
from workers.memory.stores.postgres import PostgresMemoryStore
from workers.memory.stores.postgres.search_impacts import keyword_impacts_step
from workers.memory.stores.postgres.search_plan import K1, KeywordPlan, KeywordPlanner
from workers.memory.stores.postgres.search_schema import _counting
from workers.memory.stores.postgres.sql import STORED_COLUMNS, item_values

BUILD_BATCH = 10_000
WRITE_BATCH = 1_000


class LoosePlanner(KeywordPlanner):
    """Plans as the store does, then bounds every term by ``idf (k1 + 1)`` (main's bound)."""

    async def plan(
        self, connection: asyncpg.Connection, words: Sequence[str]
    ) -> KeywordPlan | None:
        plan = await super().plan(connection, words)
        if plan is None:
            return None
        return dataclasses.replace(plan, impacts=(K1 + 1.0,) * len(plan.terms))


async def build(connection: asyncpg.Connection, schema: str, corpus: Corpus, size: int) -> None:
    """Raw ``COPY`` of corpus records until the table holds ``size``."""
    held = int(await connection.fetchval(f'SELECT count(*) FROM "{schema}".memories'))
    while held < size:
        count = min(BUILD_BATCH, size - held)
        now = utc_now()
        drafts = await anyio.to_thread.run_sync(corpus.drafts, count)
        await connection.copy_records_to_table(
            "memories",
            schema_name=schema,
            columns=list(STORED_COLUMNS),
            records=[item_values(new_item(draft, now)) for draft in drafts],
        )
        held += count
        print(f"\r  building {held:,}/{size:,} records", end="", flush=True)
    print()
    await connection.execute(f'VACUUM ANALYZE "{schema}".memories')


async def measure_search(
    tight: Ditto, loose: Ditto, questions: Sequence[str], rounds: int
) -> dict[str, tuple[list[float], list[float]]]:
    """p50 and p99 (ms) of each round for both sides."""
    sides = {"tight": tight, "loose": loose}
    for question in questions[:20]:  # warm both sides' caches the same way
        for runtime in sides.values():
            await search(runtime, question)
    result: dict[str, tuple[list[float], list[float]]] = {name: ([], []) for name in sides}
    for round_ in range(rounds):
        samples: dict[str, list[float]] = {name: [] for name in sides}
        for n, question in enumerate(questions):
            order = ["tight", "loose"] if (n + round_) % 2 == 0 else ["loose", "tight"]
            for name in order:
                started = perf_counter()
                await search(sides[name], question)
                samples[name].append(perf_counter() - started)
        for name, values in samples.items():
            result[name][0].append(percentile(values, 0.5) * 1e3)
            result[name][1].append(percentile(values, 0.99) * 1e3)
    return result


async def measure_overlap(
    connection: asyncpg.Connection,
    schema: str,
    tight: Ditto,
    loose: Ditto,
    questions: Sequence[str],
) -> tuple[float, float, int]:
    """Mean top-10 overlap with exact BM25 of both sides, over the questions with a match."""
    reference = ExactBM25(connection, schema)
    await reference.prepare()
    overlaps: dict[str, list[float]] = {"tight": [], "loose": []}
    for question in questions:
        exact = await reference.top(query_words(question))
        if not exact:
            continue
        for name, runtime in (("tight", tight), ("loose", loose)):
            found = await search(runtime, question)
            overlaps[name].append(len(set(exact) & set(found)) / len(exact))
    return (
        statistics.mean(overlaps["tight"]),
        statistics.mean(overlaps["loose"]),
        len(overlaps["tight"]),
    )


async def measure_writes(
    connection: asyncpg.Connection, schema: str, corpus: Corpus, batches: int
) -> tuple[float, float]:
    """Median seconds a ``COPY`` of 1,000 records takes with step 8's insert trigger and
    with step 9's, alternating (the first of each pair rotating)."""
    s = f'"{schema}"'
    step8 = _counting(
        s,
        "keyword_inserted",
        "SELECT tsv, 1 AS sign FROM new_rows",
        "SELECT count(*) FROM new_rows",
        "SELECT coalesce(sum(words), 0) FROM new_rows",
    ).replace("CREATE FUNCTION", "CREATE OR REPLACE FUNCTION")
    step9 = keyword_impacts_step(s)[2]
    times: dict[int, list[float]] = {8: [], 9: []}
    try:
        for n in range(batches):
            for step in (8, 9) if n % 2 == 0 else (9, 8):
                await connection.execute(step8 if step == 8 else step9)
                now = utc_now()
                drafts = await anyio.to_thread.run_sync(corpus.drafts, WRITE_BATCH)
                records = [item_values(new_item(draft, now)) for draft in drafts]
                started = perf_counter()
                await connection.copy_records_to_table(
                    "memories", schema_name=schema, columns=list(STORED_COLUMNS), records=records
                )
                times[step].append(perf_counter() - started)
    finally:
        await connection.execute(step9)
    return statistics.median(times[8]), statistics.median(times[9])


async def main(arguments: argparse.Namespace) -> None:
    url: str = arguments.postgres
    schema: str = arguments.schema
    corpus = Corpus()
    connection = await asyncpg.connect(url)
    lines: list[str] = []
    try:
        async with (
            PostgresMemoryStore.from_url(url, schema=schema, pool_size=2) as tight_store,
            PostgresMemoryStore.from_url(url, schema=schema, pool_size=2) as loose_store,
        ):
            # The switch: the same store, planning with main's bounds.
            loose_store._planner = LoosePlanner(loose_store._s)
            async with (
                create_ditto(workers=[create_memory_worker(tight_store)], config=None) as tight,
                create_ditto(workers=[create_memory_worker(loose_store)], config=None) as loose,
            ):
                for size in [int(size) for size in arguments.sizes.split(",")]:
                    await build(connection, schema, corpus, size)
                    label = f"{size // 1000}k"
                    questions = corpus.questions(arguments.queries)
                    timed = await measure_search(tight, loose, questions, arguments.rounds)
                    for n, name in ((0, "p50"), (1, "p99")):
                        new, old = timed["tight"][n], timed["loose"][n]
                        lines.append(
                            f"SEARCH {name}, {label} (ms): impact bounds {spread(new)}   "
                            f"loose bounds {spread(old)}   ratio "
                            f"{statistics.median(new) / statistics.median(old):.2f}"
                        )
                    overlap = await measure_overlap(
                        connection, schema, tight, loose, questions[: arguments.checked]
                    )
                    lines.append(
                        f"top-10 overlap with exact BM25, {label}: impact bounds {overlap[0]:.3f}, "
                        f"loose bounds {overlap[1]:.3f} over {overlap[2]} questions"
                    )
                    before, after = await measure_writes(
                        connection, schema, corpus, arguments.batches
                    )
                    lines.append(
                        f"COPY of 1,000 records, {label} (s, median of {arguments.batches}): "
                        f"step 8 trigger {before:.3f}, step 9 trigger {after:.3f}, "
                        f"ratio {after / before:.2f}"
                    )
                    print("\n".join(lines[-5:]), flush=True)
    finally:
        if not arguments.keep:
            await connection.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
        await connection.close()
    print()
    print("\n".join(lines))
    print(
        f"(median of {arguments.rounds} rounds of {arguments.queries} questions, range in brackets)"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="100000,1000000", help="corpus sizes, comma-separated")
    parser.add_argument("--queries", type=int, default=100, help="questions per round")
    parser.add_argument("--rounds", type=int, default=3, help="timed passes over the questions")
    parser.add_argument("--checked", type=int, default=40, help="questions checked for overlap")
    parser.add_argument("--batches", type=int, default=6, help="WRITE batches of 1,000 per side")
    parser.add_argument("--schema", default="ditto_bench_impacts", help="the private schema")
    parser.add_argument("--keep", action="store_true", help="leave the schema for another run")
    parser.add_argument(
        "--postgres",
        default=os.environ.get("DITTO_TEST_POSTGRES_URL"),
        help="PostgreSQL URL (a private schema)",
    )
    arguments = parser.parse_args()
    if not arguments.postgres:
        print("skipped: pass --postgres URL or set DITTO_TEST_POSTGRES_URL")
    else:
        asyncio.run(main(arguments))
