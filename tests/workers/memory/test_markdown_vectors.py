"""The Markdown store's vectors: kept in ``.ditto/vectors.bin`` beside the folder (ignored by
git), found again by a store opened later, rebuilt by reindex when deleted, never ranking a
record by a text a person has since edited, and cut back to whole frames after a crash."""

from __future__ import annotations

import logging
import shutil
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest

from ditto import Ditto, create_ditto
from tests.workers.memory.conftest import TickingClock
from workers.memory import create_memory_worker
from workers.memory.maintenance.reindex import reindex
from workers.memory.retrieval.embeddings import HashingEmbedder
from workers.memory.retrieval.embeddings.base import model_of
from workers.memory.stores.markdown import MarkdownMemoryStore, vectorlog
from workers.memory.stores.markdown.layout import STATE_DIR, VECTOR_FILE

pytestmark = pytest.mark.anyio

EMBEDDER = HashingEmbedder(64)
FACTS = {
    "coffee": "espresso every morning",
    "tea": "green tea after lunch",
    "city": "lives in Lisbon near the river",
    "pet": "a grey cat called Miso",
}


@dataclass
class Folder:
    root: Path
    stack: AsyncExitStack
    clock: TickingClock

    @property
    def log(self) -> Path:
        return self.root / STATE_DIR / VECTOR_FILE

    async def runtime(self, **options: Any) -> tuple[Ditto, MarkdownMemoryStore]:
        """A runtime over a new store on the folder, as another process would open it."""
        store = await self.stack.enter_async_context(
            MarkdownMemoryStore(self.root, clock=self.clock)
        )
        worker = create_memory_worker(store, clock=self.clock, **options)
        return await self.stack.enter_async_context(create_ditto(workers=[worker])), store


@pytest.fixture
async def folder(tmp_path: Path) -> AsyncIterator[Folder]:
    async with AsyncExitStack() as stack:
        yield Folder(tmp_path / "memory", stack, TickingClock())


async def ok(runtime: Ditto, node: str, payload: Any) -> Any:
    result = await runtime.invoke(node, payload)
    assert result.ok, result.error
    return result.output


async def remember(runtime: Ditto) -> None:
    drafts = [{"key": key, "content": text} for key, text in FACTS.items()]
    await ok(runtime, "MEMORY.WRITE", {"memories": drafts})


async def vector_search(runtime: Ditto, query: str, limit: int = 1) -> Any:
    request = {"query": query, "strategy": "vector", "limit": limit}
    return await ok(runtime, "MEMORY.SEARCH", request)


async def test_vectors_outlive_the_store_that_wrote_them(folder: Folder) -> None:
    writer, _ = await folder.runtime(embedder=EMBEDDER)
    await remember(writer)
    assert folder.log.stat().st_size > 0

    class Refusing(HashingEmbedder):
        """Embeds queries only: a store that had to embed its records again would fail."""

        def embed_now(self, texts: Any) -> Any:
            assert len(texts) == 1, "records were embedded again"
            return super().embed_now(texts)

    reader, store = await folder.runtime(embedder=Refusing(64))
    found = await vector_search(reader, "a cat called Miso")
    assert [hit.memory.key for hit in found.hits] == ["pet"]
    assert found.vector_missing == 0
    assert await store.count_missing_vectors(model_of(EMBEDDER)) == 0


async def test_an_edited_record_is_not_ranked_by_its_old_text_until_reindexed(
    folder: Folder,
) -> None:
    runtime, store = await folder.runtime(embedder=EMBEDDER)
    await remember(runtime)
    path = folder.root / "default" / "pet.md"
    path.write_text(path.read_text().replace("a grey cat called Miso", "a parrot named Kiwi"))

    stale = await vector_search(runtime, "a grey cat called Miso", limit=4)
    assert "pet" not in [hit.memory.key for hit in stale.hits]
    assert stale.vector_missing == 1

    report = await reindex(store, EMBEDDER)
    assert report.embedded == 1
    fresh, _ = await folder.runtime(embedder=EMBEDDER)  # a new engine: no count cached
    found = await vector_search(fresh, "a parrot named Kiwi")
    assert [hit.memory.key for hit in found.hits] == ["pet"]
    assert found.vector_missing == 0


