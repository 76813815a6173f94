"""``kill -9`` at random moments: a MEMORY.WRITE batch is all or nothing, on SQLite, PostgreSQL
MySQL/MariaDB and a Markdown folder.

A child process writes batches of ``SIZE`` keyed records through the runtime, one batch after
another, and prints each batch's number once the runtime has acknowledged it. The parent kills
it with SIGKILL at a random moment (after a random number of acknowledged batches, a random
fraction of a batch's duration later), several rounds in a row on the same store. After each
kill it reopens the store and checks:

* every batch is all or nothing: ``SIZE`` records under its key prefix, or none;
* every acknowledged batch is there (a commit survives the writer's death), and nothing but the
  acknowledged ones and the one under way when the kill came;
* the keyword index agrees with the records, batch by batch (a search for the batch's own word
  finds all of it or none of it), each record has its one ``create`` history entry, and the
  store's own health check passes (SQLite: ``PRAGMA quick_check`` ok and as many FTS rows as
  records; PostgreSQL: every index valid; MySQL: ``CHECK TABLE`` ok);
* the store opens and takes a write again.

``tests/workers/memory/test_sqlite_store.py`` kills one SQLite writer at one chosen point (mid
batch, inside the transaction); this campaign kills many writers wherever they happen to be.
"""

from __future__ import annotations

import inspect
import os
import random
import signal
import sqlite3
import subprocess
import sys
import textwrap
from collections.abc import Awaitable, Callable
from contextlib import closing
from pathlib import Path
from typing import Any

import anyio
import pytest
from anyio.streams.buffered import BufferedByteReceiveStream

from ditto import create_ditto
from tests.services import MysqlSpace, PostgresSpace
from workers.memory import MemoryFilter, MemoryStore, SqliteMemoryStore, create_memory_worker

pytestmark = pytest.mark.anyio

SIZE = 150
"""Records per batch: enough that a batch takes a while to write, so kills land inside one."""
ROUNDS = 6
NAMESPACE = "kill"


def batch_word(tag: int, batch: int) -> str:
    """A word that only this batch's records contain (letters only: every tokenizer keeps it
    whole)."""
    number, letters = tag * 1_000 + batch, ""
    while True:
        number, digit = divmod(number, 26)
        letters += "abcdefghijklmnopqrstuvwxyz"[digit]
        if not number:
            return "zq" + letters


WRITER = (
    textwrap.dedent(
        """
        import sys, anyio
        from ditto import create_ditto
        from workers.memory import create_memory_worker

        def open_store(kind, target, schema):
            if kind == "sqlite":
                from workers.memory import SqliteMemoryStore
                return SqliteMemoryStore(target)
            if kind == "markdown":
                from workers.memory.stores.markdown import MarkdownMemoryStore
                return MarkdownMemoryStore(target)
            if kind == "mysql":
                from workers.memory.stores.mysql import MysqlMemoryStore
                return MysqlMemoryStore.from_url(target, pool_size=2)
            from workers.memory.stores.postgres import PostgresMemoryStore
            return PostgresMemoryStore.from_url(target, schema=schema, pool_size=2)

        async def main(kind, target, schema, tag, size):
            tag, size = int(tag), int(size)
            async with open_store(kind, target, schema) as store:
                async with create_ditto(workers=[create_memory_worker(store)]) as runtime:
                    print("ready", flush=True)
                    batch = 0
                    while True:
                        memories = [
                            {
                                "key": f"t{tag}-b{batch}:{n}",
                                "namespace": "kill",
                                "content": f"{batch_word(tag, batch)} record {n}",
                            }
                            for n in range(size)
                        ]
                        result = await runtime.invoke("MEMORY.WRITE", {"memories": memories})
                        if not result.ok:
                            print("failed", result.error.code, flush=True)
                            return
                        print(batch, flush=True)
                        batch += 1

        """
    )
    + inspect.getsource(batch_word)
    + "\nanyio.run(main, *sys.argv[1:])\n"
)

OpenStore = Callable[[], Awaitable[MemoryStore]]


