"""The PostgreSQL store's per-term impact bounds (``stores.postgres.search_impacts``): kept by
the statement triggers through inserts, updates that lengthen or shorten records, deletes and
an average length drifting both ways; always an upper bound of what a term adds to a record
(checked against BM25 recomputed in Python from every record), exact where nothing drifted;
and the search pruned with them still returns the exact top-k, including records that only a
valid bound keeps."""

from __future__ import annotations

import random
from collections.abc import AsyncIterator

import pytest

from ditto import Ditto, create_ditto
from tests.services import PostgresSpace
from tests.workers.memory.conftest import TickingClock
from tests.workers.memory.postgres_bm25 import read_table
from tests.workers.memory.test_postgres_topk import COMMON, QUERIES, RARE, assert_exact
from workers.memory import MemoryDraft, create_memory_worker
from workers.memory.model.planning import new_item
from workers.memory.model.records import utc_now

pytestmark = [pytest.mark.anyio, pytest.mark.postgres]

asyncpg = pytest.importorskip("asyncpg", reason="PostgreSQL tests need asyncpg")

from workers.memory.stores.postgres import PostgresMemoryStore  # noqa: E402
from workers.memory.stores.postgres.schema import MIGRATIONS  # noqa: E402
from workers.memory.stores.postgres.sql import STORED_COLUMNS, item_values  # noqa: E402

FILLER = [word for word in COMMON if word != "espresso"]


def filler(chance: random.Random, length: int) -> str:
    """Text of ``length`` words holding neither "espresso" nor a rare word."""
    return " ".join(chance.choices([*FILLER, "the", "of"], k=length))


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


async def impact_bounds(space: PostgresSpace) -> dict[str, tuple[float, float]]:
    """For each term some record holds: the greatest BM25 factor of its postings at the
    current average, recomputed from every record, and the store's bound of it."""
    table = await read_table(space)
    average = sum(table.lengths.values()) / len(table.terms) if table.terms else 1.0
    real: dict[str, float] = {}
    for id, counts in table.terms.items():
        norm = 1.2 * (1 - 0.75 + 0.75 * table.lengths[id] / (average or 1.0))
        for term, tf in counts.items():
            real[term] = max(real.get(term, 0.0), tf * 2.2 / (tf + norm))
    connection = await asyncpg.connect(space.url)
    try:
        rows = await connection.fetch(
            "SELECT term, max(impact * greatest(1.0, $1::float8 / reference)) "
            f'FROM "{space.schema}".memory_keyword_terms GROUP BY term',
            average or 1.0,
        )
    finally:
        await connection.close()
    stored = {term: float(bound) for term, bound in rows}
    return {term: (value, stored.get(term, 0.0)) for term, value in real.items()}


async def assert_bounds_valid(space: PostgresSpace, tight: bool = False) -> None:
    """Every term's stored bound is at least what it adds to any record (and equal to the
    greatest when ``tight``)."""
    for term, (real, bound) in (await impact_bounds(space)).items():
        assert real <= bound * (1 + 1e-12), term
        if tight:
            assert bound == pytest.approx(real, rel=1e-9), term


async def test_one_batch_keeps_exact_impacts(
    store: PostgresMemoryStore, postgres_space: PostgresSpace
) -> None:
    chance = random.Random(11)
    texts = [
        f"{' '.join(chance.choices(RARE, k=chance.randint(0, 3)))} "
        f"{filler(chance, chance.randint(1, 40))} espresso"
        for _ in range(500)
    ]
    await store.write([MemoryDraft(content={"text": text}) for text in texts], "create")
    # One statement: every row's reference is the average the search sees.
    await assert_bounds_valid(postgres_space, tight=True)


async def test_search_stays_exact_as_records_change_and_the_average_drifts(
    runtime: Ditto, store: PostgresMemoryStore, postgres_space: PostgresSpace
) -> None:
    chance = random.Random(12)
    vocabulary = [*COMMON, *RARE, "the", "of"]
    weights = [*[3] * len(COMMON), *[0.1] * len(RARE), 10, 5]

    def text(low: int, high: int) -> str:
        return " ".join(chance.choices(vocabulary, weights, k=chance.randint(low, high)))

    short = await store.write(
        [
            MemoryDraft(content={"text": text(2, 8)}, namespace=chance.choice("ab"))
            for _ in range(600)
        ],
        "create",
    )
    # Longer records: the average grows past the references of the first rows.
    long = await store.write(
        [
            MemoryDraft(content={"text": text(30, 70)}, namespace=chance.choice("ab"))
            for _ in range(600)
        ],
        "create",
    )
    await assert_bounds_valid(postgres_space)
    for query in QUERIES:
        await assert_exact(runtime, postgres_space, query, 10)
    # Lengthen short records, shorten long ones (a rare word said often in few words).
    updates = [
        {"id": item.id, "content": {"text": text(60, 90)}} for item in chance.sample(short, 100)
    ] + [
        {"id": item.id, "content": {"text": f"{' '.join([chance.choice(RARE)] * 3)} lion"}}
        for item in chance.sample(long, 100)
    ]
    (await runtime.invoke("MEMORY.UPDATE", {"updates": updates})).unwrap()
    await assert_bounds_valid(postgres_space)
    a = [item.id for item in [*short, *long] if item.namespace == "a"]
    for query in QUERIES:
        await assert_exact(runtime, postgres_space, query, 10)
        await assert_exact(runtime, postgres_space, query, 5, filter={"namespace": "a"}, among=a)
    # Delete most long records: the average falls below the newer rows' references.
    gone = [item.id for item in long[:500]]
    (await runtime.invoke("MEMORY.DELETE", {"ids": gone})).unwrap()
    await assert_bounds_valid(postgres_space)
    for query in QUERIES:
        await assert_exact(runtime, postgres_space, query, 10)
    for rare in RARE[:6]:
        await assert_exact(runtime, postgres_space, f"{rare} lion espresso", 10)


