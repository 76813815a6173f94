"""``MemoryToolkit``: the memory tools, called the way a model calls them.

Every tool call is one ``runtime.invoke`` of a MEMORY node with the toolkit's principal, so
access control, audit and usage tracking apply exactly as they do to the application's own
calls. A call never raises: its result is a small dict a model can read, and every failure is
``{"error": {"code": ..., "message": ...}}`` with the runtime's stable codes.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

import msgspec

from ditto.app.tools.specs import (
    PAR_TOOLS,
    PRX_TOOLS,
    TOOLS,
    HistoryArguments,
    KeyArguments,
    RecallArguments,
    RememberArguments,
    SearchArguments,
    SessionSearchArguments,
    StoreArguments,
    ToolSpec,
    anthropic_tools,
    mcp_tools,
    openai_tools,
)
from ditto.errors import ErrorCode
from workers.memory.model.contracts import MemoryItem, SearchHit

if TYPE_CHECKING:
    from ditto import Ditto

__all__ = ("CONVERSATION", "MemoryToolkit", "text_of")

CONVERSATION = "conversation"
"""The category of conversation turns (``save_turn``, ``search_history``)."""
_LISTED_CHARS = 500
"""Content longer than this is cut in recall and search results (``memory_get`` gives it all)."""

Result = dict[str, Any]
FORBIDDEN = ErrorCode.FORBIDDEN


def text_of(content: Any) -> str:
    """A record's content as text: itself when it is a string, else compact JSON."""
    if isinstance(content, str):
        return content
    return json.dumps(content, ensure_ascii=False, separators=(",", ":"), default=str)


def _error(code: str, message: str) -> Result:
    return {"error": {"code": code, "message": message}}


