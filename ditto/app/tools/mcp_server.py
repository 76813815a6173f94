"""The memory tools as an MCP server (the official ``mcp`` SDK, the ``mcp`` extra).

* **Tools** — the toolkit's tools with their JSON Schemas; a call's result is the toolkit's dict,
  as structured content and as JSON text; a failed call is a tool error (``isError``) whose
  content is ``{"error": {"code", "message"}}``, so the model reads why.
* **Resources** — every record with a key in the server's namespace, at
  ``memory://{namespace}/{key}`` (the key percent-encoded), and that URI template for any key.
  A URI naming another namespace, a key with a ``.``/``..`` segment, a query or a fragment is
  refused (``-32602``, ``FORBIDDEN`` or ``INVALID_INPUT``) before the store is asked.

Every request goes through the toolkit, so through ``runtime.invoke``: the principal and
namespace the server was started with decide what it sees, with access control and audit.

Every JSON-RPC request is answered: over stdio a line the SDK cannot read (not JSON, a lone
surrogate, nesting too deep) gets a JSON-RPC error carrying the request's id when it can be
found (``null`` otherwise), where the SDK would drop it and leave the client waiting.

Over streamable HTTP a bearer token (:func:`serve_http`'s ``token``) guards every request.
"""

from __future__ import annotations

import hmac
import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from typing import TYPE_CHECKING, Any, cast
from urllib.parse import quote, unquote, urlsplit

import anyio
from mcp import types
from mcp.server.lowlevel import Server
from mcp.shared.exceptions import MCPError

from ditto import __version__

if TYPE_CHECKING:
    from anyio.abc import ObjectSendStream
    from mcp.shared.message import SessionMessage

    from ditto.app.tools.toolkit import MemoryToolkit

__all__ = (
    "SCHEME",
    "LazyToolkit",
    "create_mcp_server",
    "is_loopback",
    "record_uri",
    "serve_http",
    "serve_stdio",
)

logger = logging.getLogger(__name__)

SCHEME = "memory"
_PARSE_ERROR = -32700
_INVALID_REQUEST = -32600
_INVALID_PARAMS = -32602
_INTERNAL_ERROR = -32603
_RESOURCE_PAGE = 1_000

ToolkitSource = Callable[[], Awaitable["MemoryToolkit"]]
"""What the handlers ask for the toolkit: a ready one, or one opened on first use."""


def record_uri(namespace: str, key: str) -> str:
    """``memory://{namespace}/{key}``, both parts percent-encoded."""
    return f"{SCHEME}://{quote(namespace, safe='')}/{quote(key, safe='')}"


def _refused(code: str, message: str) -> MCPError:
    return MCPError(_INVALID_PARAMS, f"{code}: {message}")


def _confined_key(uri: str, namespace: str) -> str:
    """The key ``uri`` names in ``namespace``.

    Raises:
        MCPError: ``INVALID_INPUT`` for a URI that is not ``memory://NAMESPACE/KEY`` (a query,
            a fragment, a key with a ``.`` or ``..`` segment once decoded), ``FORBIDDEN`` for
            one in another namespace.
    """
    shape = f"not a memory URI: {uri[:200]!r} (memory://NAMESPACE/KEY)"
    if "?" in uri or "#" in uri:
        raise _refused("INVALID_INPUT", f"{shape}; a memory URI takes no query or fragment")
    parts = urlsplit(uri)
    raw_key = parts.path.removeprefix("/")
    if parts.scheme != SCHEME or not parts.netloc or not raw_key or "/" in raw_key:
        raise _refused("INVALID_INPUT", shape)
    if unquote(parts.netloc) != namespace:
        raise _refused(
            "FORBIDDEN", f"{uri[:200]!r} is outside this server's namespace {namespace!r}"
        )
    key = unquote(raw_key)
    if any(segment in (".", "..") for segment in key.replace("\\", "/").split("/")):
        raise _refused("INVALID_INPUT", f"{shape}; a key has no '.' or '..' segment")
    return key


class LazyToolkit:
    """A toolkit opened on the first request that needs it, so ``initialize`` is answered
    before the runtime, its store and their imports are loaded.

    :meth:`run` opens and closes it in the serving task group's own task (a runtime's task
    groups must be left in the task that entered them); requests wait for it.

    Args:
        open_toolkit: Builds the toolkit and its runtime as one async context.
    """

    def __init__(self, open_toolkit: Callable[[], AbstractAsyncContextManager[MemoryToolkit]]):
        self._open = open_toolkit
        self._wanted = anyio.Event()
        self._ready = anyio.Event()
        self._closing = anyio.Event()
        self._toolkit: MemoryToolkit | None = None

    async def __call__(self) -> MemoryToolkit:
        """The toolkit, opening it on the first call.

        Raises:
            MCPError: It could not be opened (the cause is in the log).
        """
        self._wanted.set()
        await self._ready.wait()
        if self._toolkit is None:
            raise MCPError(_INTERNAL_ERROR, "INTERNAL_ERROR: the memory store could not be opened")
        return self._toolkit

    async def run(self) -> None:
        """Open the toolkit once it is wanted and hold it until :meth:`close`."""
        await self._wanted.wait()
        try:
            if self._closing.is_set():
                return
            async with self._open() as toolkit:
                self._toolkit = toolkit
                self._ready.set()
                await self._closing.wait()
        except Exception:
            logger.exception("the memory runtime could not be opened")
        finally:
            self._toolkit = None
            self._ready.set()

    def close(self) -> None:
        """Let :meth:`run` close the toolkit (or return, if it was never wanted)."""
        self._closing.set()
        self._wanted.set()