async def test_a_record_an_update_made_stronger_is_found(
    runtime: Ditto, store: PostgresMemoryStore, postgres_space: PostgresSpace
) -> None:
    """The best record for "zorix espresso" holds "espresso" four times in four words, made so
    by an update that keeps the word (its count does not change): were its impact not raised,
    the bound of "espresso" would stay below the rare word's records and the search would stop
    before reading it."""
    chance = random.Random(13)
    # Too many records hold "espresso" for its postings to be read in the rare word's round.
    holding = await store.write(
        [MemoryDraft(content={"text": f"espresso {filler(chance, 19)}"}) for _ in range(300)]
        + [MemoryDraft(content={"text": f"zorix {filler(chance, 99)}"}) for _ in range(15)]
        + [MemoryDraft(content={"text": filler(chance, 30)}) for _ in range(2_685)],
        "create",
    )
    strong = holding[0].id
    update = {"id": strong, "content": {"text": "espresso espresso espresso espresso"}}
    (await runtime.invoke("MEMORY.UPDATE", {"updates": [update]})).unwrap()
    hits = await assert_exact(runtime, postgres_space, "zorix espresso", 10)
    assert hits[0] == strong
    await assert_bounds_valid(postgres_space)


async def test_a_record_the_growing_average_made_stronger_is_found(
    runtime: Ditto, store: PostgresMemoryStore, postgres_space: PostgresSpace
) -> None:
    """Short records holding "espresso" were written while records were short; longer records
    written since raise the average, and with it what "espresso" adds to the short ones
    (their length weighs less against it): a bound left at the old average would fall below
    the rare word's records."""
    chance = random.Random(14)
    early = await store.write(
        [MemoryDraft(content={"text": f"espresso {filler(chance, 3)}"}) for _ in range(300)]
        + [MemoryDraft(content={"text": filler(chance, 4)}) for _ in range(700)],
        "create",
    )
    # Too many postings to be read in the rare word's round.
    await store.write(
        [MemoryDraft(content={"text": f"zorix {filler(chance, 119)}"}) for _ in range(60)]
        + [MemoryDraft(content={"text": filler(chance, 120)}) for _ in range(940)],
        "create",
    )
    hits = await assert_exact(runtime, postgres_space, "zorix espresso", 10)
    assert set(hits) <= {item.id for item in early[:300]}
    await assert_bounds_valid(postgres_space)


async def test_records_stored_before_the_impact_step_get_exact_impacts(
    postgres_space: PostgresSpace,
) -> None:
    """A schema at version 8 (counters, no impacts) with records in it: opening the store
    fills every term's impact at the current average, and searches rank exactly."""
    s = f'"{postgres_space.schema}"'
    chance = random.Random(15)
    items = [
        new_item(MemoryDraft(content={"text": filler(chance, chance.randint(2, 40))}), now)
        for now in [utc_now()]
        for _ in range(400)
    ] + [
        new_item(MemoryDraft(content={"text": f"{rare} {rare} {filler(chance, 5)}"}), utc_now())
        for rare in RARE
    ]
    connection = await asyncpg.connect(postgres_space.url)
    try:
        await connection.execute(
            f"CREATE TABLE {s}.ditto_meta (name text PRIMARY KEY, value bytea NOT NULL)"
        )
        for statements in MIGRATIONS(s)[:8]:
            for statement in statements:
                await connection.execute(statement)
        await connection.execute(
            f"INSERT INTO {s}.ditto_meta VALUES ('schema_version', '8'), ('cursor_secret', $1)",
            bytes(32),
        )
        # Two statements: the counters of a term sit in more than one row.
        for part in (items[:200], items[200:]):
            await connection.copy_records_to_table(
                "memories",
                schema_name=postgres_space.schema,
                columns=list(STORED_COLUMNS),
                records=[item_values(item) for item in part],
            )
    finally:
        await connection.close()
    async with (
        PostgresMemoryStore.from_url(postgres_space.url, schema=postgres_space.schema) as store,
        create_ditto(workers=[create_memory_worker(store)]) as runtime,
    ):
        await assert_bounds_valid(postgres_space, tight=True)
        for query in ("zorix lion", "quaon river the", "espresso garden", "takel forest"):
            await assert_exact(runtime, postgres_space, query, 10)
