"""Durable memory in a SQLite file: write, close, reopen, read back.

    python3 tasks.py run examples/handbook/memory_sqlite.py [DIRECTORY]

Run it twice: the second run finds the record from the first and adds nothing, because the
write is keyed (``alice:language``) and identical drafts replay the stored record.
"""

from __future__ import annotations

import sys
from pathlib import Path

import anyio

from ditto import create_ditto
from workers.memory import SqliteMemoryStore, create_memory_worker

DRAFT = {
    "key": "alice:language",
    "namespace": "alice",
    "content": {"language": "zh-CN"},
    "metadata": {"kind": "preference"},
}


async def main(directory: Path) -> None:
    path = directory / "memory.sqlite"

    async with SqliteMemoryStore(path) as store:
        async with create_ditto(workers=[create_memory_worker(store)]) as runtime:
            written = await runtime.invoke("MEMORY.WRITE", {"memories": [DRAFT]})
            record = written.unwrap().items[0]
            print(f"wrote {record.key} as {record.id} (version {record.version})")
    # Runtime closed first, then the store: the store is the application's to close.

    async with SqliteMemoryStore(path) as reopened:
        async with create_ditto(workers=[create_memory_worker(reopened)]) as runtime:
            found = await runtime.invoke(
                "MEMORY.GET", {"keys": ["alice:language"], "namespace": "alice"}
            )
            items = found.unwrap().items
            everything = await runtime.invoke("MEMORY.QUERY", {"filter": {"namespace": "alice"}})
    assert [item.id for item in items] == [record.id], "the reopened file lost the record"
    print(f"read back {items[0].content} from {path}")
    print(f"records in namespace 'alice': {len(everything.unwrap().items)}")


if __name__ == "__main__":
    target = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(".examples-handbook")
    target.mkdir(parents=True, exist_ok=True)
    anyio.run(main, target)
