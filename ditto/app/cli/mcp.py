"""``ditto mcp serve``: the memory tools as an MCP server, over stdio or streamable HTTP."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Annotated

import anyio
import typer

from ditto.app.cli.memory_common import ConfigOption
from ditto.app.cli.output import errors, settings_or_exit
from ditto.extras import install_hint

if TYPE_CHECKING:
    from ditto.app.tools import MemoryToolkit

TOKEN_VARIABLE = "DITTO_MCP_TOKEN"
"""The bearer token HTTP clients must send; required off loopback. Read from the environment
only (never an option: a command line shows in ``ps``)."""

mcp_app = typer.Typer(help="Serve the memory tools to MCP clients.", no_args_is_help=True)


_MAX_NAME = 256
"""The longest namespace or principal the MEMORY worker takes (its wire types' ``Name``)."""


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
    """Serve the memory tools (memory_store, memory_search and the rest) and the records
    (memory://NAMESPACE/KEY) to an MCP client, on the store ditto.yaml configures. Over HTTP
    the endpoint is http://HOST:PORT/mcp; with DITTO_MCP_TOKEN set every request needs
    "Authorization: Bearer <token>", and a non-loopback --host requires it. The store opens on
    the first request that needs it. Logs go to stderr; stdout carries the protocol only."""
    if transport not in ("stdio", "http"):
        errors.print(f"unknown transport {transport!r}: use stdio or http", highlight=False)
        raise typer.Exit(2)
    # Checked here, not on the first tool call, where the model would read the refusal as a
    # fault in its own arguments.
    for option, name in (("--namespace", namespace), ("--principal", principal)):
        if name is not None and not 1 <= len(name) <= _MAX_NAME:
            errors.print(f"{option} must be 1 to {_MAX_NAME} characters", highlight=False)
            raise typer.Exit(2)
    try:
        from ditto.app.tools import mcp_server
    except ImportError:
        errors.print(
            f"the MCP server needs the mcp extra: {install_hint('mcp')}",
            markup=False,
            highlight=False,
        )
        raise typer.Exit(2) from None
    token = os.environ.get(TOKEN_VARIABLE) or None
    if transport == "http" and token is None and not mcp_server.is_loopback(host):
        errors.print(
            f"refusing to serve MCP on {host}, which is not a loopback address, without "
            f"authentication: set {TOKEN_VARIABLE}",
            markup=False,
            highlight=False,
        )
        raise typer.Exit(2)
    settings = settings_or_exit(config)

    @asynccontextmanager
    async def open_toolkit() -> AsyncIterator[MemoryToolkit]:
        # Imported here: the runtime, its store and their dependencies load on first use, so
        # `initialize` is answered without waiting for them.
        from ditto.app.bootstrap import open_runtime
        from ditto.app.tools import MemoryToolkit

        async with open_runtime(settings) as runtime:
            yield MemoryToolkit(
                runtime, principal=principal, namespace=namespace, session_id=session
            )

    async def main() -> None:
        toolkit = mcp_server.LazyToolkit(open_toolkit)
        server = mcp_server.create_mcp_server(toolkit)
        async with anyio.create_task_group() as group:
            group.start_soon(toolkit.run)
            try:
                if transport == "stdio":
                    await mcp_server.serve_stdio(server)
                else:
                    if not mcp_server.is_loopback(host):
                        errors.print(
                            f"MCP on {host} accepts any Host header; every request needs the "
                            "bearer token",
                            highlight=False,
                        )
                    errors.print(f"MCP over HTTP at http://{host}:{port}/mcp", highlight=False)
                    await mcp_server.serve_http(server, host, port, token)
            finally:
                toolkit.close()

    try:
        anyio.run(main)
    except KeyboardInterrupt:
        raise typer.Exit(0) from None
