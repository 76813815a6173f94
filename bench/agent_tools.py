"""The agent layer's cost: a ``MemoryToolkit`` call against the bare ``runtime.invoke`` it
wraps, and an MCP round trip over stdio against the same bare invoke, same run.

* **toolkit** — ``toolkit.call("memory_search" | "memory_get", {...})`` (argument conversion,
  the invoke, the compact result) against ``runtime.invoke("MEMORY.SEARCH" | "MEMORY.GET")``
  with the same request, on a SQLite store of 10,000 records. Target: <= 1.2x per call.
* **MCP** — ``memory_search`` through the official SDK's client to a ``ditto mcp serve``
  process over stdio (JSON-RPC, the process boundary, the toolkit) on a copy of the same
  store, against the bare invoke in this process. Printed for context (no target).

Systems take turns round by round (``timing.alternate``); figures are medians over rounds with
the lowest and highest round.

    python3 tasks.py bench agent_tools
    .venv/bin/python bench/agent_tools.py --records 2000 --rounds 3
"""

from __future__ import annotations

import argparse
import asyncio
import random
import shutil
import tempfile
from pathlib import Path
from typing import Any

from memory_store import Corpus
from timing import Figure, alternate, timed_async

from ditto import create_ditto
from ditto.app.tools import MemoryToolkit
from workers.memory import SqliteMemoryStore, create_memory_worker

TARGET = 1.2


async def build(path: Path, corpus: Corpus, records: int) -> list[str]:
    keys = [f"note-{n}" for n in range(records)]
    async with SqliteMemoryStore(path) as store:
        async with create_ditto(workers=[create_memory_worker(store)], config=None) as runtime:
            for start in range(0, records, 1000):
                drafts = corpus.drafts(min(1000, records - start))
                memories = [
                    {"key": key, "content": draft.content["text"], "namespace": "default"}
                    for key, draft in zip(keys[start : start + 1000], drafts, strict=True)
                ]
                (await runtime.invoke("MEMORY.WRITE", {"memories": memories})).unwrap()
    return keys


def show(name: str, ours: Figure, bare: Figure, target: float | None) -> None:
    mine, base = ours.latency(0.5, 1e6), bare.latency(0.5, 1e6)
    ratio = mine.median / base.median
    verdict = ""
    if target is not None:
        verdict = f"{'met' if ratio <= target else 'MISSED'} (target <= {target}x)"
    print(f"  {name:28} {mine.show(1):>24} µs {base.show(1):>24} µs {ratio:6.2f}x  {verdict}")


async def main(records: int, rounds: int, calls: int) -> None:
    corpus = Corpus()
    with tempfile.TemporaryDirectory(prefix="ditto-bench-tools-") as folder:
        path = Path(folder) / "memory.sqlite"
        keys = await build(path, corpus, records)
        questions = corpus.questions(calls)
        picked = random.Random(3).sample(keys, calls)
        print(f"{records:,} records, {calls} calls x {rounds} rounds")
        print(f"  {'':28} {'tool p50 [range]':>27} {'bare invoke p50':>27}")
        async with SqliteMemoryStore(path) as store:
            worker = create_memory_worker(store)
            async with create_ditto(workers=[worker], config=None) as runtime:
                toolkit = MemoryToolkit(runtime)

                async def bare_search(q: str) -> Any:
                    request = {"query": q, "limit": 10, "filter": {"namespace": "default"}}
                    return (await runtime.invoke("MEMORY.SEARCH", request)).unwrap()

                async def bare_get(key: str) -> Any:
                    request = {"keys": [key], "namespace": "default"}
                    return (await runtime.invoke("MEMORY.GET", request)).unwrap()

                for q in questions[:20]:  # warm both alike
                    await bare_search(q)
                    await toolkit.call("memory_search", {"query": q})
                searches = await alternate(
                    {
                        "tool": lambda: timed_async(
                            [
                                lambda q=q: toolkit.call("memory_search", {"query": q})
                                for q in questions
                            ]
                        ),
                        "bare": lambda: timed_async(
                            [lambda q=q: bare_search(q) for q in questions]
                        ),
                    },
                    rounds,
                )
                gets = await alternate(
                    {
                        "tool": lambda: timed_async(
                            [lambda k=k: toolkit.call("memory_get", {"key": k}) for k in picked]
                        ),
                        "bare": lambda: timed_async([lambda k=k: bare_get(k) for k in picked]),
                    },
                    rounds,
                )
                show("memory_search / SEARCH", searches["tool"], searches["bare"], TARGET)
                show("memory_get / GET", gets["tool"], gets["bare"], TARGET)

                mcp = await mcp_round_trips(path, Path(folder), questions, rounds)
                if mcp is None:
                    print("  MCP column skipped: the mcp extra is not installed")
                else:
                    bare = await alternate(
                        {
                            "bare": lambda: timed_async(
                                [lambda q=q: bare_search(q) for q in questions]
                            )
                        },
                        rounds,
                    )
                    show("MCP stdio memory_search", mcp, bare["bare"], None)


async def mcp_round_trips(
    path: Path, folder: Path, questions: list[str], rounds: int
) -> Figure | None:
    try:
        from mcp import ClientSession
        from mcp.client.stdio import StdioServerParameters, stdio_client
    except ImportError:
        return None
    import sys

    copy = folder / "mcp.sqlite"
    shutil.copy(path, copy)
    config = folder / "ditto.yaml"
    config.write_text(f"workers:\n  memory:\n    sqlite_path: '{copy}'\n")
    ditto = Path(sys.executable).parent / "ditto"
    server = StdioServerParameters(
        command=str(ditto), args=["mcp", "serve", "--config", str(config)], cwd=str(folder)
    )
    async with stdio_client(server) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        for q in questions[:20]:
            await session.call_tool("memory_search", {"query": q})
        figures = await alternate(
            {
                "mcp": lambda: timed_async(
                    [
                        lambda q=q: session.call_tool("memory_search", {"query": q})
                        for q in questions
                    ]
                )
            },
            rounds,
        )
    return figures["mcp"]


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--calls", type=int, default=300)
    arguments = parser.parse_args()
    asyncio.run(main(arguments.records, arguments.rounds, arguments.calls))
