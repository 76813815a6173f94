"""The audit trail records failures too, and names the keys and categories a call touched or
asked for (PRX's audit), on every store with an audit log."""

from __future__ import annotations

import pytest

from ditto import create_ditto
from tests.workers.memory.conftest import OpenStore, StoreEnv
from workers.memory import create_memory_worker
from workers.memory.ports import AuditLog

pytestmark = pytest.mark.anyio


async def test_successes_and_failures_are_audited_with_keys_and_categories(
    open_store: OpenStore, store_env: StoreEnv
) -> None:
    store = await open_store()
    assert isinstance(store, AuditLog)
    worker = create_memory_worker(store, audit=True, clock=store_env.clock)
    async with create_ditto(workers=[worker]) as runtime:
        written = await runtime.invoke(
            "MEMORY.WRITE",
            {"memories": [{"key": "pref:lang", "content": "zh", "category": "core"}]},
            principal="alice",
        )
        conflict = await runtime.invoke(
            "MEMORY.WRITE",
            {"memories": [{"key": "pref:lang", "content": "en", "category": "daily"}]},
            principal="alice",
        )
        missing = await runtime.invoke(
            "MEMORY.UPDATE", {"updates": [{"id": "no-such-id", "category": "daily"}]}
        )
    assert written.ok
    assert conflict.error is not None
    assert missing.error is not None
    entries = await store.audit_log()
    allowed, refused, absent = entries
    assert (allowed.decision, allowed.keys, allowed.categories) == (
        "allow",
        ["pref:lang"],
        ["core"],
    )
    assert allowed.ids == [written.unwrap().items[0].id]
    assert (refused.decision, refused.principal, refused.node) == (
        "failed",
        "alice",
        "MEMORY.WRITE",
    )
    assert (refused.keys, refused.categories) == (["pref:lang"], ["daily"])
    assert refused.detail is not None
    assert refused.detail.startswith("CONFLICT: ")
    assert (absent.decision, absent.ids, absent.categories) == ("failed", ["no-such-id"], ["daily"])
    assert absent.detail is not None
    assert absent.detail.startswith("NOT_FOUND: ")
