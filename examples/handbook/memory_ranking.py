"""A custom memory algorithm: keyword candidates from SQLite, re-ranked by recency.

    python3 tasks.py run examples/handbook/memory_ranking.py [DIRECTORY]

Two records mention Redis; ``recency_search`` scores each ``1 / (1 + age_days)`` from
``metadata["saved_at"]`` at a fixed evaluation time, so the newer one ranks first (0.5 against
1/244). Re-running adds no duplicate: the drafts are keyed and identical.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio

from ditto import NodeResult, create_ditto, graph
from workers.memory import SqliteMemoryStore, create_memory_worker
from workers.memory.retrieval.recency import recency_search

NOW = datetime(2026, 9, 1, tzinfo=UTC)
DRAFTS = [
    {
        "key": "handbook:older",
        "namespace": "handbook",
        "content": "Redis is working context storage",
        "metadata": {"saved_at": "2026-01-01T00:00:00Z"},
    },
    {
        "key": "handbook:newer",
        "namespace": "handbook",
        "content": "Redis context expires; restore history from Memory",
        "metadata": {"saved_at": "2026-08-31T00:00:00Z"},
    },
]


def find_after_write(_: Any, deps: Mapping[str, NodeResult[Any]]) -> dict[str, Any]:
    written = deps["written"]
    if not written.ok:  # never search over a failed write
        raise RuntimeError(f"memory write failed: {written.error}")
    return {
        "query": "Redis",
        "filter": {"namespace": "handbook"},
        "strategy": "recent-keyword",
        "limit": 2,
    }


PLAN = (
    graph("write-and-recall")
    .node("written", "MEMORY.WRITE", [], lambda _, deps: {"memories": DRAFTS})
    .node("found", "MEMORY.SEARCH", ["written"], find_after_write)
)


async def main(directory: Path) -> list[tuple[str | None, float | None]]:
    async with SqliteMemoryStore(directory / "ranking.sqlite") as store:
        worker = create_memory_worker(store, search=recency_search(store, now=NOW))
        async with create_ditto(workers=[worker]) as runtime:
            run = await runtime.run(PLAN)
    ranked = [(hit.memory.key, hit.score) for hit in run["found"].unwrap().hits]
    for position, (key, score) in enumerate(ranked, start=1):
        print(
            f"{position}. {key}  score={score:.3f}" if score is not None else f"{position}. {key}"
        )
    return ranked


if __name__ == "__main__":
    target = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(".examples-handbook")
    target.mkdir(parents=True, exist_ok=True)
    anyio.run(main, target)
