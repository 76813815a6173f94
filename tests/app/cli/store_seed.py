"""A memory store worth copying: records of every kind a store keeps, written through the
MEMORY nodes so they carry the history a real application leaves behind.

Used by the ``ditto memory copy`` tests (a few hundred records) and by
``bench/memory_copy.py`` (10,000). For ``n`` records over four namespaces it holds: text and
JSON content (keys out of order, floats, unicode), summaries, tags, metadata, keys with
slashes, spaces and accents, updated records (several versions), archived, pinned,
expiring and expired records, records used (usage counters), superseded and contested
records (the write policy's contradiction stage), and deleted records (their history only).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from ditto import create_ditto
from workers.memory import MemoryStore, create_memory_worker
from workers.memory.policy.config import StageModes, WritePolicy
from workers.memory.ports import UsageTracking

__all__ = ("NAMESPACES", "SeedClock", "seed_store")

NAMESPACES = ("default", "user:alice", "team/ops", "équipe")
_BATCH = 500


@dataclass
class SeedClock:
    """A clock that moves one millisecond per reading from a fixed start (deterministic
    timestamps, microseconds included)."""

    now: datetime = field(default_factory=lambda: datetime(2026, 3, 1, 9, 30, tzinfo=UTC))

    def __call__(self) -> datetime:
        self.now += timedelta(microseconds=1_001)
        return self.now


def _draft(i: int) -> dict[str, Any]:
    namespace = NAMESPACES[i % len(NAMESPACES)]
    draft: dict[str, Any] = {
        "namespace": namespace,
        "category": ("core", "daily", "conversation")[i % 3],
        "tags": [f"t{i % 5}", "copy"] if i % 2 else [],
        "metadata": {"z": i, "a": {"y": i / 4, "x": [True, None, "é"]}} if i % 3 else {},
        "source": "seed" if i % 4 else None,
    }
    if i % 5:
        draft["key"] = f"item {i}/ö" if i % 7 == 0 else f"k{i}"
    if i % 6 == 0:
        draft["content"] = {"text": f"structured {i}", "b": 1.5, "a": [i, "ünï"]}
    else:
        draft["content"] = f"Record {i} about the staging cluster and tea number {i}"
    if i % 8 == 0:
        draft["summary"] = f"summary of {i}"
    if i % 9 == 0:
        draft["pinned"] = True
    if i % 10 == 1:
        draft["ttl"] = 3600 if i % 20 == 1 else 86_400 * 3650  # expired later, or not
    if i % 19 == 3 and "key" in draft:
        draft["trust"] = "verified"
    return draft


async def seed_store(store: MemoryStore, n: int, clock: SeedClock | None = None) -> None:
    """Fill ``store`` (opened, empty) with ``n`` records and their history (see the module)."""
    clock = clock or SeedClock()
    policy = WritePolicy(StageModes(contradiction="enforce"))
    worker = create_memory_worker(store, clock=clock, policy=policy)
    async with create_ditto(workers=[worker]) as runtime:

        async def call(node: str, payload: dict[str, Any]) -> Any:
            result = await runtime.invoke(node, payload)
            return result.unwrap()

        drafts = [_draft(i) for i in range(n)]
        items: list[Any] = []
        for start in range(0, n, _BATCH):
            # The contradiction stage waits for the calls below: the seed's texts differ by
            # numbers, which it reads as one fact changing (and two drafts of one batch that
            # supersede the same record log its supersession twice).
            batch = {"memories": drafts[start : start + _BATCH], "policy": {"contradiction": "off"}}
            items.extend((await call("MEMORY.WRITE", batch)).items)
        updates = [
            {"id": item.id, "content": f"updated {i}", "tags": ["updated"]}
            for i, item in enumerate(items)
            if i % 4 == 2
        ]
        again = [{"id": u["id"], "summary": "second update"} for u in updates[::3]]
        archived = [
            {"id": item.id, "archived": True} for i, item in enumerate(items) if i % 13 == 5
        ]
        for patches in (updates, again, archived):
            for start in range(0, len(patches), _BATCH):
                await call("MEMORY.UPDATE", {"updates": patches[start : start + _BATCH]})
        # Contradictions by key: the same trust supersedes, a lower one is contested.
        superseding = [
            {**_keyed(item), "content": f"newer fact {i}"}
            for i, item in enumerate(items)
            if i % 17 == 4 and item.key is not None and item.trust is None
        ]
        contesting = [
            {**_keyed(item), "content": f"doubtful claim {i}", "trust": "agent"}
            for i, item in enumerate(items)
            if item.trust == "verified"
        ]
        for memories in (superseding, contesting):
            for start in range(0, len(memories), _BATCH):
                payload = {"memories": memories[start : start + _BATCH], "mode": "upsert"}
                await call("MEMORY.WRITE", payload)
        gone = [item.id for i, item in enumerate(items) if i % 23 == 11]
        for start in range(0, len(gone), _BATCH):
            await call("MEMORY.DELETE", {"ids": gone[start : start + _BATCH]})
    if isinstance(store, UsageTracking):
        used = [item.id for i, item in enumerate(items) if i % 3 == 0 and item.id not in gone]
        await store.record_usage(used + used[::2], clock())
        await store.flush()


def _keyed(item: Any) -> dict[str, Any]:
    return {"key": item.key, "namespace": item.namespace}
