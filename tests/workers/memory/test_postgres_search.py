"""How the PostgreSQL store scores keyword search (``stores.postgres.search``): every record
by the Okapi BM25 SQLite reports, on the same calibrated scale, with PostgreSQL's own lexemes
(``test_postgres_topk`` checks the exact top-k on larger tables)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from ditto import Ditto, create_ditto
from tests.services import PostgresSpace
from tests.workers.memory.conftest import TickingClock
from tests.workers.memory.postgres_bm25 import exact_scores, ranked
from workers.memory import SqliteMemoryStore, create_memory_worker

pytestmark = [pytest.mark.anyio, pytest.mark.postgres]

asyncpg = pytest.importorskip("asyncpg", reason="PostgreSQL tests need asyncpg")

from workers.memory.stores.postgres import PostgresMemoryStore  # noqa: E402
from workers.memory.stores.postgres.search import _STEPS  # noqa: E402


@pytest.fixture
async def runtime(postgres_space: PostgresSpace) -> AsyncIterator[Ditto]:
    store = PostgresMemoryStore.from_url(
        postgres_space.url, schema=postgres_space.schema, clock=TickingClock()
    )
    async with store, create_ditto(workers=[create_memory_worker(store)]) as runtime:
        yield runtime


async def write(runtime: Ditto, *records: dict[str, Any]) -> list[str]:
    result = (await runtime.invoke("MEMORY.WRITE", {"memories": list(records)})).unwrap()
    return [item.id for item in result.items]


async def search(runtime: Ditto, query: str, **arguments: Any) -> list[tuple[str, float]]:
    result = (await runtime.invoke("MEMORY.SEARCH", {"query": query, **arguments})).unwrap()
    return [(hit.memory.id, hit.score) for hit in result.hits]


async def test_a_rare_word_ranks_above_records_repeating_a_frequent_one(runtime: Ditto) -> None:
    (rare,) = await write(runtime, {"content": "zebra crossing near the espresso bar"})
    await write(runtime, *({"content": f"espresso espresso espresso {n}"} for n in range(12)))
    hits = await search(runtime, "espresso zebra", limit=3)
    # "espresso" is in every record: its IDF is floored just above 0.
    assert hits[0][0] == rare
    assert len(hits) == 3


async def test_the_filter_applies_before_the_limit_when_matches_are_old(runtime: Ditto) -> None:
    mine = await write(runtime, *({"content": "espresso", "namespace": "mine"} for _ in range(4)))
    await write(runtime, *({"content": "espresso", "namespace": "other"} for _ in range(40)))
    hits = await search(runtime, "espresso", limit=3, filter={"namespace": "mine"})
    assert len(hits) == 3
    assert {item for item, _ in hits} <= set(mine)


async def test_scores_are_bm25_of_the_whole_query_over_the_whole_table(
    runtime: Ditto, postgres_space: PostgresSpace
) -> None:
    await write(
        runtime,
        {"content": "zebra espresso espresso"},
        {"content": "zebra"},
        {"content": "zebra zebra crossing the long road by the old mill"},
    )
    await write(runtime, *({"content": f"espresso tea {'tea ' * (n % 3)}{n}"} for n in range(12)))
    # "unicorn" matches nothing: it still counts in the ideal, as on SQLite.
    query = "zebra espresso tea unicorn"
    hits = await search(runtime, query, limit=8)
    assert len(hits) == 8
    # Every statistic is exact (stop words count in a record's length, as on FTS5).
    exact = await exact_scores(postgres_space, query)
    assert [item for item, _ in hits] == ranked(exact)[:8]
    assert [score for _, score in hits] == pytest.approx(
        [exact[item] for item, _ in hits], rel=1e-9, abs=1e-12
    )
    zebras = [score for _, score in hits[:3]]  # the rare word's matches, best first
    assert zebras == sorted(zebras, reverse=True)
    assert len(set(zebras)) == 3


async def test_every_match_is_ranked_by_the_reference_scores(
    postgres_space: PostgresSpace,
) -> None:
    store = PostgresMemoryStore.from_url(
        postgres_space.url, schema=postgres_space.schema, clock=TickingClock()
    )
    async with store, create_ditto(workers=[create_memory_worker(store)]) as runtime:
        await write(runtime, *({"content": text} for text in PARITY_CORPUS))
        for query in PARITY_QUERIES:
            hits = await search(runtime, query, limit=50)
            exact = await exact_scores(postgres_space, query)
            assert [item for item, _ in hits] == ranked(exact), query
            assert [score for _, score in hits] == pytest.approx(
                [exact[id] for id in ranked(exact)], rel=1e-9
            ), query


async def test_term_frequencies_are_read_exactly_from_ts_rank(
    postgres_space: PostgresSpace,
) -> None:
    connection = await asyncpg.connect(postgres_space.url)
    try:
        rows = await connection.fetch(
            "SELECT n, width_bucket(ts_rank('{1,1,1,1}', d.tsv, 'zebra')::float8, $1::float8[]), "
            "round(ts_rank('{1,1,1,1}', d.tsv, 'zebra | lion')::float8 "
            "/ ts_rank('{1,1,1,1}', d.tsv, 'zebra | lion', 2)), "
            "(SELECT sum(cardinality(u.positions)) FROM unnest(d.tsv) u) "
            "FROM generate_series(1, 300) n, "
            "LATERAL (SELECT to_tsvector('english', repeat('zebra the ', n) || 'lion lion') tsv) d",
            _STEPS,
        )
    finally:
        await connection.close()
    # Every count a tsvector keeps (255 positions a lexeme at most), and the record's length.
    assert [(frequency, length) for _, frequency, length, _ in rows] == [
        (min(n, 255), min(n, 255) + 2) for n in range(1, 301)
    ]
    assert all(length == positions for _, _, length, positions in rows)


PARITY_CORPUS = (
    "zebra lion garden",
    "zebra zebra zebra river",
    "lions roar near river garden mountain mountain",
    "coffee garden",
    "coffee coffee espresso river mountain valley forest lake meadow",
    "espresso",
    "river river river river river lion",
    "mountain lake forest valley meadow garden river zebra coffee espresso lion",
    "quiet forest",
    "garden garden garden garden",
)
PARITY_QUERIES = (
    "zebra",
    "lion garden",
    "river mountains",
    "coffee espresso unicorn",
    "forest lakes meadow valley",
    "Zebras and lions in the garden?",
)


async def test_postgres_and_sqlite_give_the_same_scores_and_order(
    postgres_space: PostgresSpace, tmp_path: Path
) -> None:
    """Documents without stop words, words both stemmers agree on: FTS5's BM25 and this one
    see the same terms, lengths and statistics."""
    postgres = PostgresMemoryStore.from_url(
        postgres_space.url, schema=postgres_space.schema, clock=TickingClock()
    )
    sqlite = SqliteMemoryStore(tmp_path / "memory.sqlite", clock=TickingClock())
    results: list[list[list[tuple[str, float]]]] = []
    for store in (postgres, sqlite):
        async with store, create_ditto(workers=[create_memory_worker(store)]) as runtime:
            ids = await write(runtime, *({"content": text} for text in PARITY_CORPUS))
            position = {id: n for n, id in enumerate(ids)}  # ids differ between the stores
            by_query = []
            for query in PARITY_QUERIES:
                hits = await search(runtime, query, limit=20)
                by_query.append([(PARITY_CORPUS[position[id]], score) for id, score in hits])
            results.append(by_query)
    on_postgres, on_sqlite = results
    for query, pg_hits, sqlite_hits in zip(PARITY_QUERIES, on_postgres, on_sqlite, strict=True):
        assert pg_hits, query
        # The same records with the same scores, in the same order (ties go by id, and ids
        # differ between the stores: only equal scores may swap).
        assert dict(pg_hits) == pytest.approx(dict(sqlite_hits), rel=1e-9), query
        assert [score for _, score in pg_hits] == pytest.approx(
            [score for _, score in sqlite_hits], rel=1e-9
        ), query


async def test_a_query_of_stop_words_only_returns_nothing(runtime: Ditto) -> None:
    await write(runtime, {"content": "what is it? don't know, it's s and t"}, {"content": "zebra"})
    assert await search(runtime, "what is it") == []  # stop words for every store
    assert await search(runtime, "don t s") == []  # stop words for PostgreSQL only
    assert [len(await search(runtime, "zebra don t"))] == [1]


async def test_scores_are_in_the_unit_interval(runtime: Ditto) -> None:
    await write(
        runtime,
        {"content": "zebra " * 300},
        {"content": "zebra"},
        {"content": "zebra lion " + "filler words here " * 100},
        *({"content": f"espresso {n}"} for n in range(20)),
    )
    for query in ("zebra", "zebra lion", "espresso", "espresso zebra lion unicorn"):
        scores = [score for _, score in await search(runtime, query, limit=30)]
        assert scores, query
        assert all(0.0 < score <= 1.0 for score in scores), (query, scores)
    # A record of average length holding the only query word once scores 1 - 1/e.
    top = await search(runtime, "lion", limit=1)
    assert 0.0 < top[0][1] < 1.0


async def test_records_holding_more_query_words_rank_first(runtime: Ditto) -> None:
    both, zebra, lion, _ = await write(
        runtime,
        {"content": "zebra lion lion"},
        {"content": "zebra"},
        {"content": "lion"},
        {"content": "unrelated"},
    )
    hits = await search(runtime, "zebra lion")
    assert [item for item, _ in hits] == [both, *sorted([zebra, lion])]
    scores = [score for _, score in hits]
    assert scores == sorted(scores, reverse=True)


async def test_equal_scores_are_ordered_by_id(runtime: Ditto) -> None:
    ids = await write(runtime, *({"content": "zebra"} for _ in range(3)))
    assert [item for item, _ in await search(runtime, "zebra")] == sorted(ids)


async def test_a_word_deleted_everywhere_matches_nothing(runtime: Ditto) -> None:
    ids = await write(runtime, *({"content": f"espresso {n}"} for n in range(10)))
    assert len(await search(runtime, "espresso")) == 10
    (await runtime.invoke("MEMORY.DELETE", {"ids": ids})).unwrap()
    assert await search(runtime, "espresso") == []  # a cached count never invents a record
