"""The ``CheckpointStore`` contract, run against every backend (in-process, SQLite, Redis).

Each test mirrors a sentence of the port's docstring (``ditto/runtime/checkpoints/port.py``).
"""

from __future__ import annotations

import os
from typing import Any

import anyio
import pytest

from ditto.errors import ErrorCode
from ditto.runtime.checkpoints import (
    CheckpointError,
    CheckpointStore,
    StoredCheckpoint,
)
from tests.runtime.checkpoints.conftest import Backend

pytestmark = pytest.mark.anyio

ODD_BYTES = (b"", b"\x00", b"\xff\xfe\x80 not UTF-8 \xc3\x28", os.urandom(70_000))


async def _loaded(store: CheckpointStore, checkpoint_id: str) -> StoredCheckpoint:
    stored = await store.load(checkpoint_id)
    assert stored is not None
    return stored


async def _code(call: Any) -> str:
    with pytest.raises(CheckpointError) as raised:
        await call
    return raised.value.code


# ----------------------------------------------------------------------- save and load


@pytest.mark.parametrize("envelope", ODD_BYTES, ids=["empty", "nul", "not-utf8", "70k-random"])
async def test_save_then_load_returns_the_bytes_verbatim(
    store: CheckpointStore, envelope: bytes
) -> None:
    await store.save("run-1", "graph:g", envelope)
    await store.append("run-1", [("t", envelope), ("ü/☃ key", b"v")])
    stored = await _loaded(store, "run-1")
    assert stored.id == "run-1"
    assert stored.scope == "graph:g"
    assert type(stored.envelope) is bytes
    assert stored.envelope == envelope
    assert stored.records == (("t", envelope), ("ü/☃ key", b"v"))
    assert all(type(value) is bytes for _, value in stored.records)


async def test_load_of_an_unknown_id_is_none(store: CheckpointStore) -> None:
    assert await store.load("never-saved") is None


async def test_saving_again_replaces_scope_and_envelope_and_keeps_the_records(
    store: CheckpointStore,
) -> None:
    await store.save("run", "graph:a", b"first")
    await store.append("run", [("t1", b"one")])
    before = await _loaded(store, "run")
    await store.save("run", "loop:b", b"second")
    after = await _loaded(store, "run")
    assert (after.scope, after.envelope) == ("loop:b", b"second")
    assert after.records == (("t1", b"one"),)
    assert after.updated_at > before.updated_at
    [info] = await store.list()
    assert (info.scope, info.records) == ("loop:b", 1)


# ----------------------------------------------------------------------- append


async def test_appends_keep_their_order_and_repeated_keys(store: CheckpointStore) -> None:
    await store.save("run", "graph:g", b"e")
    expected: list[tuple[str, bytes]] = []
    for n in range(60):
        batch = [(f"t{n % 7}", f"{n}:{m}".encode()) for m in range(n % 3 + 1)]
        await store.append("run", batch)
        expected.extend(batch)
    stored = await _loaded(store, "run")
    assert stored.records == tuple(expected)  # duplicates kept, in append order
    [info] = await store.list()
    assert info.records == len(expected)
    assert info.updated_at == stored.updated_at


async def test_append_moves_updated_at_and_an_empty_append_changes_nothing(
    store: CheckpointStore,
) -> None:
    await store.save("run", "graph:g", b"e")
    saved = await _loaded(store, "run")
    await store.append("run", [("t", b"x")])
    appended = await _loaded(store, "run")
    assert appended.updated_at > saved.updated_at
    await store.append("run", [])
    assert await _loaded(store, "run") == appended


async def test_append_to_an_unknown_checkpoint_is_not_found_and_writes_nothing(
    store: CheckpointStore,
) -> None:
    for records in ([("t", b"x")], []):
        assert await _code(store.append("ghost", records)) == "CHECKPOINT_NOT_FOUND"
    assert await store.load("ghost") is None
    assert await store.list() == []
    await store.save("ghost", "graph:g", b"e")
    assert (await _loaded(store, "ghost")).records == ()  # no record was kept aside


async def test_concurrent_appends_each_land_exactly_once(store: CheckpointStore) -> None:
    await store.save("run", "graph:g", b"e")
    async with anyio.create_task_group() as group:
        for n in range(500):
            group.start_soon(store.append, "run", [(f"task-{n}", n.to_bytes(2, "big"))])
    stored = await _loaded(store, "run")
    assert sorted(stored.records) == sorted((f"task-{n}", n.to_bytes(2, "big")) for n in range(500))
    [info] = await store.list()
    assert info.records == 500


async def test_concurrent_multi_record_appends_stay_contiguous(store: CheckpointStore) -> None:
    await store.save("run", "graph:g", b"e")
    async with anyio.create_task_group() as group:
        for n in range(100):
            group.start_soon(store.append, "run", [(f"c{n}", b"1"), (f"c{n}", b"2"), ("x", b"3")])
    records = (await _loaded(store, "run")).records
    assert len(records) == 300
    calls = [records[i : i + 3] for i in range(0, 300, 3)]
    assert sorted(call[0][0] for call in calls) == sorted(f"c{n}" for n in range(100))
    for first, second, third in calls:
        assert (first[1], second, third) == (b"1", (first[0], b"2"), ("x", b"3"))