async def _line(lines: BufferedByteReceiveStream) -> str | None:
    """The child's next line, or ``None`` once it has no more."""
    try:
        return (await lines.receive_until(b"\n", 1_024)).decode()
    except (anyio.EndOfStream, anyio.IncompleteRead):
        return None


async def _run_and_kill(rng: random.Random, arguments: list[str], tag: int) -> set[int]:
    """One writer, killed at a random moment: the batches it acknowledged."""
    command = [sys.executable, "-c", WRITER, *arguments, str(tag), str(SIZE)]
    # anyio's own process (no helper thread): a thread outliving the test would keep its event
    # loop alive for the rest of the session.
    async with await anyio.open_process(command, stdin=subprocess.DEVNULL, stderr=None) as child:
        assert child.stdout is not None
        lines = BufferedByteReceiveStream(child.stdout)
        try:
            with anyio.fail_after(60):
                assert await _line(lines) == "ready"
                started = anyio.current_time()
                acknowledged = [await _line(lines) for _ in range(rng.randint(0, 3))]
                assert None not in acknowledged, "the writer stopped on its own"
                # The kill lands a random fraction of a batch later (this picks the moment;
                # nothing waits on it): at most 1.5 batch durations, as measured so far.
                elapsed = anyio.current_time() - started
                batch_s = elapsed / len(acknowledged) if acknowledged else 0.05
                await anyio.sleep(rng.uniform(0, 1.5 * batch_s))
        finally:
            child.kill()
        while (line := await _line(lines)) is not None:  # acknowledged before it died
            acknowledged.append(line)
        assert await child.wait() == -signal.SIGKILL, acknowledged  # killed, not failed
    assert not [line for line in acknowledged if line and line.startswith("failed")], acknowledged
    return {int(line) for line in acknowledged if line and line.isdigit()}


async def _check_after_kill(
    store: MemoryStore, acknowledged: dict[int, set[int]], tag: int, context: str
) -> None:
    done = {f"t{t}-b{b}" for t, batches in acknowledged.items() for b in batches}
    # Besides the acknowledged batches, only the one under way when a writer was killed.
    under_way = {f"t{t}-b{len(batches)}" for t, batches in acknowledged.items()}
    counts = {
        batch: await store.count(MemoryFilter(namespace=NAMESPACE, key_prefix=f"{batch}:"))
        for batch in sorted(done | under_way)
    }
    assert set(counts.values()) <= {0, SIZE}, f"a partial batch: {counts} ({context})"
    assert all(counts[batch] == SIZE for batch in done), f"a batch lost: {counts} ({context})"
    everything = await store.count(MemoryFilter(namespace=NAMESPACE))
    assert everything == sum(counts.values()), f"unexpected batches ({context})"
    async with create_ditto(workers=[create_memory_worker(store)]) as runtime:
        for batch, count in counts.items():
            t, b = (int(part[1:]) for part in batch.split("-"))
            found = await runtime.invoke(
                "MEMORY.SEARCH",
                {"query": batch_word(t, b), "limit": 10_000, "filter": {"namespace": NAMESPACE}},
            )
            assert found.ok, found.error
            assert len(found.output.hits) == count, (batch, context)
            assert {hit.memory.key.split(":")[0] for hit in found.output.hits} <= {batch}
        again = await runtime.invoke(
            "MEMORY.WRITE",
            {"memories": [{"key": f"after-{tag}", "namespace": "after", "content": "again"}]},
        )
        assert again.ok, (again.error, context)


async def _kill_rounds(
    open_store: OpenStore,
    arguments: list[str],
    health: Callable[[MemoryStore], Awaitable[None]],
    history_creates: Callable[[], Awaitable[int]],
) -> None:
    seed = int.from_bytes(os.urandom(4), "big")
    rng = random.Random(seed)
    acknowledged: dict[int, set[int]] = {}
    for tag in range(ROUNDS):
        acknowledged[tag] = await _run_and_kill(rng, arguments, tag)
        context = f"round {tag}, seed {seed}"
        store = await open_store()
        try:
            await _check_after_kill(store, acknowledged, tag, context)
            await health(store)
            assert await history_creates() == await store.count(MemoryFilter()), context
        finally:
            await store.aclose()


