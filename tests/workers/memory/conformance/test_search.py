"""MEMORY.SEARCH through the store's own keyword search, on every store that has one: OR-ed
words ranked by BM25, filters before the limit, user text that is always data, and an index
that follows every write."""

from __future__ import annotations

import pytest

from ditto import ErrorCode
from tests.workers.memory.conformance.helpers import code_of
from tests.workers.memory.conftest import MemoryHarness, requires
from workers.memory.ports import KeywordSearch

pytestmark = [pytest.mark.anyio, requires(KeywordSearch)]


async def test_keyword_search_matches_content_summary_and_key(memory: MemoryHarness) -> None:
    await memory.write(
        {"content": {"note": "the espresso machine is broken"}},
        {"content": 1, "summary": "quarterly espresso budget"},
        {"key": "espresso-supplier", "content": "call them monday"},
        {"content": "tea is fine"},
    )
    hits = (await memory.ok("MEMORY.SEARCH", {"query": "espresso"})).hits
    assert len(hits) == 3
    assert all(hit.score is not None for hit in hits)
    assert "tea is fine" not in [hit.memory.content for hit in hits]


async def test_keyword_search_has_or_semantics_and_ranks_better_matches_first(
    memory: MemoryHarness,
) -> None:
    await memory.write(
        {"content": "redis keeps the working context"},
        {"content": "redis context expires, restore history from memory"},
        {"content": "postgres stores durable memory"},
        *({"content": f"filler document number {n}"} for n in range(20)),
    )
    hits = (await memory.ok("MEMORY.SEARCH", {"query": "How does Redis context expire?"})).hits
    contents = [hit.memory.content for hit in hits]
    assert contents[0] == "redis context expires, restore history from memory"
    assert "redis keeps the working context" in contents
    assert "postgres stores durable memory" not in contents
    scores = [hit.score for hit in hits]
    assert scores == sorted(scores, reverse=True)


async def test_keyword_scores_are_in_the_unit_interval(memory: MemoryHarness) -> None:
    await memory.write(
        {"content": "zebra zebra zebra crossing at night"},
        {"content": "a zebra"},
        *({"content": f"crossing number {n} on the road"} for n in range(30)),
    )
    hits = (await memory.ok("MEMORY.SEARCH", {"query": "zebra crossing", "limit": 40})).hits
    assert len(hits) == 32
    assert all(0 < hit.score < 1 for hit in hits)
    assert hits[0].memory.content == "zebra zebra zebra crossing at night"


async def test_a_query_of_stop_words_only_matches_nothing(memory: MemoryHarness) -> None:
    await memory.write({"content": "what is it that we do here?"}, {"content": "tea is fine"})
    assert (await memory.ok("MEMORY.SEARCH", {"query": "What is it?"})).hits == []


WRITTEN_WORDS = (
    "Straße", "München", "brûlée", "İstanbul", "ﬁnance", "Œuvre", "Łódź", "Ελλάδα", "Москва",
    "ёлка", "ΣΊΣΥΦΟΣ", "ǅungla", "日本語",
)  # fmt: skip


async def test_a_word_as_written_finds_its_record_whatever_its_script(
    memory: MemoryHarness,
) -> None:
    await memory.write(
        *({"content": f"note {n}: {word} is here"} for n, word in enumerate(WRITTEN_WORDS))
    )
    for n, word in enumerate(WRITTEN_WORDS):
        hits = (await memory.ok("MEMORY.SEARCH", {"query": word})).hits
        assert f"note {n}: {word} is here" in [hit.memory.content for hit in hits], word


async def test_stemming_finds_other_word_forms(memory: MemoryHarness) -> None:
    await memory.write({"content": "three records were stored"})
    hits = (await memory.ok("MEMORY.SEARCH", {"query": "record"})).hits
    assert len(hits) == 1


