"""``kill -9`` while a Markdown store rewrites files: every file is, at every moment, its old
or its new version (never torn), and once a store opens the folder again the batch is whole —
every record of the last committed round, or of the round before it.

A child upserts the same keys round after round (each record's content names the round) and
prints a round once the runtime acknowledged it; the parent kills it at a random moment, reads
the raw files before any store touches them, then opens a store (which replays a committed
journal and drops an uncommitted batch's leftovers). The vectors, appended after each batch,
are whole too: every record has one, or — killed between a batch and its vectors — every
record of that batch lacks one until reindex.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import anyio
import pytest
from anyio.streams.buffered import BufferedByteReceiveStream

from workers.memory import MemoryFilter, OrderBy
from workers.memory.retrieval.embeddings import HashingEmbedder
from workers.memory.retrieval.embeddings.base import model_of
from workers.memory.stores.markdown import MarkdownMemoryStore
from workers.memory.stores.markdown.fileformat import parse

pytestmark = pytest.mark.anyio

KEYS = 80
ROUNDS = 5

WRITER = textwrap.dedent(
    """
    import sys, anyio
    from ditto import create_ditto
    from workers.memory import create_memory_worker
    from workers.memory.retrieval.embeddings import HashingEmbedder
    from workers.memory.stores.markdown import MarkdownMemoryStore

    async def main(folder, keys, start):
        async with MarkdownMemoryStore(folder) as store:
            worker = create_memory_worker(store, embedder=HashingEmbedder(32))
            async with create_ditto(workers=[worker]) as runtime:
                print("ready", flush=True)
                round = int(start)
                while True:
                    memories = [
                        {"key": f"k{n}", "content": f"round {round} of record {n}"}
                        for n in range(int(keys))
                    ]
                    result = await runtime.invoke(
                        "MEMORY.WRITE", {"memories": memories, "mode": "upsert"}
                    )
                    if not result.ok:
                        print("failed", result.error.code, flush=True)
                        return
                    print(round, flush=True)
                    round += 1

    anyio.run(main, *sys.argv[1:])
    """
)


async def _line(lines: BufferedByteReceiveStream) -> str | None:
    try:
        return (await lines.receive_until(b"\n", 1_024)).decode()
    except (anyio.EndOfStream, anyio.IncompleteRead):
        return None


def _round_of(content: str) -> int:
    return int(content.split()[1])


async def test_a_killed_rewrite_leaves_every_file_old_or_new(tmp_path: Path) -> None:
    seed = int.from_bytes(os.urandom(4), "big")
    rng = random.Random(seed)
    folder = tmp_path / "memory"
    start = 0
    for attempt in range(ROUNDS):
        command = [sys.executable, "-c", WRITER, str(folder), str(KEYS), str(start)]
        async with await anyio.open_process(command, stdin=subprocess.DEVNULL) as child:
            assert child.stdout is not None
            lines = BufferedByteReceiveStream(child.stdout)
            try:
                with anyio.fail_after(60):
                    assert await _line(lines) == "ready"
                    began = anyio.current_time()
                    acknowledged = [await _line(lines) for _ in range(rng.randint(1, 3))]
                    assert None not in acknowledged, "the writer stopped on its own"
                    per_round = (anyio.current_time() - began) / len(acknowledged)
                    await anyio.sleep(rng.uniform(0, 1.5 * per_round))
            finally:
                child.kill()
            while (line := await _line(lines)) is not None:
                acknowledged.append(line)
            assert await child.wait() == -signal.SIGKILL, acknowledged
        done = max(int(line) for line in acknowledged if line and line.isdigit())
        context = f"attempt {attempt}, seed {seed}"

        # The raw files, before a store replays anything: each one whole, old or new.
        on_disk = set()
        for path in (folder / "default").glob("*.md"):
            record = parse(path.read_bytes())  # raises on a torn file
            on_disk.add(_round_of(record.content))
        assert on_disk <= {done, done + 1}, (on_disk, context)

        async with MarkdownMemoryStore(folder) as store:
            records = await store.query(MemoryFilter(), OrderBy(), 10_000, None)
            rounds = {_round_of(item.content) for item in records}
            assert len(records) == KEYS, context
            assert rounds in ({done}, {done + 1}), (rounds, context)  # the batch, whole
            history = await store.history(records[0].id)
            assert history[-1].record.content == records[0].content, context
            missing = await store.count_missing_vectors(model_of(HashingEmbedder(32)))
            assert missing in (0, KEYS), (missing, context)
        assert not list(folder.rglob("*.ditto-tmp")), context
        assert not (folder / ".ditto" / "journal.json").exists(), context
        start = max(rounds) + 1
