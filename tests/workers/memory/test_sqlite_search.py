"""The SQLite store's keyword search is the exact BM25 top-k over every match
(``stores.sqlite.topk``): the same records, scores and order as the pure reference
(``retrieval.keyword.bm25``) over the whole store, whatever the size, age or filter."""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from ditto import Ditto, create_ditto
from tests.workers.memory.conftest import TickingClock
from workers.memory import SqliteMemoryStore, create_memory_worker
from workers.memory.retrieval.keyword import bm25, calibrated
from workers.memory.stores.sqlite import topk
from workers.memory.stores.sqlite.bm25 import read_statistics
from workers.memory.stores.sqlite.search import KeywordPlanner
from workers.memory.stores.sqlite.sql import connect, match_expression
from workers.memory.stores.sqlite.topk import top_k

pytestmark = pytest.mark.anyio

# Words porter leaves distinct, none a stop word: FTS5's terms are these words one to one.
VOCABULARY = [
    *("zebra", "lion", "tiger", "otter", "panda", "koala", "camel", "horse", "moose"),
    *("bison", "eagle", "falcon", "heron", "raven", "salmon", "trout", "shark", "whale"),
]


@pytest.fixture
async def runtime(tmp_path: Path) -> AsyncIterator[Ditto]:
    store = SqliteMemoryStore(tmp_path / "memory.sqlite", clock=TickingClock())
    async with store, create_ditto(workers=[create_memory_worker(store)]) as runtime:
        yield runtime


async def write(runtime: Ditto, records: Sequence[dict[str, Any]]) -> list[str]:
    ids: list[str] = []
    for start in range(0, len(records), 500):
        batch = list(records[start : start + 500])
        result = (await runtime.invoke("MEMORY.WRITE", {"memories": batch})).unwrap()
        ids += [item.id for item in result.items]
    return ids


async def search(runtime: Ditto, query: str, **arguments: Any) -> list[tuple[str, float]]:
    result = (await runtime.invoke("MEMORY.SEARCH", {"query": query, **arguments})).unwrap()
    return [(hit.memory.id, hit.score) for hit in result.hits]


def reference(
    query: str, texts: dict[str, str], among: set[str] | None = None, limit: int = 10
) -> list[tuple[str, float]]:
    """The reference top ``limit`` of the records ``among`` (default: all), statistics over
    every record, best first, ties by id."""
    documents = {id: Counter(text.split()) for id, text in texts.items()}
    ids = [id for id in documents if among is None or id in among]
    scores = bm25(set(query.split()), [documents[id] for id in ids], documents.values())
    ranked = sorted(
        ((id, score) for id, score in zip(ids, scores, strict=True) if score > 0),
        key=lambda pair: (-pair[1], pair[0]),
    )
    return ranked[:limit]


def assert_same_ranking(got: list[tuple[str, float]], expected: list[tuple[str, float]]) -> None:
    """The same scores in the same order; records may differ only where scores tie."""
    assert [score for _, score in got] == pytest.approx([score for _, score in expected], rel=1e-9)
    exact = dict(expected)
    for id, score in got:
        if id in exact:
            assert score == pytest.approx(exact[id], rel=1e-9)


def fts5_ranking(connection: Any, words: Sequence[str], keep: Any) -> list[tuple[int, float]]:
    """FTS5's own ranking of the whole query, filtered: ``(rowid, -bm25())`` best first."""
    ranked = connection.execute(
        "SELECT rowid, -bm25(memory_fts) FROM memory_fts WHERE memory_fts MATCH ? "
        "ORDER BY bm25(memory_fts), rowid",
        (match_expression(words),),
    ).fetchall()
    kept = set(keep([doc for doc, _ in ranked]))
    return [(doc, score) for doc, score in ranked if doc in kept]


async def test_an_old_record_with_the_best_score_comes_first_among_many_newer_ones(
    runtime: Ditto,
) -> None:
    """A search that ranked only the newest postings of frequent words missed this record."""
    (old,) = await write(runtime, [{"content": "otter panda otter panda"}])
    generator = random.Random(3)
    newer = [
        {"content": " ".join(["otter", "panda", *generator.choices(VOCABULARY[6:], k=12)])}
        for _ in range(4_500)
    ]
    await write(runtime, newer)
    hits = await search(runtime, "otter panda")
    assert hits[0][0] == old
    assert hits[0][1] > hits[1][1]


