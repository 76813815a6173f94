"""How the PostgreSQL store plans keyword search: rare words first, within a budget of scored
records, with the newest matches filling what the plan left out (``stores.postgres.search``).

A budget of a few records makes the plan visible on a handful of rows.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from ditto import Ditto, InvalidInputError, create_ditto
from tests.services import PostgresSpace
from tests.workers.memory.conftest import TickingClock
from workers.memory import create_memory_worker

pytestmark = [pytest.mark.anyio, pytest.mark.postgres]

asyncpg = pytest.importorskip("asyncpg", reason="PostgreSQL tests need asyncpg")

from workers.memory.stores.postgres import PostgresMemoryStore  # noqa: E402

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
    # Unplanned, the three-espresso records would outrank it: ts_rank_cd has no IDF.
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


async def test_scores_are_the_unplanned_scores_of_the_whole_query(
    runtime: Ditto, postgres_space: PostgresSpace
) -> None:
    await write(runtime, {"content": "zebra espresso espresso"}, {"content": "zebra"})
    await write(runtime, *({"content": f"espresso tea {n}"} for n in range(12)))
    hits = await search(runtime, "zebra espresso tea", limit=6)
    connection = await asyncpg.connect(postgres_space.url)
    try:
        rows = await connection.fetch(
            "SELECT id, ts_rank_cd(tsv, websearch_to_tsquery('english', $1)) "
            f'FROM "{postgres_space.schema}".memories',
            "zebra or espresso or tea",
        )
        exact = dict(rows)
    finally:
        await connection.close()
    assert len(hits) == 6
    # Reported as rank / (rank + 1), PostgreSQL's normalisation into [0, 1).
    expected = [exact[item] / (exact[item] + 1) for item, _ in hits]
    assert [score for _, score in hits] == pytest.approx(expected)


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
