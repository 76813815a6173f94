"""The PostgreSQL store's keyword search returns the exact BM25 top-k over every match
(``stores.postgres.search``): the same records, order and scores as BM25 computed in Python
over the whole table, with old records that win, filters, updates, deletes and concurrent
writers, and statistics (``search_schema``) that stay exact through all of them."""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import AsyncIterator
from typing import Any

import anyio
import msgspec
import pytest

from ditto import Ditto, create_ditto
from tests.services import PostgresSpace
from tests.workers.memory.conftest import TickingClock
from tests.workers.memory.postgres_bm25 import exact_scores, ranked, read_table
from workers.memory import MemoryDraft, create_memory_worker
from workers.memory.model.planning import new_item
from workers.memory.model.records import utc_now

pytestmark = [pytest.mark.anyio, pytest.mark.postgres]

asyncpg = pytest.importorskip("asyncpg", reason="PostgreSQL tests need asyncpg")

from workers.memory.stores.postgres import PostgresMemoryStore  # noqa: E402
from workers.memory.stores.postgres.schema import MIGRATIONS  # noqa: E402
from workers.memory.stores.postgres.sql import STORED_COLUMNS, item_values  # noqa: E402

COMMON = [
    "espresso",
    "garden",
    "river",
    "mountain",
    "lake",
    "forest",
    "valley",
    "meadow",
    "coffee",
    "lion",
]
RARE = [f"{a}{b}" for a in ("zor", "qua", "vel", "mip", "tak") for b in ("ix", "on", "ur", "el")]


def sentence(chance: random.Random, length: int) -> str:
    """Zipf-like text: a few words in most records, rare ones in few, stop words between."""
    words = chance.choices(
        [*COMMON, *RARE, "the", "of"], [30, *[8] * 9, *[1] * 20, 40, 20], k=length
    )
    return " ".join(words)


@pytest.fixture
async def store(postgres_space: PostgresSpace) -> AsyncIterator[PostgresMemoryStore]:
    async with PostgresMemoryStore.from_url(
        postgres_space.url, schema=postgres_space.schema, clock=TickingClock()
    ) as store:
        yield store


@pytest.fixture
async def runtime(store: PostgresMemoryStore) -> AsyncIterator[Ditto]:
    async with create_ditto(workers=[create_memory_worker(store)]) as runtime:
        yield runtime


async def search(runtime: Ditto, query: str, **arguments: Any) -> list[tuple[str, float]]:
    result = (await runtime.invoke("MEMORY.SEARCH", {"query": query, **arguments})).unwrap()
    return [(hit.memory.id, hit.score) for hit in result.hits]


async def assert_exact(
    runtime: Ditto, space: PostgresSpace, query: str, limit: int, **arguments: Any
) -> list[str]:
    """The search's hits are the reference's top ``limit`` (of ``among`` when given), with its
    scores; returns them."""
    among = arguments.pop("among", None)
    hits = await search(runtime, query, limit=limit, **arguments)
    exact = await exact_scores(space, query)
    assert [id for id, _ in hits] == ranked(exact, among)[:limit], query
    assert [score for _, score in hits] == pytest.approx([exact[id] for id, _ in hits], rel=1e-9), (
        query
    )
    return [id for id, _ in hits]


async def assert_statistics_exact(space: PostgresSpace) -> None:
    """The counters the database keeps equal the statistics recounted from every record."""
    table = await read_table(space)
    connection = await asyncpg.connect(space.url)
    try:
        s = f'"{space.schema}"'
        totals = await connection.fetchrow(
            f"SELECT coalesce(sum(documents), 0), coalesce(sum(words), 0) "
            f"FROM {s}.memory_keyword_totals"
        )
        terms = await connection.fetch(
            f"SELECT term, sum(documents) FROM {s}.memory_keyword_terms GROUP BY term "
            "HAVING sum(documents) <> 0"
        )
    finally:
        await connection.close()
    frequency: Counter[str] = Counter()
    for counts in table.terms.values():
        frequency.update(counts.keys())
    assert (totals[0], totals[1]) == (len(table.terms), sum(table.lengths.values()))
    assert {term: int(count) for term, count in terms} == dict(frequency)


