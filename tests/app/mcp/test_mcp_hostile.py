"""``ditto mcp serve`` over stdio under hostile requests, written as raw JSON-RPC lines (what the
SDK client cannot send: lone surrogates, nesting 100,000 deep, text that is not JSON): every
request gets a response with its id, a result or an error, and the server stays up; with
access control off and on."""

from __future__ import annotations

import json
import os
import select
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp", reason="the mcp extra is not installed")

from hypothesis import given
from hypothesis import strategies as st

from tests.app.cli.runner import ditto_command
from tests.app.tools.fuzzing import FUZZ, FUZZ_TIMEOUT, hostile_json, hostile_names, json_values

_ANSWER_WITHIN = 60.0
"""Seconds to wait for an answer before calling the request unanswered (a hang guard)."""

_ACL = {"off": "", "enforce": "    acl:\n      mode: enforce\n"}


class RawClient:
    """A client writing JSON-RPC lines to a server process and reading its answers."""

    def __init__(self, process: subprocess.Popen[bytes]) -> None:
        self.process = process
        self._next_id = 0

    def send(self, line: str) -> None:
        assert self.process.stdin is not None
        # surrogatepass: a raw lone surrogate reaches the server as the bytes that encode it.
        self.process.stdin.write(line.encode("utf-8", "surrogatepass") + b"\n")
        self.process.stdin.flush()

    def answer(self, request_id: int) -> dict[str, Any]:
        """The response to ``request_id``, skipping any other line (an error with a null id)."""
        assert self.process.stdout is not None
        while True:
            ready, _, _ = select.select([self.process.stdout], [], [], _ANSWER_WITHIN)
            assert ready, f"request {request_id} got no answer"
            line = self.process.stdout.readline()
            assert line, f"the server exited (code {self.process.poll()}) before answering"
            message = json.loads(line)
            if message.get("id") == request_id:
                assert message.get("jsonrpc") == "2.0"
                assert ("result" in message) != ("error" in message), message
                return dict(message)

    def request(self, method: str, params: str) -> dict[str, Any]:
        """Send ``method`` with ``params`` (raw JSON text, valid or not) and read its answer."""
        self._next_id += 1
        self.send(f'{{"jsonrpc":"2.0","id":{self._next_id},"method":"{method}","params":{params}}}')
        return self.answer(self._next_id)

    def call(self, name: str, arguments: str) -> dict[str, Any]:
        return self.request("tools/call", f'{{"name":{name},"arguments":{arguments}}}')


def _config(folder: Path, acl: str) -> Path:
    path = folder / "ditto.yaml"
    path.write_text(
        f"workers:\n  memory:\n    sqlite_path: '{folder / 'memory.sqlite'}'\n{_ACL[acl]}"
    )
    return path


@pytest.fixture(scope="module", params=sorted(_ACL))
def server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RawClient]:
    folder = tmp_path_factory.mktemp(f"mcp-{request.param}")
    process = subprocess.Popen(
        [*ditto_command(), "mcp", "serve", "--config", str(_config(folder, request.param))],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        cwd=folder,
        env={**os.environ, "DITTO_MCP_PRINCIPAL": "bob", "DITTO_MCP_SESSION": "chat-1"},
    )
    client = RawClient(process)
    try:
        initialised = client.request(
            "initialize",
            '{"protocolVersion":"2025-06-18","capabilities":{},'
            '"clientInfo":{"name":"fuzz","version":"1"}}',
        )
        assert "result" in initialised, initialised
        client.send('{"jsonrpc":"2.0","method":"notifications/initialized"}')
        stored = client.call('"memory_store"', '{"key":"k","value":"v"}')
        assert stored["result"]["isError"] is False, stored
        yield client
    finally:
        assert process.stdin is not None
        process.stdin.close()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        finally:
            assert process.stdout is not None
            process.stdout.close()


def _assert_alive(server: RawClient) -> None:
    """The server still answers an ordinary call."""
    got = server.call('"memory_get"', '{"key":"k"}')
    assert got["result"]["structuredContent"]["content"] == "v", got


@pytest.mark.parametrize(
    "arguments",
    [
        pytest.param('{"key":"\\ud800"}', id="lone-surrogate-escape"),
        pytest.param('{"key":"' + "\ud800" + '"}', id="lone-surrogate-raw"),
        pytest.param("[" * 100_000 + "]" * 100_000, id="nested-100000"),
        pytest.param('{"key":' + '{"k":' * 100_000 + "0" + "}" * 100_000 + "}", id="deep-object"),
        pytest.param("[" * 100_000, id="never-closed"),
        pytest.param("not json", id="not-json"),
        pytest.param("[1, 2]", id="a-list"),
        pytest.param("123", id="a-number"),
    ],
)
def test_a_hostile_tool_call_is_answered(server: RawClient, arguments: str) -> None:
    answered = server.call('"memory_get"', arguments)
    if "result" in answered:  # a tool error the model reads
        assert answered["result"]["isError"] is True
        assert answered["result"]["structuredContent"]["error"]["code"] == "INVALID_INPUT"
    else:  # a JSON-RPC error the client reads
        assert answered["error"]["code"] in (-32700, -32600, -32602)
        assert answered["error"]["message"]
    _assert_alive(server)


def test_a_line_without_a_readable_id_is_answered_with_a_null_id(server: RawClient) -> None:
    server.send("[" * 100_000)
    assert server.process.stdout is not None
    ready, _, _ = select.select([server.process.stdout], [], [], _ANSWER_WITHIN)
    assert ready, "no answer"
    answer = json.loads(server.process.stdout.readline())
    assert answer["id"] is None
    assert answer["error"]["code"] == -32700
    _assert_alive(server)


_methods = st.sampled_from(
    ["tools/call", "tools/call", "tools/call", "resources/read", "tools/list", "no/such"]
)
_params = st.one_of(
    st.builds(
        lambda name, arguments: f'{{"name":{name},"arguments":{arguments}}}',
        hostile_names.map(lambda name: json.dumps(name, ensure_ascii=True)),
        hostile_json,
    ),
    json_values.map(lambda uri: json.dumps({"uri": uri}, ensure_ascii=True)),
    hostile_json,
)


@FUZZ_TIMEOUT
@FUZZ
@given(method=_methods, params=_params)
def test_every_hostile_request_is_answered(server: RawClient, method: str, params: str) -> None:
    server.request(method, params)
    assert server.process.poll() is None, "the server exited"