async def test_the_top_k_is_exact_bm25_over_every_match(runtime: Ditto) -> None:
    generator = random.Random(11)
    weights = [1 / (rank + 1) for rank in range(len(VOCABULARY))]
    contents = [
        " ".join(generator.choices(VOCABULARY, weights, k=generator.randint(2, 14)))
        for _ in range(1_200)
    ]
    ids = await write(runtime, [{"content": text} for text in contents])
    texts = dict(zip(ids, contents, strict=True))
    queries = [" ".join(generator.sample(VOCABULARY, generator.randint(1, 4))) for _ in range(25)]
    for query in (*queries, "zebra lion", "whale shark trout", "zebra zebra whale"):
        got = await search(runtime, query, limit=10)
        assert_same_ranking(got, reference(query, texts))


async def test_the_filter_applies_before_the_limit(runtime: Ditto) -> None:
    """The best matches are elsewhere; the namespace's own best ten come back, scored with the
    whole store's statistics."""
    generator = random.Random(5)
    records = [
        {
            "content": " ".join(generator.choices(VOCABULARY, k=generator.randint(3, 10))),
            "namespace": "mine" if n % 50 == 0 else "theirs",
        }
        for n in range(1_500)
    ]
    ids = await write(runtime, records)
    texts = {id: record["content"] for id, record in zip(ids, records, strict=True)}
    mine = {id for id, record in zip(ids, records, strict=True) if record["namespace"] == "mine"}
    for query in ("zebra lion", "whale", "camel horse moose"):
        got = await search(runtime, query, filter={"namespace": "mine"})
        assert {id for id, _ in got} <= mine
        assert_same_ranking(got, reference(query, texts, among=mine))


@pytest.mark.parametrize("holding_at_once", [topk._HOLDING_AT_ONCE, 0])
@pytest.mark.parametrize("recount_cost", [0, 10**9], ids=["exact-threshold", "partial-threshold"])
async def test_pruning_alone_finds_the_exact_top_k(
    runtime: Ditto,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    holding_at_once: int,
    recount_cost: int,
) -> None:
    """``topk.top_k`` made to prune every query (a small store would rather let FTS5 rank):
    the same records and scores as the reference, with and without a filter — whether the rows
    holding a frequent word are counted again all at once or as the scan meets them, and
    whether step 1 counts them again to test the exact threshold before taking in another
    word (always, or never) — and FTS5's own ``-bm25()`` of the whole query to the last bit."""
    monkeypatch.setattr(topk, "_HOLDING_AT_ONCE", holding_at_once)
    monkeypatch.setattr(topk, "_RECOUNT_COST", recount_cost)
    generator = random.Random(17)
    weights = [1 / (rank + 1) ** 1.3 for rank in range(len(VOCABULARY))]
    records = [
        {
            "content": " ".join(generator.choices(VOCABULARY, weights, k=generator.randint(2, 16))),
            "namespace": "mine" if n % 3 == 0 else "theirs",
        }
        for n in range(1_500)
    ]
    # Long records too: a column of 128 tokens or more has a multi-byte size in FTS5's docsize.
    records += [
        {"content": " ".join(generator.choices(VOCABULARY, k=generator.randint(120, 400)))}
        for _ in range(30)
    ]
    ids = await write(runtime, records)
    texts = {id: record["content"] for id, record in zip(ids, records, strict=True)}
    mine = {
        id for id, record in zip(ids, records, strict=True) if record.get("namespace") == "mine"
    }
    connection = connect(str(tmp_path / "memory.sqlite"))
    planner = KeywordPlanner(connection)
    rows = dict(connection.execute("SELECT seq, id FROM memories").fetchall())
    queries = [" ".join(generator.sample(VOCABULARY, generator.randint(1, 5))) for _ in range(40)]
    try:
        for query in queries:
            words = query.split()
            terms = [term for (term,) in planner.terms(words)]
            connection.execute("BEGIN")
            statistics = read_statistics(connection, terms)
            assert statistics is not None
            ideal = sum(statistics.idf(term) for term in terms)
            for among in (None, mine):

                def keep(docs: list[int], among: set[str] | None = among) -> list[int]:
                    return [doc for doc in docs if among is None or rows[doc] in among]

                best = top_k(connection, words, terms, statistics, 10, keep, pays=1.0)
                assert best is not None
                assert best == fts5_ranking(connection, words, keep)[: len(best)]
                got = sorted(
                    ((rows[doc], calibrated(score, ideal)) for doc, score in best),
                    key=lambda pair: (-pair[1], pair[0]),
                )[:10]
                assert_same_ranking(got, reference(query, texts, among=among))
            connection.execute("COMMIT")
    finally:
        connection.close()


