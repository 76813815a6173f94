"""The demo that ``ditto demo`` runs: one graph over a worker defined right here and the
configured MEMORY worker (by default a SQLite file, no server).

It shows the things every Ditto graph deals with:

* **fan-out** — four lookups start at once, each on the ``research`` worker;
* **a dependency** — ``summarize`` waits for all of them;
* **a failed node checked by a binder** — the ``archive`` lookup fails with ``NOT_FOUND``, and
  the summary's binder skips it after checking ``.ok`` instead of crashing on a missing output;
* **a timeout** — the ``web`` lookup is slower than its task timeout and ends as ``timeout``;
* **durable memory** — the summary is written to MEMORY under a stable key (re-runs replace it
  instead of adding duplicates), listed by how often earlier runs used each record, then
  searched (which counts as a use for the next run);
* **a working set** — the recalled memories enter an explicit CONTEXT (``memory:<id>`` items
  with their relevance), and SELECT picks what fits a token budget for the next model call.
  Explicit mode needs no Redis.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import anyio
import msgspec

from ditto.app.bootstrap import open_runtime
from ditto.app.config import Settings
from ditto.contracts.result import NodeResult
from ditto.errors import DittoError, ErrorCode
from ditto.graph import Binder, Graph, graph
from ditto.runtime.context import NodeContext
from ditto.runtime.results import RunResult
from ditto.runtime.worker import WorkerDefinition, define_worker

__all__ = ("SOURCES", "build_graph", "build_research_graph", "build_worker", "run_demo")

SOURCES = ("notes", "wiki", "archive", "web")
"""The lookups the demo fans out to: ``archive`` fails, ``web`` times out."""

_FACTS = {
    "notes": "Context is the working set of one task; it expires with a TTL.",
    "wiki": "Memory is durable: records outlive the process that wrote them.",
}
_SLOW_SOURCE_DELAY = 2.0
_SLOW_SOURCE_TIMEOUT = 0.2


class Lookup(msgspec.Struct, frozen=True):
    source: str
    topic: str


class Found(msgspec.Struct, frozen=True):
    source: str
    facts: list[str]


class SummaryRequest(msgspec.Struct, frozen=True):
    topic: str
    facts: list[str]
    skipped: dict[str, str]


class Summary(msgspec.Struct, frozen=True):
    text: str
    sources_used: int
    skipped: dict[str, str]


async def lookup(request: Lookup, ctx: NodeContext) -> Found:
    if request.source == "archive":
        raise DittoError(f"the archive has nothing on {request.topic!r}", code=ErrorCode.NOT_FOUND)
    if request.source == "web":
        await anyio.sleep(_SLOW_SOURCE_DELAY)  # slower than the task's timeout
    fact = _FACTS.get(request.source, f"{request.source} knows {request.topic}.")
    return Found(request.source, [fact])


async def summarize(request: SummaryRequest, ctx: NodeContext) -> Summary:
    text = " ".join(request.facts) if request.facts else "Nothing found."
    return Summary(text, len(request.facts), request.skipped)


def build_worker() -> WorkerDefinition:
    """The ``research`` worker: ``RESEARCH.LOOKUP`` and ``RESEARCH.SUMMARIZE``."""
    return define_worker("research", {"RESEARCH.LOOKUP": lookup, "RESEARCH.SUMMARIZE": summarize})


def _bind_summary(topic: str, deps: Mapping[str, NodeResult[Any]]) -> SummaryRequest:
    facts: list[str] = []
    skipped: dict[str, str] = {}
    for task_id, result in deps.items():
        if result.ok:  # never touch .output of a failed or timed-out node
            facts.extend(result.unwrap().facts)
        else:
            skipped[task_id] = result.status
    return SummaryRequest(topic, facts, skipped)


def _bind_lookup(source: str) -> Callable[[str, Mapping[str, NodeResult[Any]]], Lookup]:
    def bind(topic: str, deps: Mapping[str, NodeResult[Any]]) -> Lookup:
        return Lookup(source, topic)

    return bind


def build_research_graph() -> Graph:
    """Four lookups fanned out from the run input, then one summary that depends on all."""
    plan = graph("demo")
    for source in SOURCES:
        plan = plan.node(
            source,
            "RESEARCH.LOOKUP",
            [],
            _bind_lookup(source),
            timeout=_SLOW_SOURCE_TIMEOUT if source == "web" else None,
        )
    return plan.node("summarize", "RESEARCH.SUMMARIZE", list(SOURCES), _bind_summary)


def _bind_memory_write(topic: str, deps: Mapping[str, NodeResult[Any]]) -> dict[str, Any]:
    summary = deps["summarize"]
    if not summary.ok:
        raise RuntimeError("the summary failed, so there is nothing to remember")
    text = summary.unwrap()
    return {
        "mode": "upsert",
        "memories": [
            {
                "key": f"summary:{topic}",
                "namespace": MEMORY_NAMESPACE,
                "content": text.text,
                "summary": f"what the demo found about {topic}",
                "tags": ["demo", "summary"],
                "metadata": {"sources_used": text.sources_used},
                "source": "ditto demo",
            },
            *FACTS,
        ],
    }


def _after_write(build: Callable[[str], dict[str, Any]]) -> Binder:
    def bind(topic: str, deps: Mapping[str, NodeResult[Any]]) -> dict[str, Any]:
        for result in deps.values():
            result.unwrap()  # raises (stopping the run) if the write (or the listing) failed
        return build(topic)

    return bind


MEMORY_NAMESPACE = "demo"
FACTS = [
    {
        "key": "fact:context",
        "namespace": MEMORY_NAMESPACE,
        "content": "Context is a working set in Redis with a TTL; memory outlives it.",
        "tags": ["demo"],
    },
    {
        "key": "fact:keys",
        "namespace": MEMORY_NAMESPACE,
        "content": "A stable key makes a memory write idempotent: re-runs replay, not duplicate.",
        "tags": ["demo"],
    },
]


def _bind_working_set(topic: str, deps: Mapping[str, NodeResult[Any]]) -> dict[str, Any]:
    hits = deps["recall"].unwrap().hits  # raises (stopping the run) if the search failed
    goal = {
        "id": "goal",
        "content": f"Answer: what do we know about {topic}?",
        "metadata": {"current_goal": True},
    }
    return {
        "context": {"items": [goal]},
        "ingress": [
            {
                "id": f"memory:{hit.memory.id}",
                "source_node": "MEMORY.SEARCH",
                "content": hit.memory.content
                if isinstance(hit.memory.content, str)
                else msgspec.json.encode(hit.memory.content).decode(),
                "metadata": {"memory_id": hit.memory.id, "relevance": hit.score or 0.0},
            }
            for hit in hits
        ],
    }


def _bind_prompt(topic: str, deps: Mapping[str, NodeResult[Any]]) -> dict[str, Any]:
    working_set = deps["working_set"].unwrap()
    return {
        "context": {"items": msgspec.to_builtins(working_set.items)},
        "purpose": "infer",
        "query": topic,
        "max_tokens": PROMPT_TOKENS,
    }


PROMPT_TOKENS = 60
"""The demo's token budget for the next model call (small, so SELECT has to choose)."""


