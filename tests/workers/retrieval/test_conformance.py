"""RETRIEVAL.SEARCH conformance: every target (in-process and SQLite memory stores, a corpus
folder, Milvus Lite) answers the same queries the same way — the same best document, top-k
semantics, filters applied before the limit, the request's target and strategy echoed, and the
same stable codes for what it cannot do."""

from __future__ import annotations

import math

import pytest

from ditto.errors import ErrorCode
from tests.workers.retrieval.conftest import DOCS, TARGET, Retrieval

pytestmark = pytest.mark.anyio


def _text_strategies(retrieval: Retrieval) -> list[str]:
    return [s for s in ("keyword", "vector", "hybrid") if s in retrieval.strategies]


async def test_the_provider_offers_its_strategies_default_first(retrieval: Retrieval) -> None:
    assert retrieval.provider.strategies == retrieval.strategies
    output = (await retrieval.search(query="red fruit")).unwrap()
    assert output.strategy == retrieval.strategies[0]
    assert output.metadata["provider"] == retrieval.provider.kind


async def test_a_document_found_by_its_own_text_comes_first(retrieval: Retrieval) -> None:
    banana = DOCS["banana"][1]
    for strategy in _text_strategies(retrieval):
        names = await retrieval.names(query=banana, strategy=strategy, limit=3)
        assert names[0] == "banana", strategy


async def test_keyword_words_find_the_document_that_holds_them(retrieval: Retrieval) -> None:
    if "keyword" not in retrieval.strategies:
        pytest.skip(f"{retrieval.kind} has no keyword strategy (see the unsupported test)")
    assert (await retrieval.names(query="crisp orchard apples", strategy="keyword"))[0] == "apple"


async def test_at_most_limit_candidates_the_top_of_a_longer_list(retrieval: Retrieval) -> None:
    for strategy in _text_strategies(retrieval):
        longer = await retrieval.names(query="red fruit", strategy=strategy, limit=6)
        top = await retrieval.names(query="red fruit", strategy=strategy, limit=2)
        assert len(top) == 2, strategy
        assert top == longer[:2], strategy


async def test_scores_are_finite_and_descend(retrieval: Retrieval) -> None:
    for strategy in _text_strategies(retrieval):
        output = (await retrieval.search(query="red fruit", strategy=strategy, limit=6)).unwrap()
        scores = [candidate.score for candidate in output.candidates]
        assert all(score is not None and math.isfinite(score) for score in scores)
        assert scores == sorted(scores, reverse=True), strategy


async def test_filters_apply_before_the_limit(retrieval: Retrieval) -> None:
    apple = DOCS["apple"][1]
    only_veg = {"metadata": {"folder": "veg"}}
    for strategy in _text_strategies(retrieval):
        # The fruit documents rank first without the filter; with it, the one hit is a root.
        names = await retrieval.names(query=apple, strategy=strategy, limit=1, filter=only_veg)
        assert len(names) == 1, strategy
        assert DOCS[names[0]][0] == "veg", strategy


async def test_candidates_say_where_they_come_from(retrieval: Retrieval) -> None:
    strategy = retrieval.strategies[0]
    output = (await retrieval.search(query="red fruit", strategy=strategy, limit=6)).unwrap()
    ids = [candidate.id for candidate in output.candidates]
    assert len(set(ids)) == len(ids) > 0
    for candidate in output.candidates:
        assert candidate.source is not None
        assert candidate.source.target == TARGET
        assert candidate.source.ref == candidate.id


async def test_the_same_query_gets_the_same_ids(retrieval: Retrieval) -> None:
    strategy = retrieval.strategies[0]
    first = (await retrieval.search(query="red fruit", strategy=strategy)).unwrap()
    again = (await retrieval.search(query="red fruit", strategy=strategy)).unwrap()
    assert [c.id for c in first.candidates] == [c.id for c in again.candidates]


