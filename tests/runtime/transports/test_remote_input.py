"""Input a remote worker cannot be sent (over real Redis Streams): ``INVALID_INPUT`` in the
result, as a local handler's contract answers, never an exception out of ``invoke`` or
``run`` — and nothing reaches the worker."""

from __future__ import annotations

from typing import Any

import pytest

from ditto import NodeContext, create_ditto, define_worker, graph
from tests.runtime.transports.conftest import Harness

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize(
    ("value", "why"),
    [
        ("a\ud800", "not valid Unicode"),
        (2**70, "64-bit range"),
        (object(), "type object"),
    ],
    ids=["lone surrogate", "int past 64 bits", "object"],
)
async def test_input_the_wire_cannot_carry_is_invalid_input(
    harness: Harness, value: Any, why: str
) -> None:
    seen: list[Any] = []

    async def echo(payload: Any, ctx: NodeContext) -> Any:
        seen.append(payload)
        return payload

    await harness.serve(define_worker("echo", {"ECHO.RUN": echo}), "echo-remote-1")
    async with create_ditto() as runtime:
        runtime.register_remote(["ECHO.RUN"], transport=harness.new_transport())
        result = await runtime.invoke("ECHO.RUN", {"value": value}, timeout=20)
        plan = (
            graph("two")
            .node("bad", "ECHO.RUN", [], lambda _, deps: {"value": value})
            .node("good", "ECHO.RUN", [], lambda _, deps: {"value": 1})
        )
        run = await runtime.run(plan, timeout=20)
    assert result.status == "failed"
    assert result.error is not None
    assert result.error.code == "INVALID_INPUT"
    assert why in result.error.message
    assert not result.error.retryable
    assert run["bad"].error is not None
    assert run["bad"].error.code == "INVALID_INPUT"
    assert run["good"].ok
    assert seen == [{"value": 1}], "only the sendable call reached the worker"