async def test_a_failing_append_fails_alone_among_concurrent_ones(
    store: CheckpointStore,
) -> None:
    """A backend that commits concurrent calls together still answers each on its own."""
    await store.save("real", "graph:g", b"e")
    outcomes: dict[int, str] = {}

    async def append(n: int) -> None:
        target = "real" if n % 2 else f"missing-{n}"
        try:
            await store.append(target, [(f"t{n}", b"v")])
        except CheckpointError as exc:
            outcomes[n] = exc.code
        else:
            outcomes[n] = "ok"

    async with anyio.create_task_group() as group:
        for n in range(200):
            group.start_soon(append, n)
    assert outcomes == {n: "ok" if n % 2 else "CHECKPOINT_NOT_FOUND" for n in range(200)}
    stored = await _loaded(store, "real")
    assert sorted(key for key, _ in stored.records) == sorted(f"t{n}" for n in range(1, 200, 2))
    assert [info.id for info in await store.list()] == ["real"]


async def test_concurrent_save_append_and_delete_of_other_ids_do_not_interfere(
    store: CheckpointStore,
) -> None:
    await store.save("keep", "graph:g", b"e")
    await store.save("drop", "graph:g", b"e")
    async with anyio.create_task_group() as group:
        for n in range(50):
            group.start_soon(store.append, "keep", [(f"k{n}", b"v")])
            group.start_soon(store.save, f"new-{n}", "graph:h", b"n")
        group.start_soon(store.delete, "drop")
    assert len((await _loaded(store, "keep")).records) == 50
    assert await store.load("drop") is None
    assert len(await store.list(scope="graph:h")) == 50


async def test_the_store_keeps_its_own_copy_of_what_it_is_given(store: CheckpointStore) -> None:
    await store.save("run", "graph:g", b"e")
    records = [("t1", b"one")]
    await store.append("run", records)
    records.append(("t2", b"two"))
    records[0] = ("t1", b"changed")
    stored = await _loaded(store, "run")
    assert stored.records == (("t1", b"one"),)
    assert isinstance(stored.records, tuple)
    assert all(isinstance(record, tuple) for record in stored.records)


# ----------------------------------------------------------------------- list


async def test_list_is_newest_first_filtered_by_exact_scope_and_limited(
    store: CheckpointStore,
) -> None:
    await store.save("a", "graph:x", b"")
    await store.save("b", "graph:y", b"")
    await store.save("c", "graph:x", b"")
    await store.append("a", [("t", b"1"), ("u", b"2")])  # a becomes the newest
    infos = await store.list()
    assert [info.id for info in infos] == ["a", "c", "b"]
    assert [(info.scope, info.records) for info in infos] == [
        ("graph:x", 2),
        ("graph:x", 0),
        ("graph:y", 0),
    ]
    for info in infos:
        assert info.updated_at == (await _loaded(store, info.id)).updated_at
    assert [info.id for info in await store.list(scope="graph:x")] == ["a", "c"]
    assert [info.id for info in await store.list(scope="graph:x", limit=1)] == ["a"]
    assert [info.id for info in await store.list(limit=2)] == ["a", "c"]
    assert await store.list(scope="graph:") == []  # exact, not a prefix


async def test_list_breaks_ties_by_the_greater_id_first(
    backend: Backend, store: CheckpointStore
) -> None:
    backend.clock.step = 0.0
    for checkpoint_id in ("b", "a", "c"):
        await store.save(checkpoint_id, "graph:g", b"")
    assert [info.id for info in await store.list()] == ["c", "b", "a"]


async def test_a_scoped_list_finds_old_matches_behind_many_newer_others(
    store: CheckpointStore,
) -> None:
    for n in range(3):
        await store.save(f"old-{n}", "graph:wanted", b"")
    for n in range(250):
        await store.save(f"new-{n:03}", "graph:other", b"")
    found = await store.list(scope="graph:wanted", limit=2)
    assert [info.id for info in found] == ["old-2", "old-1"]
    assert len(await store.list(scope="graph:wanted")) == 3
    assert len(await store.list(limit=1_000)) == 253


# ----------------------------------------------------------------------- delete


async def test_delete_removes_envelope_and_records(store: CheckpointStore) -> None:
    await store.save("run", "graph:g", b"e")
    await store.append("run", [("t", b"x")])
    assert await store.delete("run") is True
    assert await store.load("run") is None
    assert await store.list() == []
    assert await _code(store.append("run", [("t", b"y")])) == "CHECKPOINT_NOT_FOUND"
    assert await store.delete("run") is False
    await store.save("run", "graph:g", b"again")
    assert (await _loaded(store, "run")).records == ()  # the old records are gone too


