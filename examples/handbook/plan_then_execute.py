"""Plan, then execute: keep the current plan in memory under a stable key.

    python3 tasks.py run examples/handbook/plan_then_execute.py [DIRECTORY]

Reads ``plan:current`` by key (creating it on the first run), marks the next open step done and
upserts it back. The upsert keeps the record's id, creation time and usage statistics and bumps
its version, so every run advances the same record.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import anyio

from ditto import Ditto, create_ditto
from workers.memory import SqliteMemoryStore, create_memory_worker

KEY = "plan:current"
STEPS = ["collect requirements", "draft the schema", "write the migration", "ship it"]


async def load_plan(runtime: Ditto) -> dict[str, Any]:
    found = (await runtime.invoke("MEMORY.GET", {"keys": [KEY]})).unwrap().items
    if found:
        return dict(found[0].content)
    return {"steps": [{"title": title, "done": False} for title in STEPS]}


async def main(directory: Path) -> None:
    async with SqliteMemoryStore(directory / "plans.sqlite") as store:
        async with create_ditto(workers=[create_memory_worker(store)]) as runtime:
            plan = await load_plan(runtime)
            # Recall the plan by search too: each hit counts as a use of the record.
            await runtime.invoke("MEMORY.SEARCH", {"query": "current plan schema migration"})

            open_steps = [step for step in plan["steps"] if not step["done"]]
            if open_steps:
                open_steps[0]["done"] = True
                print(f"done: {open_steps[0]['title']}")
            else:
                print("every step is done")

            saved = await runtime.invoke(
                "MEMORY.WRITE",
                {
                    "memories": [
                        {"key": KEY, "content": plan, "summary": "the plan being executed"}
                    ],
                    "mode": "upsert",
                },
            )
            record = saved.unwrap().items[0]
            print(
                f"{KEY}: version {record.version}, used {record.usage_count} times, "
                f"created {record.created_at:%Y-%m-%d %H:%M:%S}"
            )


if __name__ == "__main__":
    target = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(".examples-handbook")
    target.mkdir(parents=True, exist_ok=True)
    anyio.run(main, target)
