"""``ditto memory export`` / ``import`` of a large SQLite store: records per second and peak
memory, against raw ``sqlite3`` doing the same work in the same run.

It fills a SQLite memory file with N records (default 100,000, ~300 bytes of content each),
then runs, each as its own process so peak memory (``ru_maxrss`` from ``wait4``) is that
command's alone:

* ``ditto memory export FILE`` — against a raw ``sqlite3`` script that selects every row and
  writes it as one JSON line (the same page size);
* ``ditto memory import FILE`` into a new file — against a raw script that reads the JSONL and
  inserts the rows and their keyword-index rows, in batches of the same size.

Target: export peak memory < 200 MB at 100,000 records (it streams: memory stays flat as N grows).
Throughput ratios are printed for information; absolute numbers depend on the machine.

    python3 tasks.py bench memory_cli
    .venv/bin/python bench/memory_cli.py --records 20000
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import shutil
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path
from time import perf_counter

from workers.memory import MemoryDraft, SqliteMemoryStore

PEAK_TARGET_MB = 200
BATCH = 1_000
WORDS = ["memory", "agent", "context", "budget", "tea", "espresso", "policy", "session", "fact"]

RAW_EXPORT = textwrap.dedent(
    """
    import sqlite3, sys, msgspec
    from workers.memory.stores.rows import row_to_item
    from workers.memory.stores.sqlite.sql import COLUMNS
    connection = sqlite3.connect(sys.argv[1])
    encoder = msgspec.json.Encoder()
    with open(sys.argv[2], "wb") as out:
        after = -1
        while True:
            rows = connection.execute(
                f"SELECT m.seq, {COLUMNS} FROM memories m "
                "WHERE m.seq > ? ORDER BY m.seq LIMIT 1000",
                (after,),
            ).fetchall()
            out.write(b"".join(
                encoder.encode({"type": "record", "record": row_to_item(row[1:])}) + b"\\n"
                for row in rows
            ))
            if len(rows) < 1000:
                break
            after = rows[-1][0]
    """
)

RAW_IMPORT = textwrap.dedent(
    """
    import sqlite3, sys, msgspec
    from workers.memory.model.contracts import ExportLine
    from workers.memory.stores.sqlite.schema import migrate
    from workers.memory.stores.sqlite.sql import INSERT_COLUMNS, connect, fts_row, item_row
    connection = connect(sys.argv[1])
    migrate(connection)
    decoder = msgspec.json.Decoder(ExportLine)
    insert = f"INSERT INTO memories ({INSERT_COLUMNS}) VALUES ({', '.join('?' * 18)})"
    def store(batch):
        connection.execute("BEGIN IMMEDIATE")
        for item in batch:
            connection.execute(insert, item_row(item))
            seq = connection.execute("SELECT last_insert_rowid()").fetchone()[0]
            connection.execute(
                "INSERT INTO memory_fts(rowid, key, summary, body) VALUES (?, ?, ?, ?)",
                (seq, *fts_row(item)),
            )
        connection.execute("COMMIT")
    batch = []
    with open(sys.argv[2], "rb") as lines:
        for line in lines:
            batch.append(decoder.decode(line).record)
            if len(batch) >= 500:
                store(batch)
                batch = []
    store(batch)
    """
)


def measure(command: list[str], cwd: Path) -> tuple[float, float]:
    """Seconds and peak resident memory (MB) of one child process."""
    started = perf_counter()
    process = subprocess.Popen(command, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(process.pid, 0)
    elapsed = perf_counter() - started
    process.returncode = os.waitstatus_to_exitcode(status)
    if process.returncode != 0:
        assert process.stderr is not None
        sys.exit(f"{' '.join(command)} failed:\n{process.stderr.read().decode()}")
    return elapsed, usage.ru_maxrss / 1024  # kilobytes on Linux


async def fill(path: Path, records: int) -> None:
    rng = random.Random(7)
    async with SqliteMemoryStore(path) as store:
        for start in range(0, records, BATCH):
            drafts = [
                MemoryDraft(
                    content=" ".join(rng.choices(WORDS, k=40)),
                    key=f"record:{n}",
                    namespace=f"user-{n % 50}",
                    tags=[rng.choice(WORDS)],
                    metadata={"n": n},
                )
                for n in range(start, min(start + BATCH, records))
            ]
            await store.write(drafts, "create")


def main(records: int) -> None:
    root = Path(__file__).resolve().parent.parent
    ditto = shutil.which("ditto", path=str(Path(sys.executable).parent)) or "ditto"
    with tempfile.TemporaryDirectory(prefix="ditto-bench-cli-") as folder:
        work = Path(folder)
        source = work / "source.sqlite"
        print(f"filling {records:,} records ...", flush=True)
        asyncio.run(fill(source, records))
        config = work / "ditto.yaml"
        config.write_text(f"workers:\n  memory:\n    sqlite_path: '{source}'\n")
        target = work / "target.yaml"
        target.write_text(f"workers:\n  memory:\n    sqlite_path: '{work / 'copy.sqlite'}'\n")
        exported, raw_exported = work / "export.jsonl", work / "raw.jsonl"

        rows = []
        export = measure([ditto, "memory", "export", str(exported), "--config", str(config)], root)
        raw_export = measure(
            [sys.executable, "-c", RAW_EXPORT, str(source), str(raw_exported)], root
        )
        rows.append(("export", export, raw_export))
        imported = measure(
            [ditto, "memory", "import", str(exported), "--config", str(target)], root
        )
        raw_import = measure(
            [sys.executable, "-c", RAW_IMPORT, str(work / "raw-copy.sqlite"), str(exported)], root
        )
        rows.append(("import", imported, raw_import))
        size_mb = exported.stat().st_size / 1e6

    print(f"{records:,} records, export file {size_mb:.0f} MB")
    print(
        f"{'command':8} {'ditto rec/s':>12} {'raw rec/s':>10} {'ratio':>6} "
        f"{'ditto peak MB':>14} {'raw peak MB':>12}"
    )
    for name, (seconds, peak), (raw_seconds, raw_peak) in rows:
        rate, raw_rate = records / seconds, records / raw_seconds
        print(
            f"{name:8} {rate:12,.0f} {raw_rate:10,.0f} {rate / raw_rate:5.2f}x "
            f"{peak:14.0f} {raw_peak:12.0f}"
        )
    export_peak = rows[0][1][1]
    verdict = "ok" if export_peak < PEAK_TARGET_MB else "TARGET MISSED"
    print(f"export peak {export_peak:.0f} MB: {verdict} (< {PEAK_TARGET_MB} MB)")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=100_000, help="records in the store")
    main(parser.parse_args().records)