QUERIES = (
    "zorix espresso",
    "quaon garden river",
    "velur mipel takix the",
    "espresso garden",
    "lion coffee meadow zorel",
    "takon",
    "forest quaur velix unicorn",
)


async def test_old_records_that_score_best_are_found(
    runtime: Ditto, postgres_space: PostgresSpace
) -> None:
    # The best records for "velix" are the oldest: short, holding it twice. Newer records,
    # thousands of them, hold it once in long text (a newest-records window ranks only those).
    best = [
        (await runtime.invoke("MEMORY.WRITE", {"memories": [{"content": "velix velix"}]}))
        .unwrap()
        .items[0]
        .id
        for _ in range(3)
    ]
    chance = random.Random(1)
    for _ in range(3):
        drafts = [
            {
                "content": f"{'velix ' if chance.random() < 0.3 else ''}{sentence(chance, 40)}",
                "namespace": chance.choice("ab"),
            }
            for _ in range(1_000)
        ]
        (await runtime.invoke("MEMORY.WRITE", {"memories": drafts})).unwrap()
    hits = await assert_exact(runtime, postgres_space, "velix espresso", 10)
    assert set(hits[:3]) == set(best)
    for query in QUERIES:
        await assert_exact(runtime, postgres_space, query, 10)
    await assert_exact(runtime, postgres_space, "velix", 25)


async def test_rare_words_with_frequent_ones_rank_exactly(
    runtime: Ditto, store: PostgresMemoryStore, postgres_space: PostgresSpace
) -> None:
    """Queries of a rare word and frequent ones: after the rare word's records, the frequent
    words are read alone or, once none alone can lift a record above the k-th score, only
    where several of them meet."""
    chance = random.Random(6)
    vocabulary = [*COMMON, *RARE, "the"]
    # Each frequent word in about a fifth of the records, each rare word in about 20.
    weights = [*[1] * len(COMMON), *[0.05] * len(RARE), 60]
    texts = [
        " ".join(chance.choices(vocabulary, weights, k=chance.randint(3, 30))) for _ in range(2_000)
    ]
    await store.write([MemoryDraft(content={"text": text}) for text in texts], "create")
    for rare in RARE:
        query = " ".join([rare, *chance.sample(COMMON, chance.randint(1, 4))])
        await assert_exact(runtime, postgres_space, query, chance.choice((5, 10)))


async def test_filters_apply_before_the_limit(
    runtime: Ditto, store: PostgresMemoryStore, postgres_space: PostgresSpace
) -> None:
    chance = random.Random(2)
    items = await store.write(
        [
            MemoryDraft(
                content={"text": sentence(chance, chance.randint(5, 30))},
                namespace=chance.choice(("alice", "bob", "team")),
                tags=[chance.choice(("fact", "pref"))],
            )
            for _ in range(1_500)
        ],
        "create",
    )
    alice = [item.id for item in items if item.namespace == "alice"]
    facts = [item.id for item in items if item.tags == ["fact"] and item.namespace == "bob"]
    for query in QUERIES:
        await assert_exact(
            runtime, postgres_space, query, 10, filter={"namespace": "alice"}, among=alice
        )
        await assert_exact(
            runtime,
            postgres_space,
            query,
            7,
            filter={"namespace": "bob", "tags_any": ["fact"]},
            among=facts,
        )


