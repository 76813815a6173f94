"""A person edits the Markdown store's files by hand — a changed body, a changed front matter
line, a new file, a deleted file, a broken file — and the next read of the store sees it:
GET, SEARCH and the history."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest

from ditto import Ditto, create_ditto
from tests.workers.memory.conftest import TickingClock
from workers.memory import MemoryDraft, create_memory_worker
from workers.memory.stores.markdown import MarkdownMemoryStore

pytestmark = pytest.mark.anyio


@dataclass
class Folder:
    """A runtime over a Markdown store, and the folder a person edits."""

    runtime: Ditto
    store: MarkdownMemoryStore
    root: Path

    async def ok(self, node: str, payload: Any) -> Any:
        result = await self.runtime.invoke(node, payload)
        assert result.ok, result.error
        return result.output

    async def by_key(self, key: str, namespace: str = "default") -> list[Any]:
        return list((await self.ok("MEMORY.GET", {"keys": [key], "namespace": namespace})).items)

    async def found(self, query: str) -> list[Any]:
        hits = (await self.ok("MEMORY.SEARCH", {"query": query})).hits
        return [hit.memory.content for hit in hits]

    async def changes(self, record_id: str) -> list[str]:
        return [entry.change for entry in await self.store.history(record_id)]


@pytest.fixture
async def folder(tmp_path: Path) -> AsyncIterator[Folder]:
    root = tmp_path / "memory"
    clock = TickingClock()
    async with MarkdownMemoryStore(root, clock=clock) as store:
        async with create_ditto(workers=[create_memory_worker(store, clock=clock)]) as runtime:
            yield Folder(runtime, store, root)


async def test_an_edited_body_is_a_new_version_in_get_search_and_history(folder: Folder) -> None:
    await folder.ok("MEMORY.WRITE", {"memories": [{"key": "coffee", "content": "espresso only"}]})
    path = folder.root / "default" / "coffee.md"
    path.write_text(path.read_text().replace("espresso only", "matcha, always matcha"))

    (record,) = await folder.by_key("coffee")
    assert record.content == "matcha, always matcha"
    assert (record.version, record.source) == (2, "file")
    assert await folder.found("matcha") == ["matcha, always matcha"]
    assert await folder.found("espresso") == []
    history = await folder.store.history(record.id)
    assert [entry.change for entry in history] == ["create", "update"]
    assert history[-1].record.source == "file"
    assert "version: 2\n" in path.read_text()  # the store wrote the new version back


async def test_an_edited_front_matter_line_is_a_new_version(folder: Folder) -> None:
    await folder.ok(
        "MEMORY.WRITE",
        {"memories": [{"key": "tz", "content": "UTC+8", "source": "tool:profile"}]},
    )
    path = folder.root / "default" / "tz.md"
    text = path.read_text().replace("tags: []", 'tags: ["profile"]')
    # A person need not quote a string: a value that is not JSON is read as text.
    path.write_text(text.replace("summary: null", "summary: where the user lives"))

    (record,) = await folder.by_key("tz")
    assert record.tags == ["profile"]
    assert record.summary == "where the user lives"
    assert (record.version, record.source) == (2, "file")
    assert await folder.changes(record.id) == ["create", "update"]


async def test_an_edit_that_sets_the_source_keeps_it(folder: Folder) -> None:
    await folder.ok("MEMORY.WRITE", {"memories": [{"key": "k", "content": "x", "source": "a"}]})
    path = folder.root / "default" / "k.md"
    path.write_text(path.read_text().replace('source: "a"', 'source: "notebook"'))
    (record,) = await folder.by_key("k")
    assert record.source == "notebook"


async def test_a_new_file_is_a_new_record_keyed_by_its_name(folder: Folder) -> None:
    (folder.root / "default").mkdir(parents=True, exist_ok=True)
    (folder.root / "default" / "tea-notes.md").write_text("green tea at four\n")
    (folder.root / "work").mkdir()
    (folder.root / "work" / "standup.md").write_text(
        '---\ntags: ["team"]\ncategory: daily\n---\nstandup moves to ten\n'
    )

    (tea,) = await folder.by_key("tea-notes")
    assert (tea.content, tea.version, tea.source, tea.namespace) == (
        "green tea at four",
        1,
        "file",
        "default",
    )
    (standup,) = await folder.by_key("standup", namespace="work")
    assert (standup.tags, standup.category) == (["team"], "daily")
    assert await folder.found("standup") == ["standup moves to ten"]
    assert await folder.changes(tea.id) == ["create"]
    # The file now carries the record's id, so the record keeps it from here on.
    assert f'id: "{tea.id}"' in (folder.root / "default" / "tea-notes.md").read_text()
    (again,) = await folder.by_key("tea-notes")
    assert again == tea


async def test_a_deleted_file_deletes_its_record(folder: Folder) -> None:
    written = await folder.ok(
        "MEMORY.WRITE",
        {"memories": [{"key": "keep", "content": "kept words"}, {"content": "doomed words"}]},
    )
    doomed = written.items[1]
    (path,) = (folder.root / "default").glob("~*.md")  # a record without a key: named by id
    path.unlink()

    assert (await folder.ok("MEMORY.GET", {"ids": [doomed.id]})).items == []
    assert await folder.found("words") == ["kept words"]
    assert await folder.changes(doomed.id) == ["create", "delete"]


async def test_edits_made_while_no_store_ran_are_found_on_open(tmp_path: Path) -> None:
    root = tmp_path / "memory"
    async with MarkdownMemoryStore(root) as store:
        drafts = [MemoryDraft("first words", key="a"), MemoryDraft("second words", key="b")]
        await store.write(drafts, "create")
        (a,) = await store.get([], ["a"], "default")
        (b,) = await store.get([], ["b"], "default")
    path = root / "default" / "a.md"
    path.write_text(path.read_text().replace("first words", "first words, edited offline"))
    (root / "default" / "b.md").unlink()

    async with MarkdownMemoryStore(root) as store:
        (edited,) = await store.get([a.id], [], "default")
        assert (edited.content, edited.version) == ("first words, edited offline", 2)
        assert await store.get([b.id], [], "default") == []
        assert [e.change for e in await store.history(a.id)] == ["create", "update"]
        assert [e.change for e in await store.history(b.id)] == ["create", "delete"]
    async with MarkdownMemoryStore(root) as store:  # and only once
        assert [e.change for e in await store.history(a.id)] == ["create", "update"]
        assert [e.change for e in await store.history(b.id)] == ["create", "delete"]


async def test_a_malformed_file_is_logged_with_its_path_and_skipped(
    folder: Folder, caplog: pytest.LogCaptureFixture
) -> None:
    await folder.ok(
        "MEMORY.WRITE",
        {"memories": [{"key": "good", "content": "espresso"}, {"key": "soon-bad", "content": "x"}]},
    )
    broken = folder.root / "default" / "broken.md"
    broken.write_text("---\nthis line is not a field\n---\nespresso too\n")
    soon_bad = folder.root / "default" / "soon-bad.md"
    fine = soon_bad.read_text()
    soon_bad.write_text(fine.replace("tags: []", 'tags: "not a list"'))

    with caplog.at_level(logging.WARNING, logger="workers.memory.stores.markdown"):
        assert await folder.found("espresso") == ["espresso"]
        assert await folder.by_key("soon-bad") == []
    logged = "\n".join(record.getMessage() for record in caplog.records)
    assert str(broken) in logged
    assert str(soon_bad) in logged

    # Unreadable is not deleted: mended, the record is back at its version, nothing recorded.
    soon_bad.write_text(fine)
    (back,) = await folder.by_key("soon-bad")
    assert (back.content, back.version) == ("x", 1)
    assert await folder.changes(back.id) == ["create"]


async def test_a_symbolic_link_is_not_followed(folder: Folder, tmp_path: Path) -> None:
    outside = tmp_path / "outside.md"
    outside.write_text("secret words from elsewhere\n")
    (folder.root / "default").mkdir(parents=True, exist_ok=True)
    (folder.root / "default" / "link.md").symlink_to(outside)
    (folder.root / "linked").symlink_to(tmp_path, target_is_directory=True)

    assert await folder.found("secret") == []
    assert await folder.by_key("link") == []
    assert outside.read_text() == "secret words from elsewhere\n"  # never rewritten


async def test_a_copied_file_is_a_new_record_and_the_original_stays(folder: Folder) -> None:
    written = await folder.ok(
        "MEMORY.WRITE", {"memories": [{"key": "coffee", "content": "espresso at nine"}]}
    )
    (original,) = written.items
    source = folder.root / "default" / "coffee.md"
    (folder.root / "default" / "tea.md").write_bytes(source.read_bytes())
    renamed = source.read_text().replace('key: "coffee"', 'key: "brew"')
    (folder.root / "default" / "a-copy.md").write_text(renamed)

    (tea,) = await folder.by_key("tea")
    (brew,) = await folder.by_key("brew")
    (coffee,) = await folder.by_key("coffee")
    assert coffee == original
    assert len({tea.id, brew.id, coffee.id}) == 3
    assert (tea.content, tea.version, tea.source) == ("espresso at nine", 1, "file")
    assert await folder.changes(tea.id) == ["create"]

    await folder.ok("MEMORY.UPDATE", {"updates": [{"id": coffee.id, "content": "ristretto"}]})
    names = sorted(path.name for path in (folder.root / "default").iterdir())
    assert names == ["brew.md", "coffee.md", "tea.md"]  # the copy moved to its key's name
    hits = (await folder.ok("MEMORY.SEARCH", {"query": "espresso"})).hits
    assert sorted(hit.memory.key for hit in hits) == ["brew", "tea"]


async def test_a_watching_store_records_an_edit_before_anyone_reads(tmp_path: Path) -> None:
    root = tmp_path / "memory"
    history = root / ".ditto" / "history.jsonl"
    async with MarkdownMemoryStore(root) as store:
        await store.write([MemoryDraft("first words", key="a")], "create")
        path = root / "default" / "a.md"
        path.write_text(path.read_text().replace("first words", "edited words"))
        async with anyio.create_task_group() as group:
            group.start_soon(store.watch, 0.01)
            # Read from disk, not through the store (a read would take the edit in itself).
            with anyio.fail_after(30):
                while True:
                    if b'"change":"update"' in history.read_bytes():
                        break
                    await anyio.sleep(0.01)
            group.cancel_scope.cancel()
