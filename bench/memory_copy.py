"""``ditto memory copy`` round trip: SQLite -> MySQL -> Markdown -> SQLite of a store with
history, then ``ditto memory verify`` that the last store holds exactly the first.

It fills a SQLite memory file with N records (default 10,000) through the MEMORY nodes — every
kind of record a store keeps, with the history they leave (``tests/app/cli/store_seed.py``:
updates, archives, supersessions, contested claims, deletions, usage) — then runs each hop as
the real command in its own process and prints, per hop, records and history entries per
second. As a baseline measured in the same run, each hop is also done the scripted way into a
fresh target: ``ditto memory export --history`` to a file, then ``ditto memory import``.

    python3 tasks.py bench memory_copy
    .venv/bin/python bench/memory_copy.py --records 10000 --mysql URL

The MySQL URL comes from ``--mysql`` or ``$DITTO_TEST_MYSQL_URL`` (a private database is
created and dropped); without either the bench says so and exits.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path
from time import perf_counter

import anyio
import pymysql

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the seed is the tests' (bench/ is this script's folder)

from tests.app.cli.store_seed import seed_store  # noqa: E402
from workers.memory import SqliteMemoryStore  # noqa: E402
from workers.memory.maintenance.transfer import everything  # noqa: E402
from workers.memory.stores.mysql.asyncmy_driver import MysqlUrl  # noqa: E402

DITTO = [str(Path(sys.executable).parent / "ditto")]  # the console script, as a user runs it


def admin(url: str, statement: str) -> None:
    parts = MysqlUrl.parse(url)
    connection = pymysql.connect(
        host=parts.host, port=parts.port, user=parts.user, password=parts.password,
        autocommit=True,
    )  # fmt: skip
    try:
        with connection.cursor() as cursor:
            cursor.execute(statement)
    finally:
        connection.close()


def ditto(*args: str, env: dict[str, str] | None = None) -> tuple[float, str]:
    """Run ``ditto *args``; the seconds it took and its standard output."""
    started = perf_counter()
    done = subprocess.run(
        [*DITTO, *args],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})},
    )
    took = perf_counter() - started
    if done.returncode not in (0, 1) or (done.returncode and not done.stdout):
        raise SystemExit(f"ditto {args[0]} {args[1]} failed: {done.stderr.strip()}")
    return took, done.stdout


def config_of(location: str, folder: Path, name: str) -> tuple[Path, dict[str, str]]:
    """A ditto.yaml (and environment) naming ``location``, for export and import."""
    path = folder / f"{name}.yaml"
    env: dict[str, str] = {}
    kind, _, rest = location.partition(":")
    if kind == "mysql":
        env["DITTO_WORKER_MEMORY_MYSQL_URL"] = location
        path.write_text("workers:\n  memory:\n    backend: mysql\n")
    elif kind == "markdown":
        path.write_text(
            f"workers:\n  memory:\n    backend: markdown\n    markdown_path: '{rest}'\n"
        )
    else:
        path.write_text(f"workers:\n  memory:\n    sqlite_path: '{rest}'\n")
    return path, env


async def seed(path: Path, records: int) -> tuple[int, int]:
    async with SqliteMemoryStore(path) as store:
        await seed_store(store, records)
        entries = sum([len(page) async for page in store.history_pages()])
        return await store.count(everything()), entries


def main(records: int, url: str) -> None:
    base, _, _ = url.rpartition("/")
    databases = [f"ditto_bench_{uuid.uuid4().hex[:12]}" for _ in range(2)]
    for database in databases:
        admin(url, f"CREATE DATABASE `{database}` CHARACTER SET utf8mb4")
    try:
        with tempfile.TemporaryDirectory() as name:
            folder = Path(name)
            started = perf_counter()
            held, entries = anyio.run(seed, folder / "origin.sqlite", records)
            print(
                f"seeded {held:,} records and {entries:,} history entries "
                f"({records:,} written) in {perf_counter() - started:.1f} s"
            )
            hops = [
                f"sqlite:{folder}/origin.sqlite",
                f"{base}/{databases[0]}",
                f"markdown:{folder}/md",
                f"sqlite:{folder}/back.sqlite",
            ]
            scripted = [
                f"{base}/{databases[1]}",
                f"markdown:{folder}/md-scripted",
                f"sqlite:{folder}/back-scripted.sqlite",
            ]
            print(
                f"{'hop':<18} {'copy s':>7} {'records/s':>10} {'entries/s':>10}   "
                f"{'export+import s':>15} {'copy is':>8}"
            )
            for index, (source, target) in enumerate(itertools.pairwise(hops)):
                took, _ = ditto("memory", "copy", source, target)
                baseline = scripted_hop(hops[index], scripted[index], folder, index)
                kinds = f"{source.split(':')[0]} -> {target.split(':')[0]}"
                print(
                    f"{kinds:<18} {took:7.2f} {held / took:10,.0f} {entries / took:10,.0f}   "
                    f"{baseline:15.2f} {baseline / took:7.2f}x"
                )
            took, out = ditto("memory", "verify", hops[0], hops[-1], "--history", "--json")
            report = json.loads(out)
            verdict = "equal" if report["equal"] else "DIFFERENT"
            print(f"verify {hops[0].split(':')[0]} vs last hop --history: {verdict} ({took:.2f} s)")
            if not report["equal"]:
                raise SystemExit(json.dumps(report, indent=1)[:4000])
    finally:
        for database in databases:
            admin(url, f"DROP DATABASE `{database}`")


def scripted_hop(source: str, target: str, folder: Path, index: int) -> float:
    """Seconds of ``export --history`` from ``source`` then ``import`` into ``target``."""
    dump = folder / f"hop{index}.jsonl"
    source_config, source_env = config_of(source, folder, f"source{index}")
    target_config, target_env = config_of(target, folder, f"target{index}")
    took, _ = ditto(
        "memory", "export", str(dump), "--history", "--force", "--config", str(source_config),
        env=source_env,
    )  # fmt: skip
    more, _ = ditto("memory", "import", str(dump), "--config", str(target_config), env=target_env)
    return took + more


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=10_000)
    parser.add_argument("--mysql", default=os.environ.get("DITTO_TEST_MYSQL_URL"))
    arguments = parser.parse_args()
    if not arguments.mysql:
        print("skipped: pass --mysql URL or set DITTO_TEST_MYSQL_URL")
    else:
        main(arguments.records, arguments.mysql)
