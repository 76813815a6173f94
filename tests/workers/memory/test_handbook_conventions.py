"""The handbook's own conventions never miss silently: ``metadata.namespace`` places a record,
and ``metadata.savedAt`` dates it for the ``recent-keyword`` strategy."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from ditto import create_ditto
from workers.memory import InProcessMemoryStore, create_memory_worker
from workers.memory.retrieval.recency import recency_search

pytestmark = pytest.mark.anyio


async def test_metadata_namespace_places_the_record_where_the_filter_finds_it() -> None:
    async with create_ditto(workers=[create_memory_worker(InProcessMemoryStore())]) as runtime:
        written = await runtime.invoke(
            "MEMORY.WRITE",
            {
                "memories": [
                    {"key": "alice:lang", "content": "zh", "metadata": {"namespace": "alice"}}
                ]
            },
        )
        found = await runtime.invoke("MEMORY.QUERY", {"filter": {"namespace": "alice"}})
        hits = await runtime.invoke(
            "MEMORY.SEARCH", {"query": "zh", "filter": {"namespace": "alice"}}
        )
        by_key = await runtime.invoke("MEMORY.GET", {"keys": ["alice:lang"], "namespace": "alice"})
    (item,) = written.unwrap().items
    assert item.namespace == "alice"
    assert item.metadata == {"namespace": "alice"}  # kept as written
    assert [record.id for record in found.unwrap().items] == [item.id]
    assert [hit.memory.id for hit in hits.unwrap().hits] == [item.id]
    assert [record.id for record in by_key.unwrap().items] == [item.id]


@pytest.mark.parametrize(
    ("draft", "problem"),
    [
        ({"content": 1, "namespace": "bob", "metadata": {"namespace": "alice"}}, "two namespaces"),
        ({"content": 1, "metadata": {"namespace": 7}}, "metadata.namespace"),
        ({"content": 1, "metadata": {"namespace": ""}}, "metadata.namespace"),
    ],
)
async def test_a_draft_naming_two_namespaces_is_refused(
    draft: dict[str, object], problem: str
) -> None:
    store = InProcessMemoryStore()
    async with create_ditto(workers=[create_memory_worker(store)]) as runtime:
        result = await runtime.invoke("MEMORY.WRITE", {"memories": [draft]})
        everything = await runtime.invoke("MEMORY.QUERY", {"filter": {"archived": "include"}})
    assert result.error is not None
    assert result.error.code == "INVALID_INPUT"
    assert problem in result.error.message
    assert everything.unwrap().items == []


async def test_recency_reads_the_handbook_saved_at_spelling() -> None:
    store = InProcessMemoryStore()
    now = datetime(2026, 9, 1, tzinfo=UTC)
    ranking = recency_search(store, now)
    async with create_ditto(workers=[create_memory_worker(store, ranking)]) as runtime:
        await runtime.invoke(
            "MEMORY.WRITE",
            {
                "memories": [
                    {
                        "key": "older",
                        "content": "Redis context",
                        "metadata": {"savedAt": "2026-01-01T00:00:00Z"},
                    },
                    {
                        "key": "newer",
                        "content": "Redis context",
                        "metadata": {"savedAt": "2026-08-31T00:00:00Z"},
                    },
                ]
            },
        )
        hits = await runtime.invoke(
            "MEMORY.SEARCH", {"query": "Redis", "strategy": "recent-keyword", "limit": 2}
        )
    ranked = [(hit.memory.key, hit.score) for hit in hits.unwrap().hits]
    assert ranked == [("newer", 0.5), ("older", pytest.approx(1 / 244))]
