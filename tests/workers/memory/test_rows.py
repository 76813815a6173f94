"""Rows of the SQL stores decode to the records they were written from."""

from __future__ import annotations

from datetime import UTC, datetime

import msgspec

from workers.memory.model.contracts import MemoryItem
from workers.memory.model.records import to_micros
from workers.memory.stores.postgres import sql as postgres_sql
from workers.memory.stores.rows import (
    ROW_FIELDS,
    governance_values,
    provenance_values,
    record_values,
    row_to_item,
)
from workers.memory.stores.sqlite.sql import COLUMNS


def test_rows_and_records_name_their_fields_in_one_order() -> None:
    # row_to_item builds records by position: the orders must not drift apart.
    assert tuple(field.name for field in msgspec.structs.fields(MemoryItem)) == ROW_FIELDS
    assert ", ".join(f"m.{name}" for name in ROW_FIELDS) == COLUMNS
    # PostgreSQL reads the usage counters from their own table, in the same places.
    postgres = [f"m.{name}" for name in ROW_FIELDS]
    postgres[12:14] = ["coalesce(u.usage_count, 0)", "u.last_used_at"]
    assert ", ".join(postgres) == postgres_sql.columns()


def row_of(item: MemoryItem) -> tuple[object, ...]:
    last_used = None if item.last_used_at is None else to_micros(item.last_used_at)
    return (
        *record_values(item),
        item.usage_count,
        last_used,
        *governance_values(item),
        *provenance_values(item),
    )


def test_a_row_decodes_to_the_record_it_holds() -> None:
    every_field = MemoryItem(
        id="r1",
        key="k",
        namespace="ns",
        content={"text": "hi", "n": [1, 2]},
        summary="s",
        category="facts",
        tags=["a", "b"],
        metadata={"m": 1},
        source="test",
        created_at=datetime(2026, 1, 2, 3, 4, 5, 6, tzinfo=UTC),
        updated_at=datetime(2026, 2, 3, 4, 5, 6, 7, tzinfo=UTC),
        version=3,
        usage_count=4,
        last_used_at=datetime(2026, 3, 4, 5, 6, 7, 8, tzinfo=UTC),
        pinned=True,
        archived_at=datetime(2026, 4, 5, 6, 7, 8, 9, tzinfo=UTC),
        owner="alice",
        visibility="private",
        trust="verified",
        principal="bob",
        status="superseded",
        valid_from=datetime(2025, 5, 6, 7, 8, 9, 10, tzinfo=UTC),
        valid_to=datetime(2026, 5, 6, 7, 8, 9, 11, tzinfo=UTC),
        expires_at=datetime(2027, 5, 6, 7, 8, 9, 12, tzinfo=UTC),
        supersedes="r0",
        contests="r2",
    )
    fresh = msgspec.structs.replace(
        every_field,
        key=None,
        summary=None,
        source=None,
        updated_at=every_field.created_at,
        last_used_at=None,
        pinned=False,
        archived_at=None,
        owner=None,
        visibility="shared",
        trust=None,
        principal=None,
        status="active",
        valid_from=None,
        valid_to=None,
        expires_at=None,
        supersedes=None,
        contests=None,
    )
    for item in (every_field, fresh):
        assert row_to_item(row_of(item)) == item
