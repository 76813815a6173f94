"""``MEMORY.WRITE`` with ``idempotent: true``: the same work written again — a task rerun by a
resume, a redelivered or retried call — replays its first records instead of storing them
twice; different work writes different records."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from ditto import NodeContext, define_worker, graph
from tests.workers.memory.conftest import MemoryHarness

pytestmark = pytest.mark.anyio


def note_taker(hang: list[bool], wrote: anyio.Event, *, idempotent: bool) -> Any:
    """A handler that writes two notes through ``ctx.invoke``, then hangs the first time (the
    run is abandoned there, as by a crash after the write and before the task's record)."""

    async def take_notes(value: Any, ctx: NodeContext) -> Any:
        written = await ctx.invoke(
            "MEMORY.WRITE",
            {
                "memories": [{"content": f"{value} one"}, {"content": f"{value} two"}],
                "idempotent": idempotent,
            },
        )
        items = written.unwrap().items
        if hang and hang.pop():
            wrote.set()
            await anyio.sleep_forever()
        return [item.id for item in items]

    return define_worker("notes", {"NOTES.TAKE": take_notes})


async def abandon_after(wrote: anyio.Event, run: Any) -> None:
    """Start ``run`` and abandon it (as a crash would) once its handler has written."""
    async with anyio.create_task_group() as tg:
        tg.start_soon(run)
        await wrote.wait()
        tg.cancel_scope.cancel()


PLAN = graph("notes").node("take", "NOTES.TAKE", [], lambda run_input, deps: run_input)


@pytest.mark.parametrize("idempotent", [True, False])
async def test_a_task_rerun_by_a_resume_writes_its_memories_once(
    memory: MemoryHarness, idempotent: bool
) -> None:
    wrote = anyio.Event()
    memory.runtime.register(note_taker([True], wrote, idempotent=idempotent))
    await abandon_after(wrote, lambda: memory.runtime.run(PLAN, "meeting", checkpoint="notes-1"))
    assert len(await memory.all_records()) == 2
    resumed = await memory.runtime.resume("notes-1", plan=PLAN)
    assert resumed.ok
    records = await memory.all_records()
    if idempotent:
        assert len(records) == 2, "the rerun replayed the first write"
        assert sorted(resumed["take"].unwrap()) == sorted(record.id for record in records)
    else:
        assert len(records) == 4, "without it, the rerun wrote the notes again"


async def test_different_work_writes_different_records_and_keys_are_kept(
    memory: MemoryHarness,
) -> None:
    request = {
        "memories": [{"content": "alpha"}, {"content": "beta", "key": "mine"}],
        "idempotent": True,
    }
    first = (await memory.ok("MEMORY.WRITE", request)).items
    second = (await memory.ok("MEMORY.WRITE", request)).items
    # Two top-level invokes are two pieces of work (their keys are their execution ids): the
    # unkeyed draft is stored twice, the keyed one replays as any keyed write does.
    assert first[0].id != second[0].id
    assert first[0].key is not None
    assert first[0].key.startswith("~")
    assert first[0].key != second[0].key
    assert first[1].key == second[1].key == "mine"
    assert first[1].id == second[1].id


@pytest.mark.parametrize(("mode", "expected"), [("create", "CONFLICT"), ("upsert", "written")])
async def test_a_rerun_that_writes_other_content_conflicts_or_replaces(
    memory: MemoryHarness, mode: str, expected: str
) -> None:
    """Work that produces other text when it runs again (a model's answer): ``create`` refuses
    the second version, ``upsert`` replaces the first; neither stores both."""
    contents = iter(["first draft", "second draft"])
    hang = [True]
    wrote = anyio.Event()

    async def write_draft(value: Any, ctx: NodeContext) -> Any:
        result = await ctx.invoke(
            "MEMORY.WRITE",
            {"memories": [{"content": next(contents)}], "idempotent": True, "mode": mode},
        )
        if hang and hang.pop():
            wrote.set()
            await anyio.sleep_forever()
        return result.error.code if result.error else "written"

    memory.runtime.register(define_worker("w", {"W.WRITE": write_draft}))
    plan = graph("g").node("w", "W.WRITE", [], lambda run_input, deps: None)
    await abandon_after(wrote, lambda: memory.runtime.run(plan, None, checkpoint="drafts"))
    resumed = await memory.runtime.resume("drafts", plan=plan)
    assert resumed["w"].unwrap() == expected
    (record,) = await memory.all_records()
    assert record.content == ("first draft" if mode == "create" else "second draft")
