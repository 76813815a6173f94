"""The RETRIEVAL conformance harness: one table of target factories, the same documents in each.

Every target holds the six documents of :data:`DOCS` — written through the MEMORY worker into an
in-process and an SQLite memory store, as files of a corpus folder, and upserted into a Milvus
Lite collection — with the same metadata (``folder``) and the same embedder, so one query must
rank them alike everywhere. A target joins the suite by adding one entry to
:data:`TARGET_FACTORIES`, with the strategies its provider must offer.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from ditto import Ditto, NodeResult, create_ditto
from workers.memory import (
    InProcessMemoryStore,
    MemoryStore,
    SqliteMemoryStore,
    create_memory_worker,
)
from workers.memory.retrieval.embeddings import HashingEmbedder
from workers.retrieval import (
    CorpusProvider,
    MemoryStoreProvider,
    RetrievalProvider,
    create_retrieval_worker,
)

DOCS = {
    "apple": ("fruit", "Apples are crisp red fruit that grow on orchard trees."),
    "banana": ("fruit", "Bananas are soft yellow fruit picked green in tropical plantations."),
    "cherry": ("fruit", "Cherries are small red stone fruit that ripen in early summer."),
    "carrot": ("veg", "Carrots are orange roots grown in sandy soil and eaten raw or cooked."),
    "beetroot": ("veg", "Beetroot is a red root vegetable boiled or roasted for winter salads."),
    "hammer": ("tools", "A hammer drives nails into wood with a heavy steel head."),
}
"""name -> (folder, text): the documents every target holds."""
BY_TEXT = {text: name for name, (_, text) in DOCS.items()}
TARGET = "docs"
MEMORY_STRATEGIES = ("auto", "keyword", "vector", "hybrid", "recent-keyword")


def embedder() -> HashingEmbedder:
    return HashingEmbedder(256)


async def write_docs(store: MemoryStore) -> None:
    """The documents as records, written through the MEMORY worker (with their vectors)."""
    memories = [
        {"content": text, "key": name, "metadata": {"folder": folder}}
        for name, (folder, text) in DOCS.items()
    ]
    async with create_ditto(workers=[create_memory_worker(store, embedder=embedder())]) as rt:
        (await rt.invoke("MEMORY.WRITE", {"memories": memories})).unwrap()


def write_corpus(folder: Path) -> Path:
    for name, (group, text) in DOCS.items():
        path = folder / group / f"{name}.txt"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text + "\n", encoding="utf-8")
    return folder


async def memory_target(stack: AsyncExitStack, store: MemoryStore) -> RetrievalProvider:
    await stack.enter_async_context(store)
    await write_docs(store)
    return MemoryStoreProvider(store, embedder())


async def inprocess_target(stack: AsyncExitStack, tmp_path: Path) -> RetrievalProvider:
    return await memory_target(stack, InProcessMemoryStore())


async def sqlite_target(stack: AsyncExitStack, tmp_path: Path) -> RetrievalProvider:
    return await memory_target(stack, SqliteMemoryStore(tmp_path / "memory.sqlite"))


async def corpus_target(stack: AsyncExitStack, tmp_path: Path) -> RetrievalProvider:
    return CorpusProvider(write_corpus(tmp_path / "corpus"), embedder())


async def milvus_target(stack: AsyncExitStack, tmp_path: Path) -> RetrievalProvider:
    from workers.retrieval import MilvusDocument, MilvusProvider

    provider = MilvusProvider.from_uri(str(tmp_path / "milvus.db"), "docs", embedder())
    stack.push_async_callback(provider.aclose)
    await provider.upsert(
        [MilvusDocument(name, text, {"folder": folder}) for name, (folder, text) in DOCS.items()]
    )
    return provider


@dataclass(frozen=True)
class TargetKind:
    factory: Callable[[AsyncExitStack, Path], Awaitable[RetrievalProvider]]
    strategies: tuple[str, ...]
    """What the provider must offer, its default first."""


TARGET_FACTORIES = {
    "inprocess": TargetKind(inprocess_target, MEMORY_STRATEGIES),
    "sqlite": TargetKind(sqlite_target, MEMORY_STRATEGIES),
    "corpus": TargetKind(corpus_target, MEMORY_STRATEGIES),
    "milvus": TargetKind(milvus_target, ("vector",)),
}


@dataclass
class Retrieval:
    """A runtime with a RETRIEVAL worker over one target named :data:`TARGET`."""

    runtime: Ditto
    kind: str
    provider: RetrievalProvider

    @property
    def strategies(self) -> tuple[str, ...]:
        return TARGET_FACTORIES[self.kind].strategies

    async def search(self, **request: Any) -> NodeResult[Any]:
        request.setdefault("target", {"name": TARGET})
        if isinstance(request.get("query"), str):
            request["query"] = {"content": request["query"]}
        return await self.runtime.invoke("RETRIEVAL.SEARCH", request)

    async def names(self, **request: Any) -> list[str]:
        """The documents found, best first."""
        output = (await self.search(**request)).unwrap()
        return [name_of(candidate.content) for candidate in output.candidates]


def name_of(content: Any) -> str:
    """The document a candidate's content is: a record (memory targets) or its text."""
    text = content["content"] if isinstance(content, dict) else content
    return BY_TEXT[text.strip()]


@pytest.fixture(params=sorted(TARGET_FACTORIES))
async def retrieval(
    request: pytest.FixtureRequest, anyio_backend: str, tmp_path: Path
) -> AsyncIterator[Retrieval]:
    kind: str = request.param
    async with AsyncExitStack() as stack:
        provider = await TARGET_FACTORIES[kind].factory(stack, tmp_path)
        worker = create_retrieval_worker({TARGET: provider})
        runtime = await stack.enter_async_context(create_ditto(workers=[worker]))
        yield Retrieval(runtime, kind, provider)
