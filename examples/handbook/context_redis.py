"""Context in Redis, fed from memory: LOAD, recall, UPDATE, SELECT, and a stale writer.

    export DITTO_WORKER_CONTEXT_REDIS_URL=redis://127.0.0.1:6379/0
    python3 tasks.py run examples/handbook/context_redis.py

One graph loads a session's working set into Redis, searches memory, maps the hits into the
working set (``memory:<id>`` items whose relevance is the search score), and selects what fits
a token budget for the next model call. Then two writers race: the one holding a stale version
gets ``STATE_CONFLICT`` instead of silently overwriting the other's change.

The example writes under a private key prefix and deletes its key when it ends.
"""

from __future__ import annotations

import contextlib
import os
import sys
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import anyio
from redis.exceptions import RedisError

from ditto import DittoError, NodeFailedError, NodeResult, create_ditto, graph
from workers.context import ContextScope, RedisContextStore, create_context_worker
from workers.memory import SqliteMemoryStore, create_memory_worker

SCOPE = {"session_id": "handbook-session"}
NOTES = [
    {"key": "redis:ttl", "content": "Redis context expires after its TTL; rebuild it from memory"},
    {"key": "redis:cas", "content": "Context writes use compare-and-set on a version"},
    {"key": "sqlite:wal", "content": "The SQLite memory file uses WAL so reads run during writes"},
]


def map_hits(_: Any, deps: Mapping[str, NodeResult[Any]]) -> dict[str, Any]:
    hits = deps["recall"].unwrap().hits  # a failed search stops the run before context changes
    return {
        "scope": SCOPE,
        "ingress": [
            {
                "id": f"memory:{hit.memory.id}",
                "source_node": "MEMORY.SEARCH",
                "content": hit.memory.content,
                "metadata": {"memory_id": hit.memory.id, "relevance": hit.score or 0.0},
            }
            for hit in hits
        ],
    }


def after(task: str, payload: dict[str, Any]) -> Any:
    def bind(_: Any, deps: Mapping[str, NodeResult[Any]]) -> dict[str, Any]:
        deps[task].unwrap()
        return payload

    return bind


PLAN = (
    graph("context-from-memory")
    .node(
        "loaded",
        "CONTEXT.LOAD",
        [],
        lambda _, deps: {
            "scope": SCOPE,
            "sources": [{"role": "user", "content": "Why did my Redis context disappear?"}],
        },
    )
    .node(
        "recall",
        "MEMORY.SEARCH",
        ["loaded"],
        after("loaded", {"query": "why does redis context expire", "limit": 3}),
    )
    .node("working_set", "CONTEXT.UPDATE", ["recall"], map_hits)
    .node(
        "prompt",
        "CONTEXT.SELECT",
        ["working_set"],
        after(
            "working_set",
            {
                "scope": SCOPE,
                "purpose": "infer",
                "query": "redis context expire",
                "max_tokens": 40,
            },
        ),
    )
)


async def main(url: str, directory: Path) -> None:
    context_store = RedisContextStore.from_url(
        url, key_prefix=f"ditto:handbook:{uuid.uuid4().hex}:"
    )
    try:
        async with SqliteMemoryStore(directory / "context-memory.sqlite") as memory_store:
            workers = [
                create_memory_worker(memory_store),
                create_context_worker(store=context_store),
            ]
            async with create_ditto(workers=workers) as runtime:
                await runtime.invoke("MEMORY.WRITE", {"memories": NOTES})
                run = await runtime.run(PLAN)
                working_set = run["working_set"].unwrap()
                selection = run["prompt"].unwrap()
                print(f"working set: {len(working_set.items)} items, version {working_set.version}")
                print(f"selected for the prompt (40 tokens): {selection.selected_item_ids}")

                # Two writers read the same version; the second to write loses, loudly.
                seen = (await runtime.invoke("CONTEXT.LOAD", {"scope": SCOPE})).unwrap().version
                first = await runtime.invoke(
                    "CONTEXT.UPDATE",
                    {
                        "scope": SCOPE,
                        "expected_version": seen,
                        "add": [{"id": "note:a", "content": "writer A was here"}],
                    },
                )
                second = await runtime.invoke(
                    "CONTEXT.UPDATE",
                    {
                        "scope": SCOPE,
                        "expected_version": seen,
                        "add": [{"id": "note:b", "content": "writer B was here"}],
                    },
                )
                print(f"writer A: {first.status}")
                print(f"writer B: {second.status} {second.error.code if second.error else ''}")
    finally:
        # Best-effort cleanup: when Redis is down, the run's own error is the one to show.
        with contextlib.suppress(RedisError):
            await context_store.client.delete(context_store.redis_key(ContextScope(**SCOPE)))
        await context_store.aclose()


if __name__ == "__main__":
    redis_url = os.environ.get("DITTO_WORKER_CONTEXT_REDIS_URL")
    if not redis_url:
        sys.exit("set DITTO_WORKER_CONTEXT_REDIS_URL (e.g. redis://127.0.0.1:6379/0) to run this")
    target = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(".examples-handbook")
    target.mkdir(parents=True, exist_ok=True)
    try:
        anyio.run(main, redis_url, target)
    except DittoError as exc:  # e.g. STATE_STORE_UNAVAILABLE when Redis is down
        # A failed node stops the plan in the binder that unwraps it: show the node's error.
        sys.exit(str(exc.__cause__ if isinstance(exc.__cause__, NodeFailedError) else exc))
