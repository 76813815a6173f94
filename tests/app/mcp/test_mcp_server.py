"""``ditto mcp serve`` driven by the official MCP SDK client: a real server process over stdio
and over streamable HTTP; initialise, list tools (schemas valid JSON Schema), call each tool,
error shapes, and records as resources."""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest

pytest.importorskip("mcp", reason="the mcp extra is not installed")

import httpx2
from jsonschema import Draft202012Validator
from mcp import ClientSession, types
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from tests.app.cli.runner import ditto_command, run_cli
from tests.services import _free_port as free_port

pytestmark = pytest.mark.anyio

TOOLS = {
    "memory_store",
    "memory_recall",
    "memory_search",
    "memory_get",
    "memory_forget",
    "memory_why",
    "remember_memory",
    "recall_memory",
    "search_history",
}


def _config(folder: Path) -> Path:
    path = folder / "ditto.yaml"
    path.write_text(f"workers:\n  memory:\n    sqlite_path: '{folder / 'memory.sqlite'}'\n")
    return path


@asynccontextmanager
async def stdio_session(folder: Path, *extra: str) -> AsyncIterator[ClientSession]:
    command, *args = ditto_command()
    server = StdioServerParameters(
        command=command,
        args=[*args, "mcp", "serve", "--config", str(_config(folder)), *extra],
        env={"DITTO_MCP_SESSION": "chat-1"},
        cwd=str(folder),
    )
    async with stdio_client(server) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        yield session


def _payload(result: types.CallToolResult) -> dict[str, Any]:
    assert result.content
    assert result.content[0].type == "text"
    text = json.loads(result.content[0].text)
    assert result.structured_content in (None, text)
    return dict(text)


async def exercise(session: ClientSession) -> None:
    listed = await session.list_tools()
    assert {tool.name for tool in listed.tools} == TOOLS
    for tool in listed.tools:
        Draft202012Validator.check_schema(tool.input_schema)
        assert tool.description
    store = next(tool for tool in listed.tools if tool.name == "memory_store")
    Draft202012Validator(store.input_schema).validate({"key": "k", "value": "v"})

    stored = await session.call_tool(
        "memory_store", {"key": "user_timezone", "value": "UTC+8 (Shanghai)"}
    )
    assert not stored.is_error
    assert _payload(stored) == {
        "stored": "user_timezone",
        "category": "core",
        "version": 1,
        "note": "Stored.",
    }
    got = _payload(await session.call_tool("memory_get", {"key": "user_timezone"}))
    assert got["content"] == "UTC+8 (Shanghai)"
    found = _payload(await session.call_tool("memory_search", {"query": "timezone shanghai"}))
    assert [m["key"] for m in found["memories"]] == ["user_timezone"]
    recalled = _payload(await session.call_tool("memory_recall", {"query": "shanghai"}))
    assert [m["key"] for m in recalled["memories"]] == ["user_timezone"]
    remembered = _payload(
        await session.call_tool("remember_memory", {"content": "the cat is called Miso"})
    )
    assert "stored" in remembered
    session_hits = _payload(await session.call_tool("recall_memory", {"query": "cat Miso"}))
    assert [m["content"] for m in session_hits["memories"]] == ["the cat is called Miso"]
    history = _payload(await session.call_tool("search_history", {"query": "anything"}))
    assert history == {"memories": []}

    # A key no resource URI may name (a '..' segment) is stored, but never listed.
    climbing = {"key": "a/../b", "value": "x"}
    assert "stored" in _payload(await session.call_tool("memory_store", climbing))
    resources = await session.list_resources()
    assert [str(r.uri) for r in resources.resources] == ["memory://default/user_timezone"]
    read = await session.read_resource("memory://default/user_timezone")
    assert read.contents[0].text == "UTC+8 (Shanghai)"
    with pytest.raises(MCPError, match="NOT_FOUND"):
        await session.read_resource("memory://default/nothing-here")
    templates = await session.list_resource_templates()
    assert templates.resource_templates[0].uri_template == "memory://default/{key}"

    forgotten = _payload(await session.call_tool("memory_forget", {"key": "user_timezone"}))
    assert forgotten == {"forgotten": True, "key": "user_timezone"}
    missing = await session.call_tool("memory_get", {"key": "user_timezone"})
    assert missing.is_error
    assert _payload(missing)["error"]["code"] == "NOT_FOUND"
    bad = await session.call_tool("memory_recall", {"query": "x", "max_results": "many"})
    assert bad.is_error
    assert _payload(bad)["error"]["code"] == "INVALID_INPUT"


async def test_stdio_server_process(tmp_path: Path) -> None:
    with anyio.fail_after(60):
        async with stdio_session(tmp_path) as session:
            await exercise(session)


@asynccontextmanager
async def http_server(folder: Path, **env: str) -> AsyncIterator[str]:
    """``ditto mcp serve --transport http`` on a free loopback port: its endpoint's URL, once
    it listens. Its standard error is kept in ``folder/stderr.txt``."""
    port = free_port()
    command = [
        *ditto_command(),
        *("mcp", "serve", "--transport", "http", "--port", str(port)),
        *("--config", str(_config(folder))),
    ]
    with (folder / "stderr.txt").open("wb") as stderr:
        process = await anyio.open_process(
            command,
            cwd=folder,
            env={**os.environ, "DITTO_MCP_SESSION": "chat-1", **env},
            stdout=None,
            stderr=stderr,
        )
        try:
            with anyio.fail_after(60):
                while True:  # wait until it listens
                    try:
                        await (await anyio.connect_tcp("127.0.0.1", port)).aclose()
                        break
                    except OSError:
                        assert process.returncode is None, "the server exited"
                        await anyio.sleep(0.1)
            yield f"http://127.0.0.1:{port}/mcp"
        finally:
            process.terminate()
            with anyio.fail_after(10):
                await process.wait()