async def test_nothing_matching_is_an_empty_list_with_the_target(retrieval: Retrieval) -> None:
    if "keyword" not in retrieval.strategies:
        pytest.skip(f"{retrieval.kind}: every vector has a nearest neighbour")
    target = {"name": TARGET, "metadata": {"asked_by": "test"}}
    output = (await retrieval.search(query="zeppelin", strategy="keyword", target=target)).unwrap()
    assert output.candidates == []
    assert output.strategy == "keyword"
    assert output.target.name == TARGET
    assert output.target.metadata == {"asked_by": "test"}


async def test_a_filter_nothing_passes_is_an_empty_list(retrieval: Retrieval) -> None:
    strategy = retrieval.strategies[0]
    nowhere = {"metadata": {"folder": "nowhere"}}
    output = (await retrieval.search(query="red fruit", strategy=strategy, filter=nowhere)).unwrap()
    assert output.candidates == []


async def test_an_unknown_target_is_target_not_found(retrieval: Retrieval) -> None:
    for target in ({"name": "elsewhere"}, {"name": TARGET, "type": "another-kind"}):
        result = await retrieval.search(query="red", target=target)
        assert result.status == "failed"
        assert result.error.code == ErrorCode.RETRIEVAL_TARGET_NOT_FOUND


async def test_the_provider_kind_may_be_asked_for(retrieval: Retrieval) -> None:
    target = {"name": TARGET, "type": retrieval.provider.kind}
    assert (await retrieval.search(query="red fruit", target=target)).ok


@pytest.mark.parametrize("strategy", ["rag", "RAG", "telepathy"])
async def test_a_strategy_the_target_lacks_is_unsupported(
    retrieval: Retrieval, strategy: str
) -> None:
    result = await retrieval.search(query="red", strategy=strategy)
    assert result.error is not None
    assert result.error.code == ErrorCode.RETRIEVAL_STRATEGY_UNSUPPORTED


async def test_every_strategy_it_lacks_is_unsupported(retrieval: Retrieval) -> None:
    for strategy in {"keyword", "vector", "hybrid"} - set(retrieval.strategies):
        result = await retrieval.search(query="red", strategy=strategy)
        assert result.error is not None
        assert result.error.code == ErrorCode.RETRIEVAL_STRATEGY_UNSUPPORTED, strategy


@pytest.mark.parametrize(
    "request_",
    [
        {"query": "red", "limit": 0},
        {"query": "red", "limit": 10_001},
        {"query": "red", "limit": True},
        {"target": {"name": TARGET}},
        {"query": "red", "target": {"name": ""}},
        {"query": "red", "filter": {"colour": "red"}},
        {"query": "red", "options": {"no_such_option": 1}},
        {"query": "red", "unexpected": 1},
        {"query": {"content": {"not": "text"}}, "strategy": "vector"},
        {"query": "x" * 10_001},
    ],
    ids=[
        "limit-0",
        "limit-too-big",
        "limit-bool",
        "no-query",
        "empty-target",
        "unknown-filter-key",
        "unknown-option",
        "unknown-field",
        "query-not-text",
        "query-too-long",
    ],
)
async def test_bad_input_is_invalid_input(
    retrieval: Retrieval, request_: dict[str, object]
) -> None:
    request = dict(request_)
    if request.get("strategy") == "vector" and "vector" not in retrieval.strategies:
        pytest.skip(f"{retrieval.kind} has no vector strategy")
    result = await retrieval.search(**request)
    assert result.status == "failed"
    assert result.error is not None
    assert result.error.code == ErrorCode.INVALID_INPUT, result.error


async def test_a_namespace_is_refused_where_the_target_has_none(retrieval: Retrieval) -> None:
    target = {"name": TARGET, "namespace": "team-a"}
    result = await retrieval.search(query="red fruit", target=target)
    if retrieval.provider.kind == "memory":
        assert result.ok  # a memory store has namespaces: this one is empty
        assert result.unwrap().candidates == []
    else:
        assert result.error is not None
        assert result.error.code == ErrorCode.INVALID_INPUT
