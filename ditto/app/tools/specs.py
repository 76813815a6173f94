"""The memory tools an agent is offered: names, descriptions and JSON Schemas, and the shapes
the model APIs expect them in (OpenAI function tools, Anthropic tools, MCP tools).

Two sets, as the seed systems define them:

* **PRX** — ``memory_store(key, value, category="core")``, ``memory_recall(query,
  max_results=20)``, ``memory_search(query, category=None, max_results=10)``,
  ``memory_get(key)`` and ``memory_forget(key)``: durable knowledge by stable key; and
  ``memory_why(query, key)``, which says why a search leaves a memory out.
* **PAR** — ``remember_memory(content, summary=None, categories=None)``,
  ``recall_memory(query, limit=5)`` and ``search_history(query, limit=10)``: memories and
  conversation turns of the current session.

Each tool's arguments are a msgspec Struct: its JSON Schema is what the model sees, and
:class:`~ditto.app.tools.toolkit.MemoryToolkit` converts every call to it before anything
runs.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Annotated, Any, Literal

import msgspec
from msgspec import Meta

__all__ = (
    "PAR_TOOLS",
    "PRX_TOOLS",
    "TOOLS",
    "ToolSpec",
    "anthropic_tools",
    "mcp_tools",
    "openai_tools",
)

Effect = Literal["read", "write"]

Key = Annotated[str, Meta(min_length=1, max_length=1024, description="The memory's key.")]
Query = Annotated[str, Meta(min_length=1, max_length=10_000)]
Category = Annotated[str, Meta(min_length=1, max_length=256)]


class _Arguments(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """A tool's arguments: the schema the model sees is generated from it, and every call is
    converted to it (so a call the schema refuses never runs)."""


class StoreArguments(_Arguments, frozen=True):
    key: Annotated[Key, Meta(description="A unique, stable name for the memory.")]
    value: Annotated[str, Meta(min_length=1, description="What to remember.")]
    category: Annotated[
        Category, Meta(description="core, daily, conversation or a custom category.")
    ] = "core"


class RecallArguments(_Arguments, frozen=True):
    query: Annotated[Query, Meta(description="What to recall.")]
    max_results: Annotated[int, Meta(ge=1, le=500)] = 20


class SearchArguments(_Arguments, frozen=True):
    query: Annotated[Query, Meta(description="What to look for.")]
    category: Annotated[Category | None, Meta(description="Only memories of this category.")] = None
    max_results: Annotated[int, Meta(ge=1, le=500)] = 10


class KeyArguments(_Arguments, frozen=True):
    key: Key


class WhyArguments(_Arguments, frozen=True):
    query: Annotated[Query, Meta(description="The search that should have found the memory.")]
    key: Key


class RememberArguments(_Arguments, frozen=True):
    content: Annotated[str, Meta(min_length=1, description="What to remember.")]
    summary: Annotated[str | None, Meta(description="A one-line summary.")] = None
    categories: Annotated[
        list[Category], Meta(max_length=100, description="Labels to file it under.")
    ] = msgspec.field(default_factory=list)


class SessionSearchArguments(_Arguments, frozen=True):
    query: Annotated[Query, Meta(description="What to look for.")]
    limit: Annotated[int, Meta(ge=1, le=50)] = 5


class HistoryArguments(_Arguments, frozen=True):
    query: Annotated[Query, Meta(description="Words the turns contain.")]
    limit: Annotated[int, Meta(ge=1, le=50)] = 10


@dataclass(frozen=True)
class ToolSpec:
    """One tool: what the model sees, and whether calling it changes memory."""

    name: str
    description: str
    arguments: type[_Arguments]
    effect: Effect = "read"
    family: Literal["prx", "par"] = "prx"

    @property
    def parameters(self) -> dict[str, Any]:
        """The arguments' JSON Schema object (generated from :attr:`arguments`)."""
        return _schema(self.arguments)


@functools.cache
def _schema(arguments: type[_Arguments]) -> dict[str, Any]:
    generated = msgspec.json.schema(arguments)
    schema: dict[str, Any] = dict(generated["$defs"][arguments.__name__])
    schema.pop("title", None)
    schema.setdefault("required", [])
    return schema


PRX_TOOLS: tuple[ToolSpec, ...] = (
    ToolSpec(
        "memory_store",
        "Save a fact, preference, note or piece of knowledge in long-term memory under a stable "
        "key (saving the same key again replaces it). Categories: core (kept until deleted), "
        "daily (session notes, archived after a while), conversation (short-lived chat "
        "context) or a custom one.",
        StoreArguments,
        effect="write",
    ),
    ToolSpec(
        "memory_recall",
        "Recall memories relevant to a question or topic (keywords or natural language), most "
        "relevant first. Past conversation turns are not memories: use search_history.",
        RecallArguments,
    ),
    ToolSpec(
        "memory_search",
        "Search all memories by keywords and meaning, optionally in one category (past "
        "conversation turns only with category 'conversation', or use search_history).",
        SearchArguments,
    ),
    ToolSpec("memory_get", "Read one memory by its exact key.", KeyArguments),
    ToolSpec(
        "memory_forget",
        "Delete one memory by its key. Forgetting a key nothing holds is not an error.",
        KeyArguments,
        effect="write",
    ),
    ToolSpec(
        "memory_why",
        "Explain why searching for a query does not return the memory under a key: expired, "
        "replaced by a newer memory, contradicting a more trusted one, held for review, not "
        "matching the query, or ranked below the results shown (with its rank).",
        WhyArguments,
    ),
)

PAR_TOOLS: tuple[ToolSpec, ...] = (
    ToolSpec(
        "remember_memory",
        "Store a new memory for this session.",
        RememberArguments,
        effect="write",
        family="par",
    ),
    ToolSpec(
        "recall_memory",
        "Search this session's memories by keywords.",
        SessionSearchArguments,
        family="par",
    ),
    ToolSpec(
        "search_history",
        "Search the conversation turns of this session.",
        HistoryArguments,
        family="par",
    ),
)

TOOLS: dict[str, ToolSpec] = {spec.name: spec for spec in (*PRX_TOOLS, *PAR_TOOLS)}


def openai_tools(specs: Iterable[ToolSpec]) -> list[dict[str, Any]]:
    """OpenAI Chat Completions function tools: ``{"type": "function", "function": {...}}``."""
    return [
        {
            "type": "function",
            "function": {
                "name": spec.name,
                "description": spec.description,
                "parameters": spec.parameters,
            },
        }
        for spec in specs
    ]


def anthropic_tools(specs: Iterable[ToolSpec]) -> list[dict[str, Any]]:
    """Anthropic Messages tools: ``{"name", "description", "input_schema"}``."""
    return [
        {"name": spec.name, "description": spec.description, "input_schema": spec.parameters}
        for spec in specs
    ]


def mcp_tools(specs: Iterable[ToolSpec]) -> list[dict[str, Any]]:
    """MCP tools (``tools/list``): ``{"name", "description", "inputSchema", "annotations"}``."""
    return [
        {
            "name": spec.name,
            "description": spec.description,
            "inputSchema": spec.parameters,
            "annotations": {
                "readOnlyHint": spec.effect == "read",
                "destructiveHint": spec.name == "memory_forget",
                "idempotentHint": spec.name != "remember_memory",
            },
        }
        for spec in specs
    ]
