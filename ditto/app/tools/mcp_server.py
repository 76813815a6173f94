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

Transports: :mod:`~ditto.app.tools.mcp_stdio` (every JSON-RPC request answered, also lines the
SDK cannot read) and :mod:`~ditto.app.tools.mcp_http` (a bearer token guards every request);
both are re-exported here.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, unquote, urlsplit

import anyio
from mcp import types
from mcp.server.lowlevel import Server
from mcp.shared.exceptions import MCPError

from ditto import __version__
from ditto.app.tools.mcp_http import is_loopback, serve_http
from ditto.app.tools.mcp_stdio import serve_stdio
from ditto.errors import DittoError

if TYPE_CHECKING:
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
    if not _servable(key):
        raise _refused("INVALID_INPUT", f"{shape}; a key has no '.' or '..' segment")
    return key


def _servable(key: str) -> bool:
    """Whether a key can be named by a resource URI: a ``.`` or ``..`` segment is refused
    (a client joining it to a path would climb out), so such a key is not listed either."""
    return not any(segment in (".", "..") for segment in key.replace("\\", "/").split("/"))


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
        self._failure: DittoError | None = None
        """Why it could not be opened, when that is a coded error (a store unavailable)."""

    async def __call__(self) -> MemoryToolkit:
        """The toolkit, opening it on the first call.

        Raises:
            MCPError: It could not be opened: the coded error (``STORE_UNAVAILABLE: no folder
                ...``), or ``INTERNAL_ERROR`` with the cause in the log.
        """
        self._wanted.set()
        await self._ready.wait()
        if self._toolkit is None:
            if self._failure is not None:
                raise MCPError(_INTERNAL_ERROR, f"{self._failure.code}: {self._failure.message}")
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
        except DittoError as exc:  # coded, with a message safe to show: no traceback needed
            self._failure = exc
            logger.error("the memory runtime could not be opened: %s: %s", exc.code, exc.message)
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
            if item.key is not None and item.namespace == kit.namespace and _servable(item.key)
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