async def test_search_filters_apply_before_the_limit(memory: MemoryHarness) -> None:
    await memory.write(*({"content": f"shared topic {n}", "namespace": "other"} for n in range(30)))
    await memory.write(*({"content": f"shared topic {n}", "namespace": "mine"} for n in range(4)))
    hits = (
        await memory.ok(
            "MEMORY.SEARCH", {"query": "shared topic", "filter": {"namespace": "mine"}, "limit": 3}
        )
    ).hits
    assert len(hits) == 3
    assert {hit.memory.namespace for hit in hits} == {"mine"}


async def test_search_limit_default_and_bounds(memory: MemoryHarness) -> None:
    await memory.write(*({"content": f"common word {n}"} for n in range(15)))
    assert len((await memory.ok("MEMORY.SEARCH", {"query": "common"})).hits) == 10
    assert (
        code_of(await memory.call("MEMORY.SEARCH", {"query": "x", "limit": 0})) == "INVALID_INPUT"
    )


@pytest.mark.parametrize(
    "query",
    [
        'espresso" OR "tea',
        "NEAR(espresso tea)",
        "espresso*",
        "^espresso",
        "key:espresso",
        "espresso AND NOT tea",
        "(((",
        '"',
        "''; DROP TABLE memories; --",
        "\x00espresso",
        "a" * 10_000,
        "",
        "   ",
        "!!!",
        "the of and",
    ],
)
async def test_any_query_text_is_safe(memory: MemoryHarness, query: str) -> None:
    await memory.write({"content": "espresso and tea"}, {"content": "unrelated"})
    result = await memory.call("MEMORY.SEARCH", {"query": query})
    assert result.ok, result.error
    assert len(await memory.all_records()) == 2


async def test_search_rejects_what_the_store_cannot_do(memory: MemoryHarness) -> None:
    for bad in (
        {"query": 42},
        {"query": "x", "strategy": "vector-magic"},
        {"query": "x", "options": {"fuzzy": True}},
    ):
        assert code_of(await memory.call("MEMORY.SEARCH", bad)) == ErrorCode.INVALID_INPUT, bad


async def test_hostile_content_is_stored_and_found(memory: MemoryHarness) -> None:
    hostile = [
        "quote \" and ' apostrophe OR NOT NEAR(a b) * ^ col:term",
        "nul\x00byte inside espresso",
        "emoji 😀 and ünïcödé espresso",
        "x" * (1 << 20) + " espresso",
    ]
    written = await memory.write(*({"content": text} for text in hostile))
    stored = {item.id: item.content for item in await memory.all_records()}
    assert [stored[item.id] for item in written] == hostile
    found = {
        hit.memory.content for hit in (await memory.ok("MEMORY.SEARCH", {"query": "espresso"})).hits
    }
    assert set(hostile[1:]) <= found
    quoted = await memory.ok("MEMORY.SEARCH", {"query": "apostrophe"})
    assert [hit.memory.content for hit in quoted.hits] == [hostile[0]]


async def test_updated_text_is_searchable_and_old_text_is_not(memory: MemoryHarness) -> None:
    (item,) = await memory.write({"content": "espresso"})
    await memory.ok("MEMORY.UPDATE", {"updates": [{"id": item.id, "content": "matcha"}]})
    assert (await memory.ok("MEMORY.SEARCH", {"query": "espresso"})).hits == []
    assert len((await memory.ok("MEMORY.SEARCH", {"query": "matcha"})).hits) == 1


async def test_a_word_is_found_right_after_a_search_that_missed_it(memory: MemoryHarness) -> None:
    await memory.write({"content": "espresso"})
    assert (await memory.ok("MEMORY.SEARCH", {"query": "zebra espresso"})).hits
    assert [
        h.memory.content for h in (await memory.ok("MEMORY.SEARCH", {"query": "zebra"})).hits
    ] == []
    await memory.write({"content": "a zebra crossing"})
    hits = (await memory.ok("MEMORY.SEARCH", {"query": "zebra"})).hits
    assert [hit.memory.content for hit in hits] == ["a zebra crossing"]
