"""The SQLite store's keyword index stays exactly the index of its records.

A write that retires, merges or replaces records rewrites a record's FTS entry only when its
indexed text (key, summary, content) changed. After every kind of such write, the index must
answer every word as an index rebuilt from the records would: same text stored per record,
FTS5's own integrity check passing, and the same rows for each word of either index.
"""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from workers.memory import MemoryDraft, MemoryPatch, SearchInput, SqliteMemoryStore
from workers.memory.model.planning import WriteRules
from workers.memory.model.reviews import ReviewDecision
from workers.memory.stores.rows import row_to_item
from workers.memory.stores.sqlite.sql import COLUMNS, fts_row, match_expression

pytestmark = pytest.mark.anyio

TRUSTED = {"agent": 0, "user": 1}


class Clock:
    """A clock one second further on each reading: every write is a new moment."""

    def __init__(self) -> None:
        self.now = datetime(2026, 9, 1, tzinfo=UTC)

    def __call__(self) -> datetime:
        self.now += timedelta(seconds=1)
        return self.now


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[SqliteMemoryStore]:
    async with SqliteMemoryStore(tmp_path / "m.sqlite", clock=Clock()) as opened:
        yield opened


def _draft(content: str, key: str | None = None, **fields: Any) -> MemoryDraft:
    return MemoryDraft(content=content, key=key, namespace="n", source="chat", **fields)


def _rows_of(connection: sqlite3.Connection, table: str, term: str) -> set[int]:
    sql = f"SELECT rowid FROM {table} WHERE {table} MATCH ?"
    return {rowid for (rowid,) in connection.execute(sql, (match_expression([term]),))}


def assert_index_exact(path: Path) -> None:
    """The store's FTS index is the one its records would build, word for word."""
    with sqlite3.connect(path) as connection:
        rows = connection.execute(f"SELECT m.seq, {COLUMNS} FROM memories m").fetchall()
        expected = {row[0]: fts_row(row_to_item(row[1:])) for row in rows}
        stored = {
            rowid: (key, summary, body)
            for rowid, key, summary, body in connection.execute(
                "SELECT rowid, key, summary, body FROM memory_fts"
            )
        }
        assert stored == expected
        # The index itself against the text it holds (raises SQLITE_CORRUPT_VTAB on a mismatch).
        connection.execute("INSERT INTO memory_fts(memory_fts) VALUES ('integrity-check')")
        connection.execute(
            "CREATE VIRTUAL TABLE temp.rebuilt "
            "USING fts5(key, summary, body, tokenize='porter unicode61')"
        )
        connection.executemany(
            "INSERT INTO rebuilt(rowid, key, summary, body) VALUES (?, ?, ?, ?)",
            [(seq, *text) for seq, text in expected.items()],
        )
        connection.execute(
            "CREATE VIRTUAL TABLE temp.rebuilt_vocab USING fts5vocab(temp, rebuilt, 'row')"
        )
        terms = {term for (term,) in connection.execute("SELECT term FROM memory_fts_vocab")}
        terms |= {term for (term,) in connection.execute("SELECT term FROM rebuilt_vocab")}
        assert terms
        for term in sorted(terms):
            assert _rows_of(connection, "memory_fts", term) == _rows_of(connection, "rebuilt", term)


async def _finds(store: SqliteMemoryStore, word: str) -> list[str]:
    """Ids of records of any status whose keyword index entry holds ``word``."""
    await store.flush()
    with sqlite3.connect(store.path) as connection:
        return [
            item_id
            for (item_id,) in connection.execute(
                "SELECT m.id FROM memory_fts f JOIN memories m ON m.seq = f.rowid "
                "WHERE memory_fts MATCH ?",
                (match_expression([word]),),
            )
        ]


async def test_a_supersession_keeps_both_records_indexed_as_they_read(
    store: SqliteMemoryStore,
) -> None:
    (old,) = await store.write([_draft("the walrus drinks espresso", "drink")], "create")
    rules = WriteRules(supersede=frozenset({0}))
    (new,) = await store.write(
        [_draft("the walrus drinks matcha", "drink")], "upsert", None, None, rules
    )
    assert new.supersedes == old.id
    assert_index_exact(store.path)
    # The superseded record keeps its text (history and as_of reads find it).
    assert await _finds(store, "espresso") == [old.id]
    assert await _finds(store, "matcha") == [new.id]


async def test_a_contested_write_leaves_the_holder_indexed(store: SqliteMemoryStore) -> None:
    await store.write([_draft("the heron lives in Oslo", "home", trust="user")], "create")
    rules = WriteRules(supersede=frozenset({0}), ranks=TRUSTED)
    (claim,) = await store.write(
        [_draft("the heron lives in Lima", "home", trust="agent")], "upsert", None, None, rules
    )
    assert claim.status == "contested"
    assert_index_exact(store.path)


