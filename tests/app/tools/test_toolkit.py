"""The memory tools as a model calls them: PRX's five and PAR's three, their schemas in the
model APIs' shapes, readable errors, and access control that holds through every tool."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest

from ditto import Ditto, create_ditto
from ditto.app.tools import (
    PAR_TOOLS,
    PRX_TOOLS,
    MemoryToolkit,
    anthropic_tools,
    mcp_tools,
    openai_tools,
    save_turn,
)
from ditto.app.tools.toolkit import DEFAULT_MAX_VALUE_BYTES
from workers.memory import AccessPolicy, InProcessMemoryStore, create_memory_worker

pytestmark = pytest.mark.anyio


@pytest.fixture
async def runtime() -> AsyncIterator[Ditto]:
    async with create_ditto(workers=[create_memory_worker(InProcessMemoryStore())]) as runtime:
        yield runtime


@pytest.fixture
async def guarded() -> AsyncIterator[Ditto]:
    worker = create_memory_worker(InProcessMemoryStore(), access=AccessPolicy(mode="enforce"))
    async with create_ditto(workers=[worker]) as runtime:
        yield runtime


async def test_prx_tools_store_get_search_recall_and_forget(runtime: Ditto) -> None:
    tools = MemoryToolkit(runtime, families=["prx"])
    stored = await tools.call(
        "memory_store", {"key": "user_timezone", "value": "The user is in UTC+8 (Shanghai)"}
    )
    assert stored == {
        "stored": "user_timezone",
        "category": "core",
        "version": 1,
        "note": "Stored.",
    }
    await tools.call(
        "memory_store",
        {"key": "deadline", "value": "The report deadline is Friday", "category": "daily"},
    )
    again = await tools.call("memory_store", {"key": "user_timezone", "value": "UTC+8, Shanghai"})
    assert again["version"] == 2  # the same key replaces

    got = await tools.call("memory_get", {"key": "user_timezone"})
    assert (got["key"], got["category"], got["content"]) == (
        "user_timezone",
        "core",
        "UTC+8, Shanghai",
    )

    daily = await tools.call("memory_search", {"query": "deadline friday", "category": "daily"})
    assert [m["key"] for m in daily["memories"]] == ["deadline"]
    assert (await tools.call("memory_search", {"query": "deadline", "category": "core"})) == {
        "memories": []
    }
    recalled = await tools.call("memory_recall", {"query": "report deadline", "max_results": 1})
    assert [m["key"] for m in recalled["memories"]] == ["deadline"]
    assert 0 < recalled["memories"][0]["score"] <= 1

    assert await tools.call("memory_forget", {"key": "deadline"}) == {
        "forgotten": True,
        "key": "deadline",
    }
    assert await tools.call("memory_forget", {"key": "deadline"}) == {
        "forgotten": False,
        "key": "deadline",
    }  # "no memory found" is not an error
    missing = await tools.call("memory_get", {"key": "deadline"})
    assert missing["error"]["code"] == "NOT_FOUND"


async def test_par_tools_are_scoped_to_the_session(runtime: Ditto) -> None:
    mine = MemoryToolkit(runtime, session_id="chat-1", families=["par"])
    theirs = MemoryToolkit(runtime, session_id="chat-2", families=["par"])
    await mine.call(
        "remember_memory",
        {"content": "The user's cat is called Miso", "summary": "cat", "categories": ["pets"]},
    )
    await theirs.call("remember_memory", {"content": "The user's cat is called Pixel"})
    recalled = await mine.call("recall_memory", {"query": "cat called"})
    assert [m["content"] for m in recalled["memories"]] == ["The user's cat is called Miso"]

    await save_turn(mine, "user", "Let's plan the trip to Kyoto in April")
    await save_turn(theirs, "user", "Kyoto is lovely in autumn")
    history = await mine.call("search_history", {"query": "Kyoto trip", "limit": 5})
    assert [m["content"] for m in history["memories"]] == ["Let's plan the trip to Kyoto in April"]
    assert all(m["category"] == "conversation" for m in history["memories"])


async def test_bad_calls_are_readable_errors_never_exceptions(runtime: Ditto) -> None:
    tools = MemoryToolkit(runtime)
    for name, arguments in (
        ("memory_store", {"key": "k"}),  # value missing
        ("memory_recall", {"query": "x", "max_results": 0}),
        ("memory_get", {"key": "k", "extra": 1}),
        ("memory_search", "{not json"),
        ("no_such_tool", {}),
    ):
        result = await tools.call(name, arguments)
        assert result["error"]["code"] == "INVALID_INPUT", (name, result)
        assert result["error"]["message"]
    # The JSON text a model API hands over works as well as a mapping.
    assert "stored" in await tools.call("memory_store", json.dumps({"key": "k", "value": "v"}))


async def test_acl_holds_through_every_tool(guarded: Ditto) -> None:
    alice = MemoryToolkit(guarded, principal="alice")
    bob = MemoryToolkit(guarded, principal="bob")
    await alice.call("memory_store", {"key": "diary", "value": "alice's secret plan"})
    await alice.call("remember_memory", {"content": "alice's secret recipe"})
    for name, arguments in (
        ("memory_search", {"query": "secret"}),
        ("memory_recall", {"query": "secret plan"}),
        ("recall_memory", {"query": "secret recipe"}),
    ):
        assert (await bob.call(name, arguments)) == {"memories": []}, name
        assert (await alice.call(name, arguments))["memories"], name
    assert (await bob.call("memory_get", {"key": "diary"}))["error"]["code"] == "NOT_FOUND"
    assert (await bob.call("memory_forget", {"key": "diary"}))["forgotten"] is False
    assert (await alice.call("memory_get", {"key": "diary"}))["content"] == "alice's secret plan"

    anonymous = MemoryToolkit(guarded)
    assert await anonymous.specs() == []  # every call would be refused: nothing is offered
    refused = await anonymous.call("memory_get", {"key": "diary"})
    assert refused["error"]["code"] == "FORBIDDEN"  # called anyway: refused, readably
    assert len(await alice.specs()) == len(PRX_TOOLS) + len(PAR_TOOLS)


async def test_tools_export_in_each_api_shape(runtime: Ditto) -> None:
    tools = MemoryToolkit(runtime)
    names = {spec.name for spec in await tools.specs()}
    assert names == {spec.name for spec in (*PRX_TOOLS, *PAR_TOOLS)}
    specs = await tools.specs()
    for exported, key in (
        (openai_tools(specs), None),
        (anthropic_tools(specs), "input_schema"),
        (mcp_tools(specs), "inputSchema"),
    ):
        for tool in exported:
            schema: dict[str, Any] = tool["function"]["parameters"] if key is None else tool[key]
            assert schema["type"] == "object"
            assert schema["additionalProperties"] is False
            assert set(schema["required"]) <= set(schema["properties"])
    assert await tools.openai_tools() == openai_tools(specs)
    store = next(tool for tool in mcp_tools(specs) if tool["name"] == "memory_store")
    assert store["inputSchema"]["required"] == ["key", "value"]
    assert store["inputSchema"]["properties"]["category"]["default"] == "core"
    assert store["annotations"]["readOnlyHint"] is False


def _nested_mapping(depth: int) -> dict[str, Any]:
    nested: dict[str, Any] = {}
    for _ in range(depth):
        nested = {"k": nested}
    return nested


async def test_a_call_is_total_whatever_it_is_given(runtime: Ditto) -> None:
    tools = MemoryToolkit(runtime)
    hostile: list[tuple[Any, Any]] = [
        ("memory_get", [1, 2]),
        ("memory_get", 123),
        ("memory_get", '{"key": "\ud800"}'),  # JSON text holding a lone surrogate
        ("memory_get", '{"key": "\\ud800"}'),  # ... and its escape
        ("memory_get", b"\xff\xfe"),
        ("memory_get", {"key": _nested_mapping(100_000)}),
        ("memory_get", "[" * 100_000),
        ("memory_store", {"key": "\ud800", "value": "v"}),
        (["memory_get"], {"key": "k"}),  # a list as the tool's name
        (None, None),
        ({"name": "memory_get"}, {}),
    ]
    for name, arguments in hostile:
        result = await tools.call(name, arguments)
        assert result["error"]["code"] == "INVALID_INPUT", (name, result)
        assert isinstance(result["error"]["message"], str)


async def test_a_call_on_a_closed_runtime_is_an_error_result() -> None:
    async with create_ditto(workers=[create_memory_worker(InProcessMemoryStore())]) as runtime:
        tools = MemoryToolkit(runtime)
    assert (await tools.call("memory_get", {"key": "k"}))["error"]["code"] == "RUNTIME_CLOSED"


async def test_a_stored_value_over_the_cap_is_refused_naming_the_limit(runtime: Ditto) -> None:
    tools = MemoryToolkit(runtime)
    assert tools.max_value_bytes == DEFAULT_MAX_VALUE_BYTES == 64 * 1024
    at_cap = "é" * (DEFAULT_MAX_VALUE_BYTES // 2)  # two UTF-8 bytes each: exactly the cap
    assert "stored" in await tools.call("memory_store", {"key": "k", "value": at_cap})
    for name, arguments in (
        ("memory_store", {"key": "k", "value": at_cap + "a"}),
        ("remember_memory", {"content": "x" * (DEFAULT_MAX_VALUE_BYTES + 1)}),
        ("remember_memory", {"content": "x", "summary": "😀" * DEFAULT_MAX_VALUE_BYTES}),
        ("memory_store", json.dumps({"key": "k", "value": "x" * 20_000_000})),
    ):
        refused = await tools.call(name, arguments)
        assert refused["error"]["code"] == "INVALID_INPUT", name
        assert "65,536 bytes" in refused["error"]["message"]
    assert (await tools.call("memory_get", {"key": "k"}))["content"] == at_cap  # untouched

    small = MemoryToolkit(runtime, max_value_bytes=10)
    assert "stored" in await small.call("memory_store", {"key": "s", "value": "x" * 10})
    refused = await small.call("memory_store", {"key": "s", "value": "x" * 11})
    assert "the limit is 10 bytes" in refused["error"]["message"]
    with pytest.raises(ValueError, match="max_value_bytes"):
        MemoryToolkit(runtime, max_value_bytes=0)


async def test_a_blank_value_is_refused_and_stores_nothing(runtime: Ditto) -> None:
    tools = MemoryToolkit(runtime)
    for name, arguments in (
        ("memory_store", {"key": "k", "value": "   "}),
        ("remember_memory", {"content": "\n\t "}),
    ):
        refused = await tools.call(name, arguments)
        assert refused["error"]["code"] == "INVALID_INPUT", name
        assert "blank" in refused["error"]["message"]
    assert "error" in await tools.call("memory_get", {"key": "k"})


async def test_a_forgotten_preference_does_not_come_back_from_the_conversation(
    runtime: Ditto,
) -> None:
    """The user states a preference (a saved turn), the agent stores it, the user asks to forget
    it: recall and search no longer surface it — the turn stays in the transcript, found by
    search_history or an explicit category='conversation' search."""
    toolkit = MemoryToolkit(runtime, principal="alice", session_id="chat-1")
    await save_turn(toolkit, "user", "I prefer tabs over spaces for indentation.")
    await toolkit.call("memory_store", {"key": "code_style", "value": "prefers tabs"})
    forgot = await toolkit.call("memory_forget", {"key": "code_style"})
    assert forgot["forgotten"] is True
    for tool in ("memory_search", "memory_recall"):
        found = await toolkit.call(tool, {"query": "tabs indentation"})
        assert found == {"memories": []}, (tool, found)
    turns = await toolkit.call("search_history", {"query": "tabs indentation"})
    assert [memory["content"] for memory in turns["memories"]] == [
        "I prefer tabs over spaces for indentation."
    ]
    explicit = await toolkit.call(
        "memory_search", {"query": "tabs indentation", "category": "conversation"}
    )
    assert len(explicit["memories"]) == 1


async def test_memory_store_tells_the_model_what_the_write_policy_did() -> None:
    from workers.memory.policy.config import StageModes, WritePolicy

    policy = WritePolicy(StageModes(safety="enforce", contradiction="enforce"))
    worker = create_memory_worker(InProcessMemoryStore(), policy=policy)
    async with create_ditto(workers=[worker]) as runtime:
        tools = MemoryToolkit(runtime, families=["prx"])
        first = await tools.call("memory_store", {"key": "city", "value": "lives in Berlin"})
        again = await tools.call("memory_store", {"key": "city", "value": "lives in Berlin"})
        moved = await tools.call("memory_store", {"key": "city", "value": "lives in Paris"})
        secret = await tools.call(
            "memory_store",
            {"key": "deploy", "value": "token ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"},
        )
        recalled = await tools.call("memory_recall", {"query": "lives"})
    assert first["note"] == "Stored."
    assert again["note"] == "Already remembered: nothing new was stored."
    assert moved["note"] == "Stored; it replaces an older memory, which is kept in history."
    assert secret["note"] == "Stored. Removed before storing: api_key."
    assert "Berlin" not in json.dumps(recalled)  # the superseded fact is not recalled


async def test_memory_why_tells_the_model_what_kept_a_memory_out() -> None:
    async with create_ditto(workers=[create_memory_worker(InProcessMemoryStore())]) as runtime:
        tools = MemoryToolkit(runtime, families=["prx"])
        await tools.call("memory_store", {"key": "style", "value": "prefers tabs for indentation"})
        found = await tools.call("memory_why", {"query": "tabs", "key": "style"})
        unmatched = await tools.call("memory_why", {"query": "spaces", "key": "style"})
        absent = await tools.call("memory_why", {"query": "tabs", "key": "nothing"})
    assert (found["stage"], found["rank"]) == ("returned", 1)
    assert unmatched["stage"] == "not_a_candidate"
    assert absent["stage"] == "not_found"
