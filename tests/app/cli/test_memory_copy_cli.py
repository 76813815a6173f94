"""``ditto memory copy SRC DST`` and ``ditto memory verify A B`` over real stores: the round
trip SQLite -> MySQL -> Markdown -> SQLite is exact (history included), a copy run twice
changes nothing, an interrupted one finishes when run again without duplicates, a different
record in DST stops it with CONFLICT unless --overwrite, and no password from a URL is ever
printed."""

from __future__ import annotations

import itertools
import json
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import anyio
import msgspec
import pytest

from tests.app.cli.runner import invoke_cli
from tests.app.cli.store_seed import seed_store
from tests.services import MysqlSpace, PostgresSpace
from workers.memory import MemoryDraft, MemoryPatch, SqliteMemoryStore
from workers.memory.maintenance.transfer import copy_store, everything

RECORDS = 300


@pytest.fixture(scope="module")
def seeded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A SQLite store of 300 records and their history (every kind: see ``store_seed``);
    tests copy from it and never change it."""
    path = tmp_path_factory.mktemp("seed") / "origin.sqlite"

    async def seed() -> None:
        async with SqliteMemoryStore(path) as store:
            await seed_store(store, RECORDS)

    anyio.run(seed)
    return path


def _copy(source: str, target: str, *options: str) -> dict[str, Any]:
    copied = invoke_cli("memory", "copy", source, target, "--json", *options)
    assert copied.exit_code == 0, copied.stderr
    report: dict[str, Any] = json.loads(copied.stdout)
    return report


def _verify(first: str, second: str, *, history: bool = True) -> tuple[int, dict[str, Any]]:
    options = ["--history"] if history else []
    verified = invoke_cli("memory", "verify", first, second, "--json", *options)
    assert verified.exit_code in (0, 1), verified.stderr
    return verified.exit_code, json.loads(verified.stdout)


def _assert_equal(first: str, second: str) -> dict[str, Any]:
    code, report = _verify(first, second)
    assert (code, report["equal"]) == (0, True), report
    return report


def test_the_seed_holds_every_kind_of_record(seeded: Path) -> None:
    async def kinds() -> tuple[Counter[str], Counter[str]]:
        found: Counter[str] = Counter()
        changes: Counter[str] = Counter()
        async with SqliteMemoryStore(seeded) as store:
            async for page in store.pages(everything()):
                for item in page:
                    found[item.status] += 1
                    found["archived"] += item.archived_at is not None
                    found["pinned"] += item.pinned
                    found["expiring"] += item.expires_at is not None
                    found["used"] += item.usage_count > 0
                    found["json"] += not isinstance(item.content, str)
                    found["namespace " + item.namespace] += 1
            async for entries in store.history_pages():
                changes.update(entry.change for entry in entries)
        return found, changes

    found, changes = anyio.run(kinds)
    for kind in ("superseded", "contested", "archived", "pinned", "expiring", "used", "json"):
        assert found[kind] > 0, kind
    assert sum(name.startswith("namespace ") for name in found) == 4
    assert set(changes) == {"create", "update", "archive", "supersede", "delete"}


@pytest.mark.mysql
def test_sqlite_to_mysql_to_markdown_to_sqlite_round_trips_exactly(
    seeded: Path, tmp_path: Path, mysql_space: MysqlSpace
) -> None:
    origin = f"sqlite://{seeded}"
    hops = [origin, mysql_space.url, f"markdown://{tmp_path / 'md'}", f"sqlite:{tmp_path}/back.db"]
    for source, target in itertools.pairwise(hops):
        report = _copy(source, target)
        assert report["records"]["new"] > RECORDS - 20  # the deleted ones are history only
        assert report["history"]["held"] == 0
        _assert_equal(source, target)
    equal = _assert_equal(origin, hops[-1])
    assert sum(namespace["a"]["records"] for namespace in equal["namespaces"]) > RECORDS - 20
    assert all(namespace["a"] == namespace["b"] for namespace in equal["namespaces"])


def test_a_second_copy_changes_nothing(seeded: Path, tmp_path: Path) -> None:
    target = f"markdown:{tmp_path}/md"
    first = _copy(f"sqlite://{seeded}", target)
    again = _copy(f"sqlite://{seeded}", target)
    assert again["records"] == {
        "new": 0,
        "updated": 0,
        "unchanged": first["records"]["new"],
        "overwritten": 0,
        "removed": 0,
    }
    assert again["history"] == {"added": 0, "held": first["history"]["added"]}
    _assert_equal(f"sqlite://{seeded}", target)


def test_a_markdown_file_that_does_not_read_stops_copy_and_verify(
    seeded: Path, tmp_path: Path
) -> None:
    folder = tmp_path / "md"
    _copy(f"sqlite://{seeded}", f"markdown:{folder}")
    broken = sorted(folder.rglob("*.md"))[0]
    broken.write_text('---\nid: "unclosed\n---\nhello\n')
    for command in (("copy",), ("verify",)):
        refused = invoke_cli("memory", *command, f"markdown:{folder}", f"sqlite:{tmp_path}/back.db")
        assert refused.exit_code == 3, refused.stderr
        assert "STORE_CORRUPT" in refused.stderr
        assert "1 file(s) it cannot read as records" in refused.stderr
        assert broken.name in refused.stderr
    assert not (tmp_path / "back.db").exists() or _verify_count(tmp_path / "back.db") == 0


def _verify_count(path: Path) -> int:
    async def count() -> int:
        async with SqliteMemoryStore(path) as store:
            return await store.count(everything())

    return anyio.run(count)


class _Interrupted(Exception):
    pass


@pytest.mark.parametrize("part", ["records", "history"])
def test_an_interrupted_copy_finishes_when_run_again(
    seeded: Path, tmp_path: Path, part: str
) -> None:
    target = tmp_path / "target.sqlite"

    def stop(what: str, done: int, total: int | None) -> None:
        if what == part and done >= 100:
            raise _Interrupted  # as a Ctrl-C or a crash between two pages would

    async def interrupted() -> tuple[int, int]:
        async with SqliteMemoryStore(seeded) as source, SqliteMemoryStore(target) as store:
            with pytest.raises(_Interrupted):
                await copy_store(source, store, size=50, progress=stop)
            return await store.count(everything()), await source.count(everything())

    held, total = anyio.run(interrupted)
    assert held == (100 if part == "records" else total)
    resumed = _copy(f"sqlite://{seeded}", f"sqlite://{target}", "--batch", "50")
    assert resumed["records"]["unchanged"] == held
    assert (resumed["history"]["held"] > 0) == (part == "history")
    _, report = _verify(f"sqlite://{seeded}", f"sqlite://{target}")
    assert report["equal"], report  # counts equal too: no history entry was added twice


def _store_of(path: Path) -> SqliteMemoryStore:
    return SqliteMemoryStore(path)


def test_a_different_record_in_dst_is_a_conflict_unless_overwrite(
    seeded: Path, tmp_path: Path
) -> None:
    target = tmp_path / "target.sqlite"
    source, dst = f"sqlite://{seeded}", f"sqlite://{target}"
    _copy(source, dst)

    async def change_in_target() -> str:
        async with _store_of(target) as store:
            (item,) = await store.get([], ["k1"], "user:alice")
            await store.update([MemoryPatch(item.id, content="changed in DST")])
            return item.id

    changed = anyio.run(change_in_target)
    refused = invoke_cli("memory", "copy", source, dst)
    assert refused.exit_code == 3
    assert refused.stderr.strip().startswith("CONFLICT:")
    assert changed in refused.stderr
    assert "--overwrite" in refused.stderr
    code, report = _verify(source, dst)
    (alice,) = [n for n in report["namespaces"] if n["namespace"] == "user:alice"]
    assert code == 1
    assert alice["differences"]["changed"] == {"count": 1, "ids": [changed]}
    assert alice["differences"]["history_differs"]["ids"] == [changed]

    overwritten = _copy(source, dst, "--overwrite")
    assert overwritten["records"]["overwritten"] == 1
    code, report = _verify(source, dst)
    (alice,) = [n for n in report["namespaces"] if n["namespace"] == "user:alice"]
    # The record is SRC's again; DST's history keeps the update it made (it happened there).
    assert alice["a"]["checksum"] == alice["b"]["checksum"]
    assert alice["differences"]["history_differs"]["ids"] == [changed]


def test_a_key_dst_gave_to_its_own_record_is_a_conflict_unless_overwrite(
    tmp_path: Path,
) -> None:
    source, target = tmp_path / "source.sqlite", tmp_path / "target.sqlite"

    async def seed() -> None:
        async with _store_of(source) as store:
            await store.write([MemoryDraft(content="from SRC", key="city")], "create")
        async with _store_of(target) as store:
            await store.write([MemoryDraft(content="DST's own", key="city")], "create")

    anyio.run(seed)
    refused = invoke_cli("memory", "copy", f"sqlite://{source}", f"sqlite://{target}")
    assert refused.exit_code == 3
    assert "key 'city' belongs to record" in refused.stderr
    report = _copy(f"sqlite://{source}", f"sqlite://{target}", "--overwrite")
    assert (report["records"]["new"], report["records"]["removed"]) == (1, 1)
    code, _ = _verify(f"sqlite://{source}", f"sqlite://{target}", history=False)
    assert code == 0


def test_a_copy_again_brings_records_changed_in_src_up_to_date(tmp_path: Path) -> None:
    source, target = tmp_path / "source.sqlite", tmp_path / "target.sqlite"
    src, dst = f"sqlite://{source}", f"sqlite://{target}"

    async def write() -> list[str]:
        async with _store_of(source) as store:
            items = await store.write(
                [MemoryDraft(content=f"fact {i}", key=f"k{i}") for i in range(3)], "create"
            )
            return [item.id for item in items]

    ids = anyio.run(write)
    _copy(src, dst)

    async def change() -> None:
        async with _store_of(source) as store:
            await store.update([MemoryPatch(ids[0], content="fact 0, corrected")])
            await store.record_usage([ids[1]], datetime.now(UTC))
            await store.flush()
            await store.write([MemoryDraft(content="a new one")], "create")

    anyio.run(change)
    report = _copy(src, dst)
    assert report["records"] == {
        "new": 1,
        "updated": 2,
        "unchanged": 1,
        "overwritten": 0,
        "removed": 0,
    }
    _assert_equal(src, dst)


@pytest.mark.postgres
def test_no_password_is_ever_printed(
    seeded: Path, tmp_path: Path, postgres_space: PostgresSpace
) -> None:
    # The test server trusts local connections, so a password in the URL is accepted as is.
    parts = urlsplit(postgres_space.url)
    user = parts.username or "postgres"
    netloc = f"{user}:s3cret-pw@{parts.hostname}:{parts.port or 5432}"
    url = urlunsplit(parts._replace(netloc=netloc, query=f"schema={postgres_space.schema}"))
    outputs = []
    copied = invoke_cli("memory", "copy", f"sqlite://{seeded}", url)
    assert copied.exit_code == 0, copied.stderr
    assert "postgresql://***@" in copied.stderr
    verified = invoke_cli("memory", "verify", f"sqlite://{seeded}", url, "--history")
    assert verified.exit_code == 0, verified.stdout
    outputs += [copied, verified]
    refused_host = url.replace(f":{parts.port or 5432}", ":1")  # nothing listens there
    wrong_password = f"mysql://root:s3cret-pw@{parts.hostname}:3306/ditto_no_such_database"
    for failing, code in (
        (refused_host, 3),
        (wrong_password, 3),
        ("mysql://root:s3cret-pw@host:port/db", 2),  # malformed
        ("postgresql://u:s3cret-pw@h/db?schema=Not-A-Schema", 2),
    ):
        failed = invoke_cli("memory", "copy", f"sqlite://{seeded}", failing)
        assert failed.exit_code == code, (failing, failed.stderr)
        outputs.append(failed)
    outputs.append(invoke_cli("memory", "verify", url, url))  # the same store twice
    assert outputs[-1].exit_code == 2
    for result in outputs:
        assert "s3cret" not in result.stdout + result.stderr


def test_verify_names_what_differs(tmp_path: Path) -> None:
    first, second = tmp_path / "a.sqlite", tmp_path / "b.sqlite"

    async def seed() -> dict[str, str]:
        drafts = [MemoryDraft(content=f"fact {i}", key=f"k{i}", namespace="n") for i in range(4)]
        async with _store_of(first) as a, _store_of(second) as b:
            items = await a.write(drafts, "create")
            await b.restore(items[:3])  # k3 only in A
            await b.restore([msgspec.structs.replace(items[2], usage_count=5)])  # changed
            extra = await b.write([MemoryDraft(content="only B", namespace="other")], "create")
            return {"only_in_a": items[3].id, "changed": items[2].id, "only_in_b": extra[0].id}

    ids = anyio.run(seed)
    plain = invoke_cli("memory", "verify", f"sqlite://{first}", f"sqlite://{second}")
    assert plain.exit_code == 1
    assert f"n, only in A: {ids['only_in_a']}" in plain.stdout
    assert f"n, changed: {ids['changed']}" in plain.stdout
    assert f"other, only in B: {ids['only_in_b']}" in plain.stdout
    assert "different: 2 of 2 namespaces" in plain.stdout
    _code, report = _verify(f"sqlite://{first}", f"sqlite://{second}", history=False)
    by_name = {namespace["namespace"]: namespace for namespace in report["namespaces"]}
    assert by_name["n"]["a"]["records"] == 4
    assert by_name["n"]["b"]["records"] == 3
    assert by_name["n"]["differences"]["only_in_a"]["ids"] == [ids["only_in_a"]]
    assert by_name["other"]["differences"]["only_in_b"]["ids"] == [ids["only_in_b"]]


def test_locations_are_checked_before_any_store_is_touched(tmp_path: Path) -> None:
    missing, target = tmp_path / "missing.sqlite", tmp_path / "target.sqlite"
    cases = [
        (("nowhere", f"sqlite://{target}"), 2, "SRC: not a store location"),
        (("http://example.org/x", f"sqlite://{target}"), 2, "unknown kind of store 'http'"),
        ((f"sqlite://{target}", f"sqlite:{target}"), 2, "are the same store"),
        ((f"sqlite://{missing}", f"sqlite://{target}"), 3, "STORE_UNAVAILABLE"),
        (("config:" + str(tmp_path / "none.yaml"), f"sqlite://{target}"), 2, "no configuration"),
    ]
    for (source, dst), code, message in cases:
        result = invoke_cli("memory", "copy", source, dst)
        assert result.exit_code == code, result.stderr
        assert message in result.stderr
    assert not target.exists()
    assert not missing.exists()


def test_a_configured_store_is_named_by_its_configuration(seeded: Path, tmp_path: Path) -> None:
    config = tmp_path / "ditto.yaml"
    config.write_text(
        f"workers:\n  memory:\n    backend: markdown\n    markdown_path: '{tmp_path}/md'\n"
    )
    copied = invoke_cli("memory", "copy", f"sqlite://{seeded}", f"config:{config}")
    assert copied.exit_code == 0, copied.stderr
    assert f"config:{config} (markdown://{tmp_path}/md)" in copied.stderr
    _assert_equal(f"sqlite://{seeded}", f"markdown:{tmp_path}/md")
    listed = invoke_cli("memory", "stats", "--json", "--config", str(config))
    assert listed.exit_code == 0, listed.stderr


def test_one_namespace_is_copied_and_verified_alone(seeded: Path, tmp_path: Path) -> None:
    source, target = f"sqlite://{seeded}", f"sqlite:{tmp_path}/ops.sqlite"
    report = _copy(source, target, "--namespace", "team/ops")
    assert report["records"]["new"] > 0
    code, whole = _verify(source, target)
    assert code == 1
    assert {n["namespace"] for n in whole["namespaces"] if n["equal"]} == {"team/ops"}
    only = invoke_cli("memory", "verify", source, target, "--namespace", "team/ops", "--history")
    assert only.exit_code == 0, only.stdout
    assert "equal: both hold the same records and history entries" in only.stdout


def test_vectors_are_left_to_reindex_on_dst(tmp_path: Path) -> None:
    from workers.memory.retrieval.embeddings import HashingEmbedder

    source, target = tmp_path / "source.sqlite", tmp_path / "target.sqlite"

    async def seed() -> None:
        from ditto import create_ditto
        from workers.memory import create_memory_worker

        async with SqliteMemoryStore(source) as store:
            worker = create_memory_worker(store, embedder=HashingEmbedder(64))
            async with create_ditto(workers=[worker]) as runtime:
                memories = [{"content": "tea at five"}, {"content": "espresso at nine"}]
                (await runtime.invoke("MEMORY.WRITE", {"memories": memories})).unwrap()

    anyio.run(seed)
    copied = invoke_cli("memory", "copy", f"sqlite://{source}", f"sqlite://{target}")
    assert copied.exit_code == 0, copied.stderr
    assert "were not copied: run `ditto memory reindex`" in copied.stderr
    config = tmp_path / "target.yaml"
    config.write_text(
        f"workers:\n  memory:\n    sqlite_path: '{target}'\n"
        "    embedder:\n      kind: hashing\n      dimension: 64\n"
    )
    reindexed = invoke_cli("memory", "reindex", "--json", "--config", str(config))
    assert reindexed.exit_code == 0, reindexed.stderr
    assert json.loads(reindexed.stdout)["embedded"] == 2
    found = invoke_cli(
        "memory", "search", "tea", "--strategy", "vector", "--json", "--config", str(config)
    )
    assert found.exit_code == 0, found.stderr
    assert json.loads(found.stdout)["hits"][0]["memory"]["content"] == "tea at five"