async def test_a_deleted_vector_file_is_rebuilt_from_the_files_by_reindex(folder: Folder) -> None:
    writer, _ = await folder.runtime(embedder=EMBEDDER)
    await remember(writer)
    folder.log.unlink()

    runtime, store = await folder.runtime(embedder=EMBEDDER)
    assert (await store.vector_state()).active is None
    before = await vector_search(runtime, "lives in Lisbon")
    assert (before.hits, before.vector_missing) == ([], len(FACTS))
    report = await reindex(store, EMBEDDER)
    assert report.embedded == len(FACTS)
    after = await vector_search(runtime, "lives in Lisbon")
    assert [hit.memory.key for hit in after.hits] == ["city"]
    assert folder.log.exists()


async def test_a_torn_last_frame_is_cut_and_the_vectors_before_it_kept(
    folder: Folder, caplog: pytest.LogCaptureFixture
) -> None:
    writer, _ = await folder.runtime(embedder=EMBEDDER)
    await remember(writer)
    whole = folder.log.stat().st_size
    await ok(writer, "MEMORY.WRITE", {"memories": [{"key": "car", "content": "drives a van"}]})
    data = folder.log.read_bytes()
    folder.log.write_bytes(data[: whole + (len(data) - whole) // 2])  # a crash mid-append

    with caplog.at_level(logging.WARNING, "workers.memory.stores.markdown"):
        reader, _ = await folder.runtime(embedder=EMBEDDER)
        found = await vector_search(reader, "espresso every morning")
    assert [hit.memory.key for hit in found.hits] == ["coffee"]
    assert found.vector_missing == 1  # the torn frame's record waits for reindex
    assert folder.log.stat().st_size == whole
    assert any("vectors.bin" in message for message in caplog.messages)


async def test_a_long_log_is_rewritten_and_other_stores_follow(
    folder: Folder, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(vectorlog, "_MIN_COMPACTION", 16)  # rewritten after 2 x 4 + 16 frames
    writer, _ = await folder.runtime(embedder=EMBEDDER)
    reader, _ = await folder.runtime(embedder=EMBEDDER)
    await remember(writer)
    (record,) = (await ok(writer, "MEMORY.GET", {"keys": ["tea"]})).items
    await vector_search(reader, "green tea")  # the reader has read the log once
    before = folder.log.stat().st_size
    await ok(writer, "MEMORY.UPDATE", {"updates": [{"id": record.id, "content": "green tea 0"}]})
    frame = folder.log.stat().st_size - before
    for n in range(1, 100):  # one frame per update, beyond the 5 of the first write
        update = {"id": record.id, "content": f"green tea, cup {n}"}
        await ok(writer, "MEMORY.UPDATE", {"updates": [update]})
    assert folder.log.stat().st_size <= (2 * 4 + 16 + 2) * frame
    found = await vector_search(reader, "green tea, cup 99")
    assert [hit.memory.content for hit in found.hits] == ["green tea, cup 99"]
    assert found.vector_missing == 0


async def test_git_ignores_the_vectors(folder: Folder) -> None:
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    runtime, _ = await folder.runtime(embedder=EMBEDDER)
    await remember(runtime)
    await anyio.run_process(["git", "init", "-q", str(folder.root)])
    status = ["git", "-C", str(folder.root), "status", "--porcelain", "--untracked-files=all"]
    listed = (await anyio.run_process(status)).stdout.decode()
    assert "default/coffee.md" in listed
    assert ".ditto/history.jsonl" in listed
    assert VECTOR_FILE not in listed


async def test_a_folder_made_before_vectors_learns_to_ignore_them(folder: Folder) -> None:
    ignore = folder.root / STATE_DIR / ".gitignore"
    ignore.parent.mkdir(parents=True)
    ignore.write_text("cursor-secret\n# a person's own line\nnotes.txt")
    await folder.runtime()
    assert ignore.read_text() == (
        f"cursor-secret\n# a person's own line\nnotes.txt\n{VECTOR_FILE}\n"
    )
    await folder.runtime()  # listed once
    assert ignore.read_text().count(VECTOR_FILE) == 1