def build_graph() -> Graph:
    """Four lookups fanned out from the run input, one summary that depends on all of them;
    the summary remembered, listed and recalled; the recalled memories put into a working set
    and selected for a prompt."""
    plan = build_research_graph()
    return (
        plan.node("remember", "MEMORY.WRITE", ["summarize"], _bind_memory_write)
        .node(
            # Before the recall, so it shows the uses of earlier runs, which are stored by now:
            # listed after it, this run's uses (recorded in the background) would race the read.
            "listing",
            "MEMORY.QUERY",
            ["remember"],
            _after_write(
                lambda topic: {
                    "filter": {"namespace": MEMORY_NAMESPACE},
                    "order_by": {"field": "usage_count", "direction": "desc"},
                    "limit": 5,
                }
            ),
        )
        .node(
            "recall",
            "MEMORY.SEARCH",
            ["listing"],
            _after_write(
                lambda topic: {
                    "query": f"what do we know about {topic}?",
                    "filter": {"namespace": MEMORY_NAMESPACE},
                    "limit": 3,
                }
            ),
        )
        .node("working_set", "CONTEXT.UPDATE", ["recall"], _bind_working_set)
        .node("prompt", "CONTEXT.SELECT", ["working_set"], _bind_prompt)
    )


async def run_demo(topic: str = "agent memory", settings: Settings | None = None) -> RunResult:
    """Run the demo graph on a runtime built from ``settings`` (default: ``ditto.yaml`` and the
    environment, which means a SQLite memory file when nothing is configured)."""
    async with open_runtime(settings, workers=[build_worker()]) as runtime:
        return await runtime.run(build_graph(), topic)
