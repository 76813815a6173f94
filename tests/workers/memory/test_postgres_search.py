"""How the PostgreSQL store plans and scores keyword search (``stores.postgres.search``): rare
words first, within a budget of scored records, with the newest matches filling what the plan
left out; every record scored by the Okapi BM25 SQLite reports, on the same calibrated scale.

A budget of a few records makes the plan visible on a handful of rows.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from ditto import Ditto, InvalidInputError, create_ditto
from tests.services import PostgresSpace
from tests.workers.memory.conftest import TickingClock
from workers.memory import SqliteMemoryStore, create_memory_worker
from workers.memory.retrieval.keyword import bm25
from workers.memory.retrieval.text import query_words

pytestmark = [pytest.mark.anyio, pytest.mark.postgres]

asyncpg = pytest.importorskip("asyncpg", reason="PostgreSQL tests need asyncpg")

from workers.memory.stores.postgres import PostgresMemoryStore  # noqa: E402
from workers.memory.stores.postgres.search import _STEPS  # noqa: E402

BUDGET = 4


@pytest.fixture
async def runtime(postgres_space: PostgresSpace) -> AsyncIterator[Ditto]:
    store = PostgresMemoryStore.from_url(
        postgres_space.url, schema=postgres_space.schema, clock=TickingClock(), search_budget=BUDGET
    )
    async with store, create_ditto(workers=[create_memory_worker(store)]) as runtime:
        yield runtime


async def write(runtime: Ditto, *records: dict[str, Any]) -> list[str]:
    result = (await runtime.invoke("MEMORY.WRITE", {"memories": list(records)})).unwrap()
    return [item.id for item in result.items]


async def write_each(runtime: Ditto, *records: dict[str, Any]) -> list[str]:
    """One write per record: each gets its own ``created_at`` (the clock ticks per write)."""
    return [(await write(runtime, record))[0] for record in records]


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


async def test_a_query_of_frequent_words_only_returns_the_newest_matches(runtime: Ditto) -> None:
    ids = await write_each(runtime, *({"content": f"espresso tea {n}"} for n in range(40)))
    hits = await search(runtime, "espresso tea", limit=10)
    # Phase 1 ranks the newest matches within the budget; phase 2 adds the next newest.
    assert {item for item, _ in hits} == set(ids[-10:])
    assert all(score > 0 for _, score in hits)


async def test_the_filter_applies_before_the_limit_when_matches_are_old(runtime: Ditto) -> None:
    mine = await write(runtime, *({"content": "espresso", "namespace": "mine"} for _ in range(4)))
    await write(runtime, *({"content": "espresso", "namespace": "other"} for _ in range(40)))
    hits = await search(runtime, "espresso", limit=3, filter={"namespace": "mine"})
    assert len(hits) == 3
    assert {item for item, _ in hits} <= set(mine)


async def test_phase_two_fills_with_the_newest_records_of_the_left_out_words(
    runtime: Ditto,
) -> None:
    rare = await write(runtime, *({"content": f"zebra {n}"} for n in range(2)))
    frequent = await write_each(runtime, *({"content": f"espresso {n}"} for n in range(20)))
    hits = await search(runtime, "zebra espresso", limit=5)
    assert {item for item, _ in hits[:2]} == set(rare)
    assert {item for item, _ in hits[2:]} == set(frequent[-3:])


async def table_terms(space: PostgresSpace) -> dict[str, Counter[str]]:
    """Every record's lexemes with their number of positions, read with ``unnest(tsv)``."""
    connection = await asyncpg.connect(space.url)
    try:
        rows = await connection.fetch(
            "SELECT m.id, u.lexeme, cardinality(u.positions) "
            f'FROM "{space.schema}".memories m LEFT JOIN LATERAL unnest(m.tsv) u ON TRUE'
        )
    finally:
        await connection.close()
    documents: dict[str, Counter[str]] = {}
    for id, lexeme, count in rows:
        documents.setdefault(id, Counter())
        if lexeme is not None:
            documents[id][lexeme] = count
    return documents


async def query_terms(space: PostgresSpace, query: str) -> set[str]:
    """The lexemes PostgreSQL derives from the query's words."""
    connection = await asyncpg.connect(space.url)
    try:
        rows = await connection.fetch(
            "SELECT DISTINCT l FROM unnest($1::text[]) w, "
            "unnest(tsvector_to_array(to_tsvector('english', w))) l",
            query_words(query),
        )
    finally:
        await connection.close()
    return {row[0] for row in rows}


async def reference(
    space: PostgresSpace, query: str, ids: Sequence[str]
) -> tuple[list[float], dict[str, float]]:
    """The pure BM25 (``search.keyword.bm25``) of ``ids``, and of every record, for ``query``
    over the whole table."""
    documents = await table_terms(space)
    terms = await query_terms(space, query)
    everything = list(documents)
    scores = bm25(terms, [documents[id] for id in everything], documents.values())
    exact = dict(zip(everything, scores, strict=True))
    return [exact[id] for id in ids], exact


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
    # Frequent words are left to phase 2 (budget 4), and counted exactly above the budget
    # (no ANALYZE has run): every statistic is exact, so the scores are the reference's.
    expected, _ = await reference(postgres_space, query, [item for item, _ in hits])
    assert [score for _, score in hits] == pytest.approx(expected, rel=1e-9, abs=1e-12)
    zebras = [score for _, score in hits[:3]]  # phase 1: the rare word's matches, best first
    assert zebras == sorted(zebras, reverse=True)
    assert len(set(zebras)) == 3


async def test_unplanned_scores_are_the_reference_and_rank_by_it(
    postgres_space: PostgresSpace,
) -> None:
    store = PostgresMemoryStore.from_url(
        postgres_space.url, schema=postgres_space.schema, clock=TickingClock()
    )
    async with store, create_ditto(workers=[create_memory_worker(store)]) as runtime:
        await write(runtime, *({"content": text} for text in PARITY_CORPUS))
        for query in PARITY_QUERIES:
            hits = await search(runtime, query, limit=50)
            _, exact = await reference(postgres_space, query, [])
            ranked = sorted(
                (id for id, score in exact.items() if score > 0), key=lambda id: (-exact[id], id)
            )
            assert [item for item, _ in hits] == ranked, query
            assert [score for _, score in hits] == pytest.approx(
                [exact[id] for id in ranked], rel=1e-9
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


async def test_words_within_the_budget_are_ranked_exactly(runtime: Ditto) -> None:
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


@pytest.mark.parametrize("budget", [0, -1, True, 2.5])
def test_a_bad_search_budget_is_refused(budget: Any) -> None:
    with pytest.raises(InvalidInputError, match="search_budget"):
        PostgresMemoryStore.from_url("postgresql://x@localhost/db", search_budget=budget)
