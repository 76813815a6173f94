"""``MemoryToolkit.call`` under hostile calls: whatever the name and arguments, and with access
control on or off, a call returns a result or the documented error, and never raises."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ditto import create_ditto
from ditto.app.tools import MemoryToolkit
from tests.app.tools.fuzzing import (
    FUZZ,
    FUZZ_TIMEOUT,
    hostile_arguments,
    hostile_json,
    hostile_names,
)
from workers.memory import AccessPolicy, InProcessMemoryStore, create_memory_worker

pytestmark = pytest.mark.anyio


@pytest.fixture(params=["off", "enforce"])
async def toolkit(request: pytest.FixtureRequest) -> AsyncIterator[MemoryToolkit]:
    worker = create_memory_worker(InProcessMemoryStore(), access=AccessPolicy(mode=request.param))
    async with create_ditto(workers=[worker]) as runtime:
        yield MemoryToolkit(runtime, principal="bob", session_id="chat-1")


def _documented(result: Any) -> None:
    assert isinstance(result, dict)
    if "error" in result:
        assert set(result) == {"error"}
        assert set(result["error"]) == {"code", "message"}
        code, message = result["error"]["code"], result["error"]["message"]
        assert isinstance(code, str), result
        assert code.isupper(), result
        assert isinstance(message, str), result
        assert message, result
        assert code != "INTERNAL_ERROR", result  # a hostile call is refused, not a crash


@FUZZ_TIMEOUT
@FUZZ
@given(name=hostile_names, arguments=hostile_arguments | hostile_json | st.none())
async def test_a_hostile_call_never_raises(
    toolkit: MemoryToolkit, name: Any, arguments: Any
) -> None:
    _documented(await toolkit.call(name, arguments))


async def test_every_tool_on_a_closed_runtime_is_an_error_result() -> None:
    async with create_ditto(workers=[create_memory_worker(InProcessMemoryStore())]) as runtime:
        toolkit = MemoryToolkit(runtime, session_id="chat-1")
    for name, arguments in (
        ("memory_store", {"key": "k", "value": "v"}),
        ("memory_recall", {"query": "q"}),
        ("memory_search", {"query": "q"}),
        ("memory_get", {"key": "k"}),
        ("memory_forget", {"key": "k"}),
        ("memory_why", {"query": "q", "key": "k"}),
        ("remember_memory", {"content": "c"}),
        ("recall_memory", {"query": "q"}),
        ("search_history", {"query": "q"}),
    ):
        result = await toolkit.call(name, arguments)
        assert result["error"]["code"] == "RUNTIME_CLOSED", (name, result)
