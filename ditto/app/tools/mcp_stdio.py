"""The MCP server over stdio, answering every JSON-RPC request: a line the SDK cannot read (not
JSON, a lone surrogate, nesting too deep, invalid UTF-8) gets a JSON-RPC error carrying the
request's id when it can be found (``null`` otherwise), where the SDK would drop it silently
and leave the client waiting."""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any, cast

import anyio
from mcp import types
from mcp.server.lowlevel import Server

if TYPE_CHECKING:
    from anyio.abc import ObjectSendStream
    from mcp.shared.message import SessionMessage

__all__ = ("request_id", "serve_stdio")

logger = logging.getLogger(__name__)

_PARSE_ERROR = -32700
_INVALID_REQUEST = -32600

_DECODER = json.JSONDecoder()


def request_id(line: str) -> int | str | None:
    """The ``id`` of the JSON-RPC object ``line`` holds, read without decoding the rest (which
    may be nested too deep or hold a lone surrogate); ``None`` when there is none to find."""
    at = _skip_space(line, 0)
    if not line.startswith("{", at):
        return None
    at = _skip_space(line, at + 1)
    try:
        while line.startswith('"', at):
            name, at = _DECODER.raw_decode(line, at)
            at = _skip_space(line, at)
            if not line.startswith(":", at):
                return None
            at = _skip_space(line, at + 1)
            if name == "id":
                found, _ = _DECODER.raw_decode(line, at)
                valid = isinstance(found, str) or (
                    isinstance(found, int) and not isinstance(found, bool)
                )
                return found if valid else None
            at = _skip_space(line, _skip_value(line, at))
            if not line.startswith(",", at):
                return None
            at = _skip_space(line, at + 1)
    except (ValueError, RecursionError):
        return None
    return None


def _skip_space(text: str, at: int) -> int:
    while at < len(text) and text[at] in " \t\r\n":
        at += 1
    return at


def _skip_value(text: str, at: int) -> int:
    """The index after the JSON value at ``at``, counting brackets instead of recursing."""
    depth = 0
    while at < len(text):
        char = text[at]
        if char == '"':
            _, at = _DECODER.raw_decode(text, at)
        elif char in "[{":
            depth += 1
            at += 1
        elif char in "]}":
            if depth == 0:
                return at
            depth -= 1
            at += 1
        elif char == "," and depth == 0:
            return at
        else:
            at += 1
        if depth == 0 and char in '"]}':
            return at
    return at


def _unreadable(line: str, *, utf8: bool = True) -> SessionMessage | None:
    """The error answering a line the SDK cannot read (``utf8``: whether its bytes were UTF-8);
    ``None`` for a notification."""
    from mcp.shared.message import SessionMessage

    try:
        decoded = json.loads(line)
    except (ValueError, RecursionError):
        code, message = _PARSE_ERROR, "Parse error: not JSON, or nested too deep"
    else:
        if isinstance(decoded, dict) and "method" in decoded and "id" not in decoded:
            return None  # a notification: nothing waits for an answer
        code = _INVALID_REQUEST
        message = "Invalid request: not a JSON-RPC 2.0 message (or text that is not valid Unicode)"
    if not utf8:
        code, message = _PARSE_ERROR, "Parse error: the message is not UTF-8 text"
    error = types.ErrorData(code=code, message=message)
    return SessionMessage(types.JSONRPCError(jsonrpc="2.0", id=request_id(line), error=error))


class _CheckedLines:
    """The lines of stdin the SDK's stdio transport reads, minus those it could not read: each
    of those is answered here (the SDK would drop it silently)."""

    def __init__(self, answers: ObjectSendStream[SessionMessage]) -> None:
        self._answers = answers

    def __aiter__(self) -> AsyncIterator[str]:
        return self._lines()

    async def _lines(self) -> AsyncIterator[str]:
        import sys

        from mcp.types import jsonrpc_message_adapter

        stdin = sys.stdin.buffer
        while True:
            raw = await anyio.to_thread.run_sync(stdin.readline)
            if not raw:
                return
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError:
                # Refused, not repaired: U+FFFD in place of the bytes would store another key.
                line, utf8 = raw.decode("utf-8", errors="replace"), False
            else:
                utf8 = True
            if not line.strip():
                continue
            try:
                if not utf8:
                    raise ValueError("not UTF-8")
                jsonrpc_message_adapter.validate_json(line, by_name=False)
            except Exception:
                answer = _unreadable(line, utf8=utf8)
                found = None if answer is None else getattr(answer.message, "id", None)
                logger.warning("refused an unreadable MCP message (id %r)", found)
                if answer is not None:
                    await self._answers.send(answer)
                continue
            yield line


async def serve_stdio(server: Server[Any]) -> None:
    """Serve one client over this process's stdin and stdout until it disconnects."""
    from mcp.server.stdio import stdio_server
    from mcp.shared.message import SessionMessage

    answers, unanswered = anyio.create_memory_object_stream[SessionMessage](16)
    lines = cast("anyio.AsyncFile[str]", _CheckedLines(answers))
    async with stdio_server(stdin=lines) as (read, write), anyio.create_task_group() as group:

        async def forward() -> None:
            async with unanswered:
                async for answer in unanswered:
                    try:
                        await write.send(answer)
                    except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                        return

        group.start_soon(forward)
        await server.run(read, write, server.create_initialization_options())
        group.cancel_scope.cancel()