async def test_checkpoints_are_isolated_from_each_other(store: CheckpointStore) -> None:
    await store.save("one", "graph:g", b"1")
    await store.save("one:records", "graph:g", b"2")  # an id that looks like a key suffix
    await store.append("one", [("t", b"a")])
    await store.append("one:records", [("u", b"b")])
    assert (await _loaded(store, "one")).records == (("t", b"a"),)
    assert (await _loaded(store, "one:records")).records == (("u", b"b"),)
    assert await store.delete("one") is True
    survivor = await _loaded(store, "one:records")
    assert (survivor.envelope, survivor.records) == (b"2", (("u", b"b"),))


# ----------------------------------------------------------------------- validation

BAD_IDS = ["", "x" * 201, "a\nb", "nul\x00", "del\x7f", "c1\x85", "lone\ud800", 7, None, b"id"]


@pytest.mark.parametrize("bad", BAD_IDS, ids=repr)
async def test_invalid_ids_are_refused_before_any_io(store: CheckpointStore, bad: Any) -> None:
    calls = [
        store.save(bad, "graph:g", b""),
        store.append(bad, [("t", b"")]),
        store.load(bad),
        store.delete(bad),
    ]
    for call in calls:
        assert await _code(call) == ErrorCode.INVALID_INPUT
    assert await store.list() == []


@pytest.mark.parametrize(
    "arguments",
    [
        ("run", "", b""),
        ("run", "s" * 257, b""),
        ("run", "graph:\tg", b""),
        ("run", None, b""),
        ("run", "graph:g", "text"),
        ("run", "graph:g", bytearray(b"mutable")),
        ("run", "graph:g", memoryview(b"view")),
        ("run", "graph:g", None),
    ],
    ids=repr,
)
async def test_invalid_scopes_and_envelopes_are_refused(
    store: CheckpointStore, arguments: tuple[Any, Any, Any]
) -> None:
    assert await _code(store.save(*arguments)) == "INVALID_INPUT"
    assert await store.load("run") is None


@pytest.mark.parametrize(
    "records",
    [
        "tv",
        b"tv",
        [["t", b"v"]],
        [("t", b"v", b"w")],
        [("", b"v")],
        [(1, b"v")],
        [("lone\udc80", b"v")],
        [("t", "v")],
        [("t", bytearray(b"v"))],
        [("t", b"ok"), ("t", None)],
        None,
    ],
    ids=repr,
)
async def test_invalid_records_are_refused_and_nothing_is_appended(
    store: CheckpointStore, records: Any
) -> None:
    await store.save("run", "graph:g", b"")
    assert await _code(store.append("run", records)) == "INVALID_INPUT"
    assert (await _loaded(store, "run")).records == ()


@pytest.mark.parametrize("limit", [0, -1, True, 1.5, "3", None], ids=repr)
async def test_invalid_limits_and_scopes_of_list_are_refused(
    store: CheckpointStore, limit: Any
) -> None:
    assert await _code(store.list(limit=limit)) == "INVALID_INPUT"
    assert await _code(store.list(scope="")) == "INVALID_INPUT"


async def test_the_longest_and_unicode_ids_and_scopes_are_accepted(store: CheckpointStore) -> None:
    longest, unicode_id = "i" * 200, "run/ü-☃ 1"
    await store.save(longest, "s" * 256, b"")
    await store.save(unicode_id, "graph:ü", b"u")
    await store.append(unicode_id, [("\x00 any key text", b"v")])
    assert (await _loaded(store, longest)).scope == "s" * 256
    assert (await _loaded(store, unicode_id)).records == (("\x00 any key text", b"v"),)
    assert [info.id for info in await store.list(scope="graph:ü")] == [unicode_id]


# ----------------------------------------------------------------------- lifecycle


async def test_a_closed_store_refuses_every_call(store: CheckpointStore) -> None:
    await store.save("run", "graph:g", b"")
    await store.aclose()
    await store.aclose()  # idempotent
    for call in (
        store.save("run", "graph:g", b""),
        store.append("run", [("t", b"")]),
        store.load("run"),
        store.list(),
        store.delete("run"),
    ):
        with pytest.raises(CheckpointError) as raised:
            await call
        assert raised.value.code == "CHECKPOINT_STORE_UNAVAILABLE"
        assert raised.value.retryable is False


async def test_a_new_store_on_the_same_space_sees_everything(
    persistent_backend: Backend,
) -> None:
    first = persistent_backend.open()
    await first.save("run", "graph:g", b"\xffenvelope")
    await first.append("run", [("t1", b"a"), ("t2", b"")])
    await first.save("other", "loop:l", b"")
    await first.delete("other")
    second = persistent_backend.open()
    assert await second.load("run") == await first.load("run")
    await first.aclose()
    stored = await _loaded(second, "run")
    assert (stored.scope, stored.envelope) == ("graph:g", b"\xffenvelope")
    assert stored.records == (("t1", b"a"), ("t2", b""))
    assert [info.id for info in await second.list()] == ["run"]
    await second.append("run", [("t3", b"c")])  # and it can write after the first one closed
    third = persistent_backend.open()
    assert len((await _loaded(third, "run")).records) == 3
