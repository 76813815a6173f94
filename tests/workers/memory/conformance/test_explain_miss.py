"""``explain_miss`` on every store with keyword search: a search says which stage kept a record
out of its hits — the record's namespace, status or expiry, the filter, the ranking (no match,
under ``min_score``, past the limit, with its rank) — and never names a record the caller may
not see."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import msgspec
import pytest

from ditto import create_ditto
from tests.workers.memory.conftest import MemoryHarness, OpenStore, StoreEnv, requires
from workers.memory import AccessPolicy, create_memory_worker
from workers.memory.ports import KeywordSearch, RecordImport

pytestmark = [pytest.mark.anyio, requires(KeywordSearch)]


async def _why(memory: MemoryHarness, query: str, target: dict[str, str], **request: Any) -> Any:
    output = await memory.ok("MEMORY.SEARCH", {"query": query, "explain_miss": target, **request})
    return output.miss


async def test_each_stage_that_keeps_a_record_out_is_named(memory: MemoryHarness) -> None:
    await memory.write(
        {"key": "tabs", "content": "prefers tabs for indentation"},
        {"key": "other", "namespace": "elsewhere", "content": "indentation elsewhere"},
        {"key": "daily", "content": "indentation note for today", "category": "daily"},
        {"key": "brief", "content": "indentation reminder", "ttl": 60},
        *({"content": f"indentation rule number {n}"} for n in range(12)),
    )
    memory.clock.now += timedelta(seconds=61)
    returned = await _why(memory, "tabs", {"key": "tabs"})
    assert (returned.stage, returned.rank) == ("returned", 1)
    assert (await _why(memory, "indentation", {"key": "nope"})).stage == "not_found"
    elsewhere = await _why(
        memory,
        "indentation",
        {"id": (await _id(memory, "other", "elsewhere"))},
        filter={"namespace": "default"},
    )
    assert elsewhere.stage == "namespace"
    assert (await _why(memory, "indentation", {"key": "brief"})).stage == "expired"
    filtered = await _why(memory, "indentation", {"key": "daily"}, filter={"category": "core"})
    assert filtered.stage == "filter"
    missing_word = await _why(memory, "spaces", {"key": "tabs"})
    assert missing_word.stage == "not_a_candidate"
    cut = await _why(memory, "indentation rule", {"key": "tabs"}, limit=3)
    assert cut.stage == "limit"
    assert cut.rank > 3


async def _id(memory: MemoryHarness, key: str, namespace: str) -> str:
    (item,) = (await memory.ok("MEMORY.GET", {"keys": [key], "namespace": namespace})).items
    return str(item.id)


async def test_below_min_score_is_told_apart_from_no_match(memory: MemoryHarness) -> None:
    await memory.write(
        {"key": "weak", "content": "a long note that mentions coffee once among many other words"}
    )
    why = await _why(memory, "coffee", {"key": "weak"}, options={"min_score": 0.99})
    assert why.stage == "below_min_score"
    assert why.score is not None
    assert why.score < 0.99


@requires(RecordImport)
async def test_a_superseded_record_is_named_as_such(memory: MemoryHarness) -> None:
    (current,) = await memory.write({"key": "city", "content": "lives in Berlin"})
    assert isinstance(memory.store, RecordImport)
    old = msgspec.structs.replace(
        current,
        id="0190c0de-0000-7000-8000-0000000000b1",
        content="lives in Paris",
        status="superseded",
        valid_to=current.created_at,
    )
    await memory.store.restore([old])
    why = await _why(memory, "lives", {"id": old.id})
    assert why.stage == "superseded"


async def test_another_principals_private_record_is_not_found(
    open_store: OpenStore, store_env: StoreEnv
) -> None:
    store = await open_store()
    worker = create_memory_worker(store, clock=store_env.clock, access=AccessPolicy("enforce"))
    async with create_ditto(workers=[worker]) as runtime:
        secret = await runtime.invoke(
            "MEMORY.WRITE", {"memories": [{"content": "alice's private plan"}]}, principal="alice"
        )
        hidden = secret.unwrap().items[0]
        asked = await runtime.invoke(
            "MEMORY.SEARCH",
            {"query": "plan", "explain_miss": {"id": hidden.id}},
            principal="bob",
        )
    assert asked.unwrap().miss.stage == "not_found"
    assert asked.unwrap().miss.record_id is None