async def test_sqlite_batches_survive_kill_9_whole_or_not_at_all(tmp_path: Path) -> None:
    path = tmp_path / "memory.sqlite"

    async def open_store() -> MemoryStore:
        store = SqliteMemoryStore(path)
        await store.open()
        return store

    async def health(store: MemoryStore) -> None:
        assert isinstance(store, SqliteMemoryStore)
        report = await store.health()
        assert report["integrity"] == "ok", report
        assert report["keyword_index_in_sync"] is True, report

    async def history_creates() -> int:
        with closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as connection:
            (count,) = connection.execute(
                "SELECT count(*) FROM memory_history WHERE change = 'create'"
            ).fetchone()
        return int(count)

    await _kill_rounds(open_store, ["sqlite", str(path), ""], health, history_creates)


@pytest.mark.postgres
async def test_postgres_batches_survive_kill_9_whole_or_not_at_all(
    postgres_space: PostgresSpace,
) -> None:
    import asyncpg

    from workers.memory.stores.postgres import PostgresMemoryStore

    url, schema = postgres_space.url, postgres_space.schema

    async def open_store() -> MemoryStore:
        store = PostgresMemoryStore.from_url(url, schema=schema, pool_size=2)
        await store.open()
        return store

    async def health(store: MemoryStore) -> None:
        assert isinstance(store, PostgresMemoryStore)
        report = await store.health()
        assert report["indexes_valid"] is True, report

    async def history_creates() -> Any:
        connection = await asyncpg.connect(url, timeout=10)
        try:
            return await connection.fetchval(
                f'SELECT count(*) FROM "{schema}".memory_history WHERE change = $1', "create"
            )
        finally:
            await connection.close()

    await _kill_rounds(open_store, ["postgres", url, schema], health, history_creates)


async def test_markdown_batches_survive_kill_9_whole_or_not_at_all(tmp_path: Path) -> None:
    from workers.memory.stores.markdown import MarkdownMemoryStore

    folder = tmp_path / "memory"

    async def open_store() -> MemoryStore:
        store = MarkdownMemoryStore(folder)
        await store.open()
        return store

    async def health(store: MemoryStore) -> None:
        # Opening replayed or dropped the batch under way: no journal, no temporary file.
        leftovers = [p.name for p in folder.rglob("*") if p.name.endswith(".ditto-tmp")]
        assert leftovers == []
        assert not (folder / ".ditto" / "journal.json").exists()

    async def history_creates() -> int:
        lines = (folder / ".ditto" / "history.jsonl").read_bytes().splitlines()
        return sum(b'"change":"create"' in line for line in lines)

    await _kill_rounds(open_store, ["markdown", str(folder), ""], health, history_creates)


@pytest.mark.mysql
async def test_mysql_batches_survive_kill_9_whole_or_not_at_all(mysql_space: MysqlSpace) -> None:
    from workers.memory.stores.mysql import MysqlMemoryStore

    url = mysql_space.url

    async def open_store() -> MemoryStore:
        store = MysqlMemoryStore.from_url(url, pool_size=2)
        await store.open()
        return store

    async def health(store: MemoryStore) -> None:
        assert isinstance(store, MysqlMemoryStore)
        report = await store.health()
        assert report["integrity"] == "OK", report

    async def history_creates() -> int:
        import pymysql

        from workers.memory.stores.mysql.asyncmy_driver import MysqlUrl

        parts = MysqlUrl.parse(url)
        connection = pymysql.connect(
            host=parts.host, port=parts.port, user=parts.user, password=parts.password,
            database=parts.database,
        )  # fmt: skip
        try:
            with connection.cursor() as cursor:
                cursor.execute("SELECT COUNT(*) FROM memory_history WHERE `change` = 'create'")
                return int(cursor.fetchone()[0])
        finally:
            connection.close()

    await _kill_rounds(open_store, ["mysql", url, ""], health, history_creates)
