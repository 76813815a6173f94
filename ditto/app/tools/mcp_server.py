"""The memory tools as an MCP server (the official ``mcp`` SDK, the ``mcp`` extra).

* **Tools** — the toolkit's tools with their JSON Schemas; a call's result is the toolkit's dict,
  as structured content and as JSON text; a failed call is a tool error (``isError``) whose
  content is ``{"error": {"code", "message"}}``, so the model reads why.
* **Resources** — every record with a key, at ``memory://{namespace}/{key}`` (the key
  percent-encoded), and that URI template for any key.

Every request goes through the toolkit, so through ``runtime.invoke``: the principal and
namespace the server was started with decide what it sees, with access control and audit.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import quote, unquote, urlsplit

from mcp import types
from mcp.server.lowlevel import Server
from mcp.shared.exceptions import MCPError

from ditto import __version__
from ditto.app.tools.toolkit import MemoryToolkit, text_of

__all__ = ("SCHEME", "create_mcp_server", "record_uri", "serve_http", "serve_stdio")

SCHEME = "memory"
_INVALID_PARAMS = -32602
_RESOURCE_PAGE = 1_000


def record_uri(namespace: str, key: str) -> str:
    """``memory://{namespace}/{key}``, both parts percent-encoded."""
    return f"{SCHEME}://{quote(namespace, safe='')}/{quote(key, safe='')}"


def _parse(uri: str) -> tuple[str, str]:
    parts = urlsplit(uri)
    key = parts.path.removeprefix("/")
    if parts.scheme != SCHEME or not parts.netloc or not key or "/" in key:
        raise MCPError(_INVALID_PARAMS, f"not a memory URI: {uri!r} (memory://NAMESPACE/KEY)")
    return unquote(parts.netloc), unquote(key)


def create_mcp_server(toolkit: MemoryToolkit) -> Server[Any]:
    """An MCP server offering ``toolkit``'s tools and its namespace's records."""

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
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
            for tool in await toolkit.mcp_tools()
        ]
        return types.ListToolsResult(tools=tools)

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        result = await toolkit.call(params.name, dict(params.arguments or {}))
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=json.dumps(result, ensure_ascii=False))],
            structured_content=result,
            is_error="error" in result,
        )

    async def list_resource_templates(ctx: Any, params: Any) -> types.ListResourceTemplatesResult:
        template = types.ResourceTemplate(
            name="memory",
            uri_template=f"{SCHEME}://{{namespace}}/{{key}}",
            description="A memory record by namespace and key.",
        )
        return types.ListResourceTemplatesResult(resource_templates=[template])

    async def list_resources(ctx: Any, params: Any) -> types.ListResourcesResult:
        result = await toolkit.runtime.invoke(
            "MEMORY.QUERY",
            {"filter": {"namespace": toolkit.namespace}, "limit": _RESOURCE_PAGE},
            principal=toolkit.principal,
        )
        if result.error is not None:
            raise MCPError(_INVALID_PARAMS, f"{result.error.code}: {result.error.message}")
        resources = [
            types.Resource(
                name=item.key,
                uri=record_uri(item.namespace, item.key),
                description=item.summary,
                mime_type=_mime(item.content),
            )
            for item in result.unwrap().items
            if item.key is not None
        ]
        return types.ListResourcesResult(resources=resources)

    async def read_resource(
        ctx: Any, params: types.ReadResourceRequestParams
    ) -> types.ReadResourceResult:
        uri = str(params.uri)
        namespace, key = _parse(uri)
        result = await toolkit.runtime.invoke(
            "MEMORY.GET", {"keys": [key], "namespace": namespace}, principal=toolkit.principal
        )
        if result.error is not None:
            raise MCPError(_INVALID_PARAMS, f"{result.error.code}: {result.error.message}")
        items = result.unwrap().items
        if not items:
            raise MCPError(_INVALID_PARAMS, f"NOT_FOUND: no memory at {uri}")
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


async def serve_stdio(server: Server[Any]) -> None:
    """Serve one client over this process's stdin and stdout until it disconnects."""
    from mcp.server.stdio import stdio_server

    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


async def serve_http(server: Server[Any], host: str, port: int) -> None:
    """Serve streamable HTTP at ``http://HOST:PORT/mcp`` until cancelled."""
    import uvicorn

    app = server.streamable_http_app(host=host)
    config = uvicorn.Config(app, host=host, port=port, log_level="warning", lifespan="on")
    await uvicorn.Server(config).serve()
