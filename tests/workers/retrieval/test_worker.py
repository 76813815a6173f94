"""The RETRIEVAL worker's boundary: it refuses a bad configuration at once, trusts no provider
(too many candidates, repeats, non-finite scores are ``INVALID_BACKEND_OUTPUT``; an uncoded
failure is ``RETRIEVAL_BACKEND_ERROR`` with a fixed message) and closes what it owns."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import pytest

from ditto import create_ditto
from ditto.errors import DittoError, ErrorCode, InvalidInputError, WorkerCleanupError
from ditto.runtime.context import NodeContext
from workers.retrieval import (
    CandidateSource,
    ProviderRequest,
    ProviderResult,
    RetrievalCandidate,
    create_retrieval_worker,
)

pytestmark = pytest.mark.anyio


@dataclass
class ScriptedProvider:
    """A provider that answers every search with what the test scripts (a list of candidates,
    or an exception to raise): the worker must check whatever a provider returns."""

    answer: Any
    kind: str = "scripted"
    strategies: tuple[str, ...] = ("keyword", "vector")
    asked: list[ProviderRequest] = field(default_factory=list)
    closed: int = 0

    async def open(self) -> None:
        pass

    async def search(self, request: ProviderRequest, ctx: NodeContext) -> ProviderResult:
        self.asked.append(request)
        if isinstance(self.answer, BaseException):
            raise self.answer
        return ProviderResult(self.answer)

    async def aclose(self) -> None:
        self.closed += 1
        if self.kind == "fails-to-close":
            raise RuntimeError("cannot close")


def _candidate(id: str, score: float | None = 1.0) -> RetrievalCandidate:
    return RetrievalCandidate(content=id, id=id, score=score, source=CandidateSource("t", id))


async def _failure(provider: ScriptedProvider, **request: Any) -> Any:
    async with create_ditto(workers=[create_retrieval_worker({"t": provider})]) as runtime:
        result = await runtime.invoke(
            "RETRIEVAL.SEARCH", {"query": {"content": "q"}, "target": {"name": "t"}, **request}
        )
    assert result.status == "failed"
    return result.error


async def test_the_request_reaches_the_provider_resolved() -> None:
    provider = ScriptedProvider([_candidate("a")])
    worker = create_retrieval_worker({"t": provider}, search_limit=7)
    async with create_ditto(workers=[worker]) as runtime:
        output = (
            await runtime.invoke(
                "RETRIEVAL.SEARCH",
                {
                    "query": {"content": "q"},
                    "target": {"name": "t", "namespace": "n"},
                    "options": {"o": 1},
                },
            )
        ).unwrap()
    (asked,) = provider.asked
    assert (asked.target, asked.query, asked.strategy, asked.limit) == ("t", "q", "keyword", 7)
    assert (asked.namespace, asked.options) == ("n", {"o": 1})
    assert output.strategy == "keyword"
    assert output.metadata == {"provider": "scripted"}


@pytest.mark.parametrize(
    "answer",
    [
        [_candidate("a"), _candidate("b")],
        [_candidate("a"), _candidate("a")],
        [_candidate("a", math.nan)],
        [_candidate("a", math.inf)],
        ["not a candidate"],
    ],
    ids=["over-the-limit", "twice", "nan", "infinite", "not-a-candidate"],
)
async def test_a_provider_off_contract_is_invalid_backend_output(answer: list[Any]) -> None:
    error = await _failure(ScriptedProvider(answer), limit=1 if len(answer) == 2 else 10)
    assert error.code == ErrorCode.INVALID_BACKEND_OUTPUT


async def test_an_uncoded_failure_never_leaks_its_message() -> None:
    error = await _failure(ScriptedProvider(RuntimeError("password=hunter2")))
    assert error.code == ErrorCode.RETRIEVAL_BACKEND_ERROR
    assert "hunter2" not in error.message


async def test_a_coded_failure_keeps_its_code() -> None:
    coded = DittoError("try later", code=ErrorCode.STORE_UNAVAILABLE, retryable=True)
    error = await _failure(ScriptedProvider(coded))
    assert (error.code, error.message, error.retryable) == (
        ErrorCode.STORE_UNAVAILABLE,
        "try later",
        True,
    )


async def test_the_memory_pipeline_codes_are_renamed() -> None:
    no_search = DittoError("cannot search", code=ErrorCode.SEARCH_UNAVAILABLE)
    error = await _failure(ScriptedProvider(no_search))
    assert error.code == ErrorCode.RETRIEVAL_STRATEGY_UNSUPPORTED


@pytest.mark.parametrize(
    ("targets", "options"),
    [
        ({}, {}),
        ({"": ScriptedProvider([])}, {}),
        ({"t": object()}, {}),
        ({"t": ScriptedProvider([], strategies=())}, {}),
        ({"t": ScriptedProvider([])}, {"search_limit": 0}),
        ({"t": ScriptedProvider([])}, {"search_limit": True}),
    ],
    ids=["none", "empty-name", "not-a-provider", "no-strategy", "limit-0", "limit-bool"],
)
def test_a_bad_configuration_is_refused_at_once(
    targets: dict[str, Any], options: dict[str, Any]
) -> None:
    with pytest.raises(InvalidInputError):
        create_retrieval_worker(targets, **options)


async def test_owned_targets_are_all_closed_even_when_one_fails() -> None:
    failing = ScriptedProvider([], kind="fails-to-close")
    fine = ScriptedProvider([])
    worker = create_retrieval_worker({"a": failing, "b": fine}, own_targets=True)
    with pytest.raises(WorkerCleanupError) as raised:
        async with create_ditto(workers=[worker]):
            pass
    assert raised.group_contains(RuntimeError, match="cannot close", depth=2)
    assert (failing.closed, fine.closed) == (1, 1)


async def test_targets_the_application_owns_stay_open() -> None:
    provider = ScriptedProvider([])
    async with create_ditto(workers=[create_retrieval_worker({"t": provider})]):
        pass
    assert provider.closed == 0