async def test_statistics_stay_exact_through_updates_and_deletes(
    runtime: Ditto, store: PostgresMemoryStore, postgres_space: PostgresSpace
) -> None:
    chance = random.Random(3)
    items = await store.write(
        [MemoryDraft(content={"text": sentence(chance, 20)}) for _ in range(800)], "create"
    )
    await assert_statistics_exact(postgres_space)
    changed = chance.sample(items, 200)
    updates = [
        {"id": item.id, "content": {"text": f"quaon quaon {sentence(chance, 5)}"}}
        for item in changed[:100]
    ]
    (await runtime.invoke("MEMORY.UPDATE", {"updates": updates})).unwrap()
    # An update that leaves the text alone changes no statistic.
    (
        await runtime.invoke(
            "MEMORY.UPDATE", {"updates": [{"id": item.id, "tags": ["x"]} for item in changed]}
        )
    ).unwrap()
    (await runtime.invoke("MEMORY.DELETE", {"ids": [item.id for item in changed[100:]]})).unwrap()
    await assert_statistics_exact(postgres_space)
    for query in QUERIES:
        await assert_exact(runtime, postgres_space, query, 10)
    hits = await assert_exact(runtime, postgres_space, "quaon", 10)
    assert set(hits) <= {item.id for item in changed[:100]}
    # An import replaces records (and brings deleted ones back) in one statement a batch; an
    # id given twice counts once.
    imported = [
        msgspec.structs.replace(item, content={"text": "takix takix"}) for item in items[:50]
    ]
    assert await store.restore([*imported, *imported[:5]]) == 55
    await assert_statistics_exact(postgres_space)
    await assert_exact(runtime, postgres_space, "takix quaon", 10)
    everything = [item.id for item in items]
    (await runtime.invoke("MEMORY.DELETE", {"ids": everything})).unwrap()
    await assert_statistics_exact(postgres_space)
    assert await search(runtime, "quaon espresso") == []


async def test_concurrent_writers_keep_the_statistics_exact(
    postgres_space: PostgresSpace,
) -> None:
    stores = [
        PostgresMemoryStore.from_url(postgres_space.url, schema=postgres_space.schema, pool_size=2)
        for _ in range(3)
    ]
    chance = random.Random(4)
    batches = [
        [[MemoryDraft(content={"text": sentence(chance, 15)}) for _ in range(50)] for _ in range(6)]
        for _ in stores
    ]

    async def write_all(store: PostgresMemoryStore, drafts: list[list[MemoryDraft]]) -> None:
        async with anyio.create_task_group() as group:
            for batch in drafts:
                group.start_soon(store.write, batch, "create")

    for store in stores:
        await store.open()
    try:
        async with anyio.create_task_group() as group:
            for store, drafts in zip(stores, batches, strict=True):
                group.start_soon(write_all, store, drafts)
    finally:
        for store in stores:
            await store.aclose()
    await assert_statistics_exact(postgres_space)


async def test_records_stored_before_the_statistics_step_are_counted(
    postgres_space: PostgresSpace,
) -> None:
    """A schema at version 7 (before ``search_schema``'s step) with records in it: opening
    the store migrates it, and the statistics and the length column count those records."""
    s = f'"{postgres_space.schema}"'
    chance = random.Random(5)
    items = [
        new_item(MemoryDraft(content={"text": f"{sentence(chance, 12)} Café, naïve-ish 42"}), now)
        for now in [utc_now()]
        for _ in range(300)
    ]
    connection = await asyncpg.connect(postgres_space.url)
    try:
        await connection.execute(
            f"CREATE TABLE {s}.ditto_meta (name text PRIMARY KEY, value bytea NOT NULL)"
        )
        for statements in MIGRATIONS(s)[:7]:
            for statement in statements:
                await connection.execute(statement)
        await connection.execute(
            f"INSERT INTO {s}.ditto_meta VALUES ('schema_version', '7'), ('cursor_secret', $1)",
            bytes(32),
        )
        before = STORED_COLUMNS[:-1]  # no `words` yet
        await connection.copy_records_to_table(
            "memories",
            schema_name=postgres_space.schema,
            columns=list(before),
            records=[item_values(item)[: len(before)] for item in items],
        )
    finally:
        await connection.close()
    async with (
        PostgresMemoryStore.from_url(postgres_space.url, schema=postgres_space.schema) as store,
        create_ditto(workers=[create_memory_worker(store)]) as runtime,
    ):
        await assert_statistics_exact(postgres_space)
        for query in QUERIES:
            await assert_exact(runtime, postgres_space, query, 10)
