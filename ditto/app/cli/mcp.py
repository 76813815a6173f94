"""``ditto mcp serve``: the memory tools as an MCP server, over stdio or streamable HTTP."""

from __future__ import annotations

from typing import Annotated

import anyio
import typer

from ditto.app.cli.memory_common import ConfigOption
from ditto.app.cli.output import errors, settings_or_exit

mcp_app = typer.Typer(help="Serve the memory tools to MCP clients.", no_args_is_help=True)


@mcp_app.command("serve")
def serve(
    config: ConfigOption = None,
    transport: Annotated[
        str, typer.Option(help="stdio (a client starts this process) or http.")
    ] = "stdio",
    host: Annotated[str, typer.Option(help="HTTP: the address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=1, max=65_535, help="HTTP: the port.")] = 8000,
    principal: Annotated[
        str | None,
        typer.Option(envvar="DITTO_MCP_PRINCIPAL", help="Who the tools act for (access control)."),
    ] = None,
    namespace: Annotated[
        str, typer.Option(envvar="DITTO_MCP_NAMESPACE", help="Where the tools read and write.")
    ] = "default",
    session: Annotated[
        str | None,
        typer.Option(envvar="DITTO_MCP_SESSION", help="The session PAR's tools are scoped to."),
    ] = None,
) -> None:
    """Serve the memory tools (PRX's and PAR's) and the records (memory://NAMESPACE/KEY) to an
    MCP client, on the store ditto.yaml configures. Over HTTP the endpoint is
    http://HOST:PORT/mcp. Logs go to stderr; stdout carries the protocol only."""
    if transport not in ("stdio", "http"):
        errors.print(f"unknown transport {transport!r}: use stdio or http", highlight=False)
        raise typer.Exit(2)
    try:
        from ditto.app.tools import mcp_server
    except ImportError:
        errors.print(
            "the MCP server needs the mcp extra: pip install 'ditto-runtime[mcp]'",
            markup=False,
            highlight=False,
        )
        raise typer.Exit(2) from None
    settings = settings_or_exit(config)

    async def main() -> None:
        from ditto.app.bootstrap import open_runtime
        from ditto.app.tools import MemoryToolkit

        async with open_runtime(settings) as runtime:
            toolkit = MemoryToolkit(
                runtime, principal=principal, namespace=namespace, session_id=session
            )
            server = mcp_server.create_mcp_server(toolkit)
            if transport == "stdio":
                await mcp_server.serve_stdio(server)
            else:
                errors.print(f"MCP over HTTP at http://{host}:{port}/mcp", highlight=False)
                await mcp_server.serve_http(server, host, port)

    try:
        anyio.run(main)
    except KeyboardInterrupt:
        raise typer.Exit(0) from None