async def test_merges_keep_the_records_text(store: SqliteMemoryStore) -> None:
    first, second = await store.write(
        [_draft("the otter collects pebbles"), _draft("the otter sleeps afloat", "sleep")],
        "create",
    )
    rules = WriteRules(
        merges={item.id: (item.version, ["mail", "notes"]) for item in (first, second)}
    )
    await store.write([], "create", None, None, rules)
    assert rules.merged[first.id].sources == ["mail", "notes"]
    assert_index_exact(store.path)
    assert await _finds(store, "pebbles") == [first.id]


@pytest.mark.parametrize(
    "change",
    [
        {"content": "the lynx hunts at dusk"},  # content
        {"summary": "a lynx fact"},  # summary only
        {"tags": ["cats"]},  # not indexed: the entry stays as it is
        {"category": "daily", "metadata": {"seen": 2}},
    ],
)
async def test_a_keyed_replace_indexes_what_it_stored(
    store: SqliteMemoryStore, change: dict[str, Any]
) -> None:
    await store.write([_draft("the lynx hunts at dawn", "lynx")], "create")
    fields: dict[str, Any] = {"content": "the lynx hunts at dawn", **change}
    content = fields.pop("content")
    (replaced,) = await store.write([_draft(str(content), "lynx", **fields)], "upsert")
    assert replaced.version == 2
    assert_index_exact(store.path)
    assert await _finds(store, "dawn") == (
        [] if content != "the lynx hunts at dawn" else [replaced.id]
    )


async def test_the_old_text_of_a_replaced_record_is_not_found(store: SqliteMemoryStore) -> None:
    await store.write([_draft("the ibis wades in marshes", "ibis")], "create")
    await store.write([_draft("the ibis nests in reeds", "ibis", summary="ibis nesting")], "upsert")
    assert await _finds(store, "marshes") == []
    hits = await store.search(SearchInput(query="marshes wades"))
    assert hits == []
    assert [hit.memory.key for hit in await store.search(SearchInput(query="reeds"))] == ["ibis"]
    assert_index_exact(store.path)


async def test_one_batch_that_retires_inserts_replaces_and_merges(
    store: SqliteMemoryStore,
) -> None:
    _, replaced, merged, _ = await store.write(
        [
            _draft("the crane flies south", "crane"),
            _draft("the stork eats frogs", "stork"),  # replaced and merged by one write
            _draft("the swift never lands"),
            _draft("the heron stands still", "heron"),
        ],
        "create",
    )
    rules = WriteRules(
        supersede=frozenset({0}),
        merges={merged.id: (merged.version, ["radio"]), replaced.id: (replaced.version, ["tv"])},
    )
    await store.write(
        [
            _draft("the crane flies west", "crane"),
            _draft("the stork eats fish", "stork"),
            _draft("the robin sings early", "robin"),
            _draft("the heron stands tall", "heron"),
        ],
        "upsert",
        None,
        None,
        rules,
    )
    assert_index_exact(store.path)
    assert len(await _finds(store, "crane")) == 2
    assert await _finds(store, "still") == []


@pytest.mark.parametrize(
    "patch",
    [
        {"content": "the moth seeks lamps"},
        {"summary": "moth notes"},
        {"summary": None},
        {"tags": ["insects"], "pinned": True},
        {"archived": True},
    ],
)
async def test_an_update_indexes_what_it_stored(
    store: SqliteMemoryStore, patch: dict[str, Any]
) -> None:
    (moth,) = await store.write(
        [_draft("the moth seeks moonlight", "moth", summary="night flyer")], "create"
    )
    await store.update([MemoryPatch(moth.id, **patch)])
    assert_index_exact(store.path)
    assert (await _finds(store, "moonlight") == []) == ("content" in patch)


async def test_reviews_index_accepted_retired_and_rejected_records(
    store: SqliteMemoryStore,
) -> None:
    await store.write([_draft("the newt is green", "newt", trust="user")], "create")
    contest = WriteRules(supersede=frozenset({0}), ranks=TRUSTED)
    (claim,) = await store.write(
        [_draft("the newt is orange", "newt", trust="agent")], "upsert", None, None, contest
    )
    held = WriteRules(quarantined=frozenset({0, 1}))
    kept, dropped = await store.write(
        [_draft("the toad hums", "toad"), _draft("the toad sings")], "create", None, None, held
    )
    await store.review(
        [
            ReviewDecision(claim.id, "accept"),
            ReviewDecision(kept.id, "accept"),
            ReviewDecision(dropped.id, "reject"),
        ]
    )
    assert_index_exact(store.path)
    assert await _finds(store, "sings") == []
    assert len(await _finds(store, "newt")) == 2
