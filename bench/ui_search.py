"""``ditto ui``'s search page against the ``MEMORY.SEARCH`` it makes, same run, same store.

A SQLite store of N records (default 100,000, the synthetic corpus of ``memory_store``) behind
the ``ditto ui`` app. Per question, one system asks the page (``GET /?q=...``: the guard with
its token and headers, the handler, ``MEMORY.SEARCH`` with ``options.explain``, the explain
bars, the Jinja2 page) by calling the ASGI app in this process and reading its whole answer, so
the figure is server time with neither a socket nor an HTTP client in it; the other calls
``runtime.invoke("MEMORY.SEARCH")`` with the same request on the page's own runtime.
Target: page p50 <= 1.5x the bare call's.

Systems take turns round by round (``timing.alternate``); figures are medians over rounds with
the lowest and highest round.

    python3 tasks.py bench ui_search
    .venv/bin/python bench/ui_search.py --records 20000 --rounds 3
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from memory_store import Corpus
from timing import alternate, timed_async

from ditto.app.bootstrap import open_runtime
from ditto.app.config import load_config
from ditto.app.ui import UiOptions, create_app

TARGET = 1.5
TOKEN = "bench-token-0123456789abcdef"
BATCH = 1_000


async def build(config: Path, corpus: Corpus, records: int) -> None:
    async with open_runtime(load_config(config)) as runtime:
        for start in range(0, records, BATCH):
            # Off the loop: generating the text is the bench's work, not the runtime's.
            drafts = await asyncio.to_thread(corpus.drafts, min(BATCH, records - start))
            memories = [
                {"content": d.content["text"], "namespace": d.namespace, "tags": d.tags}
                for d in drafts
            ]
            (await runtime.invoke("MEMORY.WRITE", {"memories": memories})).unwrap()


async def asgi_get(app: Any, path: str, query: str) -> tuple[int, bytes]:
    """One GET through the ASGI app as a server hands it over: its status and whole body."""
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "GET",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "root_path": "",
        "query_string": query.encode(),
        "headers": [(b"host", b"127.0.0.1"), (b"authorization", f"Bearer {TOKEN}".encode())],
        "client": ("127.0.0.1", 50000),
        "server": ("127.0.0.1", 8765),
    }
    status = 0
    body = bytearray()

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        nonlocal status
        if message["type"] == "http.response.start":
            status = message["status"]
        elif message["type"] == "http.response.body":
            body.extend(message.get("body", b""))

    await app(scope, receive, send)
    return status, bytes(body)


async def main(records: int, rounds: int, calls: int) -> None:
    corpus = Corpus()
    with tempfile.TemporaryDirectory(prefix="ditto-bench-ui-") as folder:
        config = Path(folder) / "ditto.yaml"
        config.write_text(f"workers:\n  memory:\n    sqlite_path: '{Path(folder) / 'm.sqlite'}'\n")
        await build(config, corpus, records)
        questions = corpus.questions(calls)
        app = create_app(UiOptions(settings=load_config(config), token=TOKEN))
        async with app.router.lifespan_context(app):
            runtime = app.state.backend.runtime

            async def page(q: str) -> Any:
                status, body = await asgi_get(app, "/", urlencode({"q": q}))
                assert status == 200, body[:500]
                return body

            async def bare(q: str) -> Any:
                request = {"query": q, "limit": 10, "filter": {}, "options": {"explain": True}}
                return (await runtime.invoke("MEMORY.SEARCH", request)).unwrap()

            for q in questions[:20]:  # warm both alike
                await page(q)
                await bare(q)
            figures = await alternate(
                {
                    "page": lambda: timed_async([lambda q=q: page(q) for q in questions]),
                    "bare": lambda: timed_async([lambda q=q: bare(q) for q in questions]),
                },
                rounds,
            )
        mine, base = figures["page"].latency(0.5), figures["bare"].latency(0.5)
        ratio = mine.median / base.median
        verdict = "met" if ratio <= TARGET else "MISSED"
        print(f"{records:,} records, {calls} searches x {rounds} rounds (p50 ms [range])")
        print(f"  page GET /?q=   {mine.show(2):>24} ms")
        print(f"  MEMORY.SEARCH   {base.show(2):>24} ms")
        print(f"  ratio {ratio:.2f}x: {verdict} (target <= {TARGET}x)")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--calls", type=int, default=200)
    arguments = parser.parse_args()
    asyncio.run(main(arguments.records, arguments.rounds, arguments.calls))