class MemoryToolkit:
    """The PRX and PAR memory tools over a runtime with a MEMORY worker.

    Example::

        toolkit = MemoryToolkit(runtime, principal="alice", session_id="chat-42")
        tools = await toolkit.openai_tools()          # hand them to the model
        result = await toolkit.call("memory_store", {"key": "tz", "value": "UTC+8"})

    Args:
        runtime: A runtime with the MEMORY worker registered.
        principal: Who the agent acts for (``None``: anonymous). Under access control a call
            without a principal is refused, so no tool is offered then (as PRX does).
        namespace: Where the tools read and write.
        session_id: The conversation; PAR's tools and ``save_turn`` are scoped to it
            (``metadata["session_id"]``). ``None``: the whole namespace.
        families: Which sets to offer: ``"prx"``, ``"par"`` or both.
        min_relevance: ``memory_recall`` and ``recall_memory`` drop hits scoring below it (PRX's
            threshold; scores are calibrated to [0, 1] with or without an embedder).
    """

    def __init__(
        self,
        runtime: Ditto,
        *,
        principal: str | None = None,
        namespace: str = "default",
        session_id: str | None = None,
        families: Iterable[str] = ("prx", "par"),
        min_relevance: float | None = 0.3,
    ) -> None:
        chosen = set(families)
        unknown = chosen - {"prx", "par"}
        if unknown:
            raise ValueError(f"unknown tool family {sorted(unknown)[0]!r}; use prx or par")
        self.runtime = runtime
        self.principal = principal
        self.namespace = namespace
        self.session_id = session_id
        self.min_relevance = min_relevance
        self._specs = [spec for spec in (*PRX_TOOLS, *PAR_TOOLS) if spec.family in chosen]
        self._refused: bool | None = None
        self._handlers: dict[str, Callable[[Any], Awaitable[Result]]] = {
            "memory_store": self._memory_store,
            "memory_recall": self._memory_recall,
            "memory_search": self._memory_search,
            "memory_get": self._memory_get,
            "memory_forget": self._memory_forget,
            "remember_memory": self._remember_memory,
            "recall_memory": self._recall_memory,
            "search_history": self._search_history,
        }

    # ----------------------------------------------------------------- offering tools

    async def specs(self) -> list[ToolSpec]:
        """The tools to offer: none when access control would refuse every call (enforced,
        and no principal), else the chosen families."""
        if self.principal is None and self._refused is None:
            probe = await self._invoke("MEMORY.GET", {"ids": []})
            self._refused = probe.error is not None and probe.error.code == FORBIDDEN
        return [] if self._refused else list(self._specs)

    async def openai_tools(self) -> list[dict[str, Any]]:
        return openai_tools(await self.specs())

    async def anthropic_tools(self) -> list[dict[str, Any]]:
        return anthropic_tools(await self.specs())

    async def mcp_tools(self) -> list[dict[str, Any]]:
        return mcp_tools(await self.specs())

    # ----------------------------------------------------------------- calling them

    async def call(self, name: str, arguments: Mapping[str, Any] | str | None = None) -> Result:
        """Run one tool call (``arguments`` as a mapping or the JSON text a model API gives).

        Returns:
            The tool's result, or ``{"error": {"code", "message"}}``; never raises for a bad
            call, a refusal or a failing store.
        """
        spec = TOOLS.get(name)
        if spec is None or spec not in self._specs:
            offered = ", ".join(spec.name for spec in self._specs)
            return _error(ErrorCode.INVALID_INPUT, f"unknown tool {name!r}; tools: {offered}")
        try:
            if isinstance(arguments, str | bytes):
                parsed = msgspec.json.decode(arguments or b"{}", type=spec.arguments)
            else:
                parsed = msgspec.convert(dict(arguments or {}), spec.arguments)
        except (msgspec.ValidationError, msgspec.DecodeError) as exc:
            return _error(ErrorCode.INVALID_INPUT, f"{name}: {exc}")
        return await self._handlers[name](parsed)

    async def _invoke(self, node: str, payload: dict[str, Any]) -> Any:
        return await self.runtime.invoke(node, payload, principal=self.principal)

    async def _run(self, node: str, payload: dict[str, Any]) -> Any | Result:
        """The node's output, or the error result to hand back."""
        result = await self._invoke(node, payload)
        if result.error is not None:
            return _error(result.error.code, result.error.message)
        return result.output

    # ----------------------------------------------------------------- PRX

    async def _memory_store(self, arguments: StoreArguments) -> Result:
        draft = self._draft(key=arguments.key, content=arguments.value, category=arguments.category)
        output = await self._run("MEMORY.WRITE", {"memories": [draft], "mode": "upsert"})
        if isinstance(output, dict):
            return output
        (item,) = output.items
        return {"stored": item.key, "category": item.category, "version": item.version}

    async def _memory_recall(self, arguments: RecallArguments) -> Result:
        return await self._search(
            arguments.query, arguments.max_results, {}, min_score=self.min_relevance
        )

    async def _memory_search(self, arguments: SearchArguments) -> Result:
        narrowed = {} if arguments.category is None else {"category": arguments.category}
        return await self._search(arguments.query, arguments.max_results, narrowed)

    async def _memory_get(self, arguments: KeyArguments) -> Result:
        output = await self._run(
            "MEMORY.GET", {"keys": [arguments.key], "namespace": self.namespace}
        )
        if isinstance(output, dict):
            return output
        if not output.items:
            return _error(ErrorCode.NOT_FOUND, f"no memory with key {arguments.key!r}")
        item: MemoryItem = output.items[0]
        return {
            "key": item.key,
            "category": item.category,
            "content": text_of(item.content),
            "updated_at": item.updated_at.isoformat(),
        }

    async def _memory_forget(self, arguments: KeyArguments) -> Result:
        output = await self._run(
            "MEMORY.DELETE", {"keys": [arguments.key], "namespace": self.namespace}
        )
        if isinstance(output, dict):
            return output
        return {"forgotten": bool(output.deleted), "key": arguments.key}

    # ----------------------------------------------------------------- PAR

    async def _remember_memory(self, arguments: RememberArguments) -> Result:
        draft = self._draft(
            content=arguments.content, summary=arguments.summary, tags=arguments.categories
        )
        output = await self._run("MEMORY.WRITE", {"memories": [draft]})
        if isinstance(output, dict):
            return output
        (item,) = output.items
        return {"stored": item.id}

    async def _recall_memory(self, arguments: SessionSearchArguments) -> Result:
        return await self._search(
            arguments.query, arguments.limit, self._session(), min_score=self.min_relevance
        )

    async def _search_history(self, arguments: HistoryArguments) -> Result:
        narrowed = {"category": CONVERSATION, **self._session()}
        return await self._search(arguments.query, arguments.limit, narrowed, strategy="keyword")

    def _draft(self, **fields: Any) -> dict[str, Any]:
        """A record a tool writes: in the toolkit's namespace, from a tool, in its session."""
        draft = {**fields, "namespace": self.namespace, "source": "tool"}
        if self.session_id is not None:
            draft["metadata"] = {"session_id": self.session_id}
        return draft

    def _session(self) -> dict[str, Any]:
        if self.session_id is None:
            return {}
        return {"metadata": {"session_id": self.session_id}}

    # ----------------------------------------------------------------- searching

    async def _search(
        self,
        query: str,
        limit: int,
        narrowed: dict[str, Any],
        *,
        min_score: float | None = None,
        strategy: str | None = None,
    ) -> Result:
        request: dict[str, Any] = {
            "query": query,
            "limit": limit,
            "filter": {"namespace": self.namespace, **narrowed},
        }
        if strategy is not None:
            request["strategy"] = strategy
        if min_score is not None:
            request["options"] = {"min_score": min_score}
        output = await self._run("MEMORY.SEARCH", request)
        if isinstance(output, dict):
            return output
        return {"memories": [_listed(hit) for hit in output.hits]}


def _listed(hit: SearchHit) -> dict[str, Any]:
    item = hit.memory
    content = text_of(item.content)
    if len(content) > _LISTED_CHARS:
        content = content[: _LISTED_CHARS - 1] + "…"
    entry: dict[str, Any] = {"key": item.key, "category": item.category, "content": content}
    if item.key is None:
        entry["id"] = item.id
    if hit.score is not None:
        entry["score"] = round(hit.score, 3)
    return entry