def create_mcp_server(toolkit: MemoryToolkit | ToolkitSource) -> Server[Any]:
    """An MCP server offering ``toolkit``'s tools and its namespace's records.

    Args:
        toolkit: The toolkit, or an async callable giving it (a :class:`LazyToolkit`).
    """
    if callable(toolkit):
        source = toolkit
    else:
        ready = toolkit

        async def source() -> MemoryToolkit:
            return ready

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        kit = await source()
        tools = [
            types.Tool(
                name=tool["name"],
                description=tool["description"],
                input_schema=tool["inputSchema"],
                annotations=types.ToolAnnotations(
                    read_only_hint=tool["annotations"]["readOnlyHint"],
                    destructive_hint=tool["annotations"]["destructiveHint"],
                    idempotent_hint=tool["annotations"]["idempotentHint"],
                ),
            )
            for tool in await kit.mcp_tools()
        ]
        return types.ListToolsResult(tools=tools)

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        kit = await source()
        result = await kit.call(params.name, params.arguments)
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=json.dumps(result, ensure_ascii=False))],
            structured_content=result,
            is_error="error" in result,
        )

    async def list_resource_templates(ctx: Any, params: Any) -> types.ListResourceTemplatesResult:
        kit = await source()
        template = types.ResourceTemplate(
            name="memory",
            uri_template=f"{SCHEME}://{quote(kit.namespace, safe='')}/{{key}}",
            description=f"A memory record of namespace {kit.namespace!r} by key.",
        )
        return types.ListResourceTemplatesResult(resource_templates=[template])

    async def list_resources(ctx: Any, params: Any) -> types.ListResourcesResult:
        kit = await source()
        result = await kit.runtime.invoke(
            "MEMORY.QUERY",
            {"filter": {"namespace": kit.namespace}, "limit": _RESOURCE_PAGE},
            principal=kit.principal,
        )
        if result.error is not None:
            raise _refused(result.error.code, result.error.message)
        resources = [
            types.Resource(
                name=item.key,
                uri=record_uri(item.namespace, item.key),
                description=item.summary,
                mime_type=_mime(item.content),
            )
            for item in result.unwrap().items
            if item.key is not None and item.namespace == kit.namespace
        ]
        return types.ListResourcesResult(resources=resources)

    async def read_resource(
        ctx: Any, params: types.ReadResourceRequestParams
    ) -> types.ReadResourceResult:
        from ditto.app.tools.toolkit import text_of

        kit = await source()
        uri = str(params.uri)
        key = _confined_key(uri, kit.namespace)
        result = await kit.runtime.invoke(
            "MEMORY.GET", {"keys": [key], "namespace": kit.namespace}, principal=kit.principal
        )
        if result.error is not None:
            raise _refused(result.error.code, result.error.message)
        items = result.unwrap().items
        if not items:
            raise _refused("NOT_FOUND", f"no memory at {uri}")
        item = items[0]
        return types.ReadResourceResult(
            contents=[
                types.TextResourceContents(
                    uri=uri, mime_type=_mime(item.content), text=text_of(item.content)
                )
            ]
        )

    return Server(
        "ditto-memory",
        version=__version__,
        instructions="Long-term memory: store, recall, search, get and forget memories by key.",
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        on_list_resources=list_resources,
        on_list_resource_templates=list_resource_templates,
        on_read_resource=read_resource,
    )


def _mime(content: Any) -> str:
    return "text/plain" if isinstance(content, str) else "application/json"


# ----------------------------------------------------------------- stdio

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


# ----------------------------------------------------------------- streamable HTTP


def is_loopback(host: str) -> bool:
    """Whether ``host`` (an address or ``localhost``) is reachable from this machine only."""
    import ipaddress

    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False  # a name other than localhost may resolve to any address


class _BearerToken:
    """ASGI middleware: an HTTP request without ``Authorization: Bearer <token>`` gets 401."""

    def __init__(self, app: Any, token: str) -> None:
        self._app = app
        self._token = token.encode()

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and not self._authorised(scope):
            body = b'{"error": "unauthorized: send Authorization: Bearer <DITTO_MCP_TOKEN>"}'
            await send(
                {
                    "type": "http.response.start",
                    "status": 401,
                    "headers": [
                        (b"content-type", b"application/json"),
                        (b"content-length", str(len(body)).encode()),
                        (b"www-authenticate", b'Bearer realm="ditto-mcp"'),
                    ],
                }
            )
            await send({"type": "http.response.body", "body": body})
            return
        await self._app(scope, receive, send)

    def _authorised(self, scope: Any) -> bool:
        given = b""
        for name, value in scope.get("headers", ()):
            if name.lower() == b"authorization":
                given = bytes(value)
                break
        scheme, _, credentials = given.partition(b" ")
        # Constant time: how much of a guess matched must not show in how long a refusal takes.
        matched = hmac.compare_digest(credentials.strip(), self._token)
        return matched and scheme.lower() == b"bearer"


async def serve_http(server: Server[Any], host: str, port: int, token: str | None = None) -> None:
    """Serve streamable HTTP at ``http://HOST:PORT/mcp`` until cancelled.

    Args:
        server: The MCP server.
        host: The address to listen on. On a loopback address the SDK refuses ``Host`` and
            ``Origin`` headers naming anything else (DNS rebinding).
        port: The port.
        token: When set, every request must carry ``Authorization: Bearer <token>`` (else 401).
            The caller requires one off loopback.
    """
    import uvicorn

    app: Any = server.streamable_http_app(host=host)
    if token:
        app = _BearerToken(app, token)
    config = uvicorn.Config(app, host=host, port=port, log_level="warning", lifespan="on")
    await uvicorn.Server(config).serve()
