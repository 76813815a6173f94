"""``Memory`` and ``AsyncMemory``: the three-line API, over the runtime and the MEMORY worker."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from ditto import AsyncMemory, InvalidInputError, Memory


def test_remember_search_get_list_and_forget(tmp_path: Path) -> None:
    with Memory(tmp_path / "memory.sqlite") as m:
        first = m.add("I prefer 4-space indentation", key="code_style")
        again = m.add("I prefer tabs, actually", key="code_style")  # the same key replaces
        assert (again.id, again.version) == (first.id, 2)
        m.add({"city": "Lisbon"}, category="daily", tags=["travel"])
        hits = m.search("tabs")
        assert [hit.memory.key for hit in hits] == ["code_style"]
        assert 0 < hits[0].score <= 1
        assert m.get("code_style").content == "I prefer tabs, actually"
        assert [item.content for item in m.list(category="daily")] == [{"city": "Lisbon"}]
        assert m.forget("code_style") is True
        assert m.forget("code_style") is False
        assert m.get("code_style") is None
    with pytest.raises(InvalidInputError, match="closed"):
        m.add("too late")
    m.close()  # closing twice is fine
    with Memory(tmp_path / "memory.sqlite") as reopened:  # it lasts: a file
        assert [item.content for item in reopened.list()] == [{"city": "Lisbon"}]


def test_namespaces_keep_memories_apart(tmp_path: Path) -> None:
    with Memory(tmp_path / "memory.sqlite", namespace="alice") as alice:
        alice.add("alice likes green tea", key="drink")
        alice.add("bob likes coffee", key="drink", namespace="bob")
        assert alice.get("drink").content == "alice likes green tea"
        assert alice.get("drink", namespace="bob").content == "bob likes coffee"
        assert [hit.memory.namespace for hit in alice.search("likes")] == ["alice"]


def test_memory_works_where_an_event_loop_is_running(tmp_path: Path) -> None:
    async def notebook_cell() -> str:
        with Memory(tmp_path / "memory.sqlite") as m:  # sync calls inside a running loop
            m.add("notebooks run an event loop", key="k")
            return str(m.get("k").content)

    assert asyncio.run(notebook_cell()) == "notebooks run an event loop"


@pytest.mark.anyio
async def test_async_memory_with_an_embedder(tmp_path: Path) -> None:
    async with AsyncMemory(tmp_path / "memory.sqlite", embedder="hashing") as m:
        await m.add("the espresso machine is broken", key="machine")
        await m.add("tea is fine", key="tea")
        hits = await m.search("broken espresso machine", limit=1)
        assert [hit.memory.key for hit in hits] == ["machine"]
        assert hits[0].explain is None
        assert m.runtime is not None  # the runtime underneath, for graphs and tools
    with pytest.raises(InvalidInputError):
        AsyncMemory(tmp_path / "x.sqlite", embedder="nope")._build_embedder()  # type: ignore[arg-type]