async def test_the_exact_threshold_takes_in_fewer_words_and_finds_the_same_top_k(
    runtime: Ditto, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A rare word beside two frequent ones. Where the rare word sits in short records, the
    rows holding it and a frequent word, counted again, give an exact ``k``-th score that
    reaches the frequent words' bounds where the partial one falls short: step 1 stops with
    fewer essential words. Where it sits in long records, even the exact scores fall short and
    short records repeating the two frequent words belong in the top ten: step 1 must take in
    another word to find them. Either way the top-k is FTS5's own ranking of the whole query,
    to the last bit."""
    generator = random.Random(23)
    frequent = [f"c{n}x" for n in range(5)]
    sharp, dull = [f"s{n}y" for n in range(5)], [f"d{n}y" for n in range(5)]

    def text(fillers: int, rare: list[str]) -> str:
        words = [f"f{generator.randrange(3000)}z" for _ in range(fillers)] + rare
        words += [word for word in frequent if generator.random() < 0.22]
        generator.shuffle(words)
        return " ".join(words)

    records = [
        text(generator.randint(4, 8), [word for word in sharp if generator.random() < 0.02])
        for _ in range(2_500)
    ]
    records += [text(generator.randint(30, 40), [dull[n % 5]]) for n in range(500)]
    records += [
        " ".join([first] * generator.randint(4, 8) + [second] * generator.randint(4, 8))
        for first, second in (generator.sample(frequent, 2) for _ in range(40))
    ]
    ids = await write(runtime, [{"content": record} for record in records])
    connection = connect(str(tmp_path / "memory.sqlite"))
    planner = KeywordPlanner(connection)
    rows = dict(connection.execute("SELECT seq, id FROM memories").fetchall())
    texts = dict(zip(ids, records, strict=True))
    essential: dict[int, list[int]] = {0: [], 10**9: []}
    scan = topk._scan

    def recording(*arguments: Any) -> Any:
        essential[topk._RECOUNT_COST].append(arguments[4])
        return scan(*arguments)

    monkeypatch.setattr(topk, "_scan", recording)
    without_rare = 0
    try:
        for rare in (*sharp, *dull):
            for pair in (frequent[:2], frequent[2:4], frequent[3:]):
                words = [rare, *pair]
                terms = [term for (term,) in planner.terms(words)]
                connection.execute("BEGIN")
                statistics = read_statistics(connection, terms)
                assert statistics is not None
                expected = fts5_ranking(connection, words, lambda docs: docs)
                for cost in essential:
                    monkeypatch.setattr(topk, "_RECOUNT_COST", cost)
                    best = top_k(connection, words, terms, statistics, 10, lambda d: d, pays=1.0)
                    assert best is not None
                    assert len(best) >= 10
                    assert best == expected[: len(best)]
                connection.execute("COMMIT")
                without_rare += any(rare not in texts[rows[doc]].split() for doc, _ in best)
    finally:
        connection.close()
    stopped_sooner = [a < b for a, b in zip(essential[0], essential[10**9], strict=True)]
    assert sum(stopped_sooner[:15]) >= 10, essential  # the sharp words' queries
    assert without_rare >= 10  # the dull words': rows without the rare word made the top ten
