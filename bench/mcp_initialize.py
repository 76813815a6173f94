"""``ditto mcp serve`` start-up: seconds from spawning the process to the ``initialize``
response over stdio, against baselines measured in the same run.

Three systems take turns (``timing.alternate``: the first one rotates round by round), each a
fresh process per round:

* ``ditto`` — ``ditto mcp serve --config ditto.yaml`` on a SQLite store in a temporary folder;
* ``sdk-server`` — a bare official-SDK low-level server with one tool over stdio: the floor any
  server built on the SDK pays (interpreter, ``import mcp``, the handshake);
* ``import-mcp`` — ``python -c "import mcp"``: the SDK's import alone (to process exit).

Target: ``ditto`` answers ``initialize`` in under 1 s on a quiet machine; the runtime, the
store and their imports load on the first request that needs them, so ``ditto`` should sit
close to ``sdk-server``. Absolute numbers depend on the machine: read the ratio.

    .venv/bin/python bench/mcp_initialize.py --rounds 10
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path
from time import perf_counter

from timing import Figure, alternate

TARGET_SECONDS = 1.0

INITIALIZE = json.dumps(
    {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "bench", "version": "1"},
        },
    }
).encode()

SDK_SERVER = textwrap.dedent(
    """
    import anyio
    from mcp import types
    from mcp.server.lowlevel import Server
    from mcp.server.stdio import stdio_server

    async def list_tools(ctx, params):
        schema = {"type": "object", "properties": {"key": {"type": "string"}}}
        return types.ListToolsResult(
            tools=[types.Tool(name="echo", description="Echo.", input_schema=schema)]
        )

    async def call_tool(ctx, params):
        text = str(params.arguments)
        return types.CallToolResult(content=[types.TextContent(type="text", text=text)])

    server = Server("bare", on_list_tools=list_tools, on_call_tool=call_tool)

    async def main():
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())

    anyio.run(main)
    """
)


def until_initialized(command: list[str], folder: Path) -> list[float]:
    """Seconds from spawn to the ``initialize`` response (then the process is let go)."""
    started = perf_counter()
    process = subprocess.Popen(
        command,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        cwd=folder,
    )
    assert process.stdin is not None
    assert process.stdout is not None
    process.stdin.write(INITIALIZE + b"\n")
    process.stdin.flush()
    answer = process.stdout.readline()
    elapsed = perf_counter() - started
    if b'"result"' not in answer:
        raise SystemExit(f"{command[0]}: no initialize result: {answer[:200]!r}")
    process.stdin.close()
    process.wait(timeout=30)
    process.stdout.close()
    return [elapsed]


def until_exit(command: list[str], folder: Path) -> list[float]:
    started = perf_counter()
    subprocess.run(command, cwd=folder, check=True)
    return [perf_counter() - started]


def main(rounds: int) -> None:
    ditto = shutil.which("ditto", path=str(Path(sys.executable).parent)) or "ditto"
    with tempfile.TemporaryDirectory(prefix="ditto-bench-mcp-") as name:
        folder = Path(name)
        config = folder / "ditto.yaml"
        config.write_text(f"workers:\n  memory:\n    sqlite_path: '{folder / 'memory.sqlite'}'\n")
        serve = [ditto, "mcp", "serve", "--config", str(config)]
        # One untimed start of each: the first one compiles bytecode and warms the file cache.
        until_initialized(serve, folder)
        until_initialized([sys.executable, "-c", SDK_SERVER], folder)
        figures: dict[str, Figure] = asyncio.run(
            alternate(
                {
                    "ditto": lambda: until_initialized(serve, folder),
                    "sdk-server": lambda: until_initialized(
                        [sys.executable, "-c", SDK_SERVER], folder
                    ),
                    "import-mcp": lambda: until_exit([sys.executable, "-c", "import mcp"], folder),
                },
                rounds,
            )
        )
    print(f"seconds to the initialize response over stdio, median [min-max] of {rounds} rounds")
    for system, figure in figures.items():
        print(f"  {system:11} {figure.latency(scale=1).show(3)} s")
    ditto_median = figures["ditto"].latency(scale=1).median
    floor = figures["sdk-server"].latency(scale=1).median
    print(f"ditto / sdk-server: {ditto_median / floor:.2f}x")
    verdict = "ok" if ditto_median < TARGET_SECONDS else "TARGET MISSED (on a quiet machine?)"
    print(f"ditto initialize {ditto_median:.3f} s: {verdict} (< {TARGET_SECONDS:.0f} s)")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=10, help="alternated rounds")
    main(parser.parse_args().rounds)