async def test_http_server_process(tmp_path: Path) -> None:
    async with http_server(tmp_path) as url:
        with anyio.fail_after(60):
            async with (
                streamable_http_client(url) as (read, write),
                ClientSession(read, write) as session,
            ):
                await session.initialize()
                await exercise(session)


_TOKEN = "s3cret-token-for-the-test"
_INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "test", "version": "1"},
    },
}
_HEADERS = {"Accept": "application/json, text/event-stream"}


async def test_http_with_a_token_refuses_every_request_without_it(tmp_path: Path) -> None:
    async with http_server(tmp_path, DITTO_MCP_TOKEN=_TOKEN) as url:
        with anyio.fail_after(60):
            async with httpx2.AsyncClient() as client:
                for authorization in (None, "Bearer wrong", f"Basic {_TOKEN}", _TOKEN, "bearer x"):
                    headers = dict(_HEADERS)
                    if authorization is not None:
                        headers["Authorization"] = authorization
                    for method in ("POST", "GET", "DELETE"):
                        refused = await client.request(
                            method, url, json=_INITIALIZE, headers=headers
                        )
                        assert refused.status_code == 401, (method, authorization)
                        assert refused.headers["www-authenticate"].startswith("Bearer")
                        assert _TOKEN not in refused.text
            authorised = httpx2.AsyncClient(headers={"Authorization": f"Bearer {_TOKEN}"})
            async with (
                authorised,
                streamable_http_client(url, http_client=authorised) as (read, write),
                ClientSession(read, write) as session,
            ):
                await session.initialize()
                assert {tool.name for tool in (await session.list_tools()).tools} == TOOLS
    assert _TOKEN not in (tmp_path / "stderr.txt").read_text()


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "192.0.2.1", "example.com"])
def test_http_off_loopback_without_a_token_refuses_to_start(tmp_path: Path, host: str) -> None:
    completed = run_cli(
        "mcp",
        "serve",
        "--transport",
        "http",
        "--host",
        host,
        cwd=tmp_path,
        env={"DITTO_MCP_TOKEN": None},
    )
    assert completed.returncode == 2
    assert len(completed.stderr.strip().splitlines()) == 1
    assert "DITTO_MCP_TOKEN" in completed.stderr
    assert host in completed.stderr


@pytest.mark.parametrize("flags", [("--namespace", ""), ("--principal", "p" * 257)])
def test_an_empty_or_oversize_name_refuses_to_start(tmp_path: Path, flags: tuple[str, str]) -> None:
    """Refused at once, not on every tool call (where a model would blame its arguments)."""
    completed = run_cli("mcp", "serve", *flags, cwd=tmp_path)
    assert completed.returncode == 2
    assert completed.stderr.strip() == f"{flags[0]} must be 1 to 256 characters"


async def test_resources_are_confined_to_the_servers_namespace(tmp_path: Path) -> None:
    with anyio.fail_after(60):
        async with stdio_session(tmp_path, "--namespace", "alice", "--principal", "alice") as alice:
            assert not (
                await alice.call_tool("memory_store", {"key": "secret", "value": "a"})
            ).is_error
        async with stdio_session(tmp_path, "--principal", "bob") as bob:
            stored = await bob.call_tool("memory_store", {"key": "mine", "value": "b"})
            assert not stored.is_error
            listed = await bob.list_resources()
            assert [str(r.uri) for r in listed.resources] == ["memory://default/mine"]
            assert (await bob.read_resource("memory://default/mine")).contents[0].text == "b"
            for uri, code in (
                ("memory://alice/secret", "FORBIDDEN"),
                ("memory://%61lice/secret", "FORBIDDEN"),
                ("memory://default/..%2Falice%2Fsecret", "INVALID_INPUT"),
                ("memory://default/mine%2F..%2F..%2Falice%2Fsecret", "INVALID_INPUT"),
                ("memory://default/..", "INVALID_INPUT"),
                ("memory://default/mine?namespace=alice", "INVALID_INPUT"),
                ("memory://default/mine#fragment", "INVALID_INPUT"),
                ("memory://default/mine/..", "INVALID_INPUT"),
                ("file:///etc/passwd", "INVALID_INPUT"),
            ):
                with pytest.raises(MCPError, match=code):
                    await bob.read_resource(uri)


def test_an_unknown_transport_is_a_usage_error(tmp_path: Path) -> None:
    completed = run_cli("mcp", "serve", "--transport", "pigeon", cwd=tmp_path)
    assert completed.returncode == 2
    assert "use stdio or http" in completed.stderr


async def test_a_store_that_will_not_open_is_named_by_its_code(tmp_path: Path) -> None:
    """Not a bare INTERNAL_ERROR: a client (and the person reading its log) sees why."""
    missing = tmp_path / "no-such-folder" / "memory.sqlite"
    config = tmp_path / "ditto.yaml"
    config.write_text(f"workers:\n  memory:\n    sqlite_path: '{missing}'\n")
    command, *args = ditto_command()
    server = StdioServerParameters(
        command=command, args=[*args, "mcp", "serve", "--config", str(config)], cwd=str(tmp_path)
    )
    with anyio.fail_after(60):
        async with stdio_client(server) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            with pytest.raises(MCPError, match=r"^STORE_UNAVAILABLE: no folder"):
                await session.call_tool("memory_get", {"key": "k"})
    assert not missing.parent.exists()
