"""``MemoryToolkit``: the memory tools, called the way a model calls them.

Every tool call is one ``runtime.invoke`` of a MEMORY node with the toolkit's principal, so
access control, audit and usage tracking apply exactly as they do to the application's own
calls. A call never raises (only its caller's cancellation propagates): its result is a small
dict a model can read, and every failure is ``{"error": {"code": ..., "message": ...}}`` with
the runtime's stable codes.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

import msgspec

from ditto.app.tools.outcomes import say_outcome
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
    WhyArguments,
    anthropic_tools,
    mcp_tools,
    openai_tools,
)
from ditto.errors import DittoError, ErrorCode
from workers.memory.model.contracts import MemoryItem, SearchHit

if TYPE_CHECKING:
    from ditto import Ditto

__all__ = ("CONVERSATION", "DEFAULT_MAX_VALUE_BYTES", "MemoryToolkit", "text_of")

logger = logging.getLogger(__name__)

CONVERSATION = "conversation"
"""The category of conversation turns (``save_turn``, ``search_history``)."""
_LISTED_CHARS = 500
"""Content longer than this is cut in recall and search results (``memory_get`` gives it all)."""
DEFAULT_MAX_VALUE_BYTES = 64 * 1024
"""The largest value a tool stores (``memory_store``'s value, ``remember_memory``'s content and
summary), in UTF-8 bytes: 64 KiB. A model that pastes a whole file into memory is refused."""

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
        max_value_bytes: The largest value a tool stores, in UTF-8 bytes
            (:data:`DEFAULT_MAX_VALUE_BYTES`); a larger one is refused with ``INVALID_INPUT``.

    Raises:
        ValueError: An unknown family, or a ``max_value_bytes`` below 1.
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
        max_value_bytes: int = DEFAULT_MAX_VALUE_BYTES,
    ) -> None:
        chosen = set(families)
        unknown = chosen - {"prx", "par"}
        if unknown:
            raise ValueError(f"unknown tool family {sorted(unknown)[0]!r}; use prx or par")
        if max_value_bytes < 1:
            raise ValueError(f"max_value_bytes must be at least 1, not {max_value_bytes}")
        self.max_value_bytes = max_value_bytes
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
            "memory_why": self._memory_why,
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

    async def call(self, name: object, arguments: object = None) -> Result:
        """Run one tool call (``arguments`` as a mapping or the JSON text a model API gives).

        Total: whatever ``name`` and ``arguments`` hold (a list, a number, text that is not
        JSON or not Unicode, nesting too deep) and whatever the runtime does (refuses, fails,
        is closed), the result is a dict; only the caller's cancellation propagates.

        Returns:
            The tool's result, or ``{"error": {"code", "message"}}``: ``INVALID_INPUT`` for an
            unknown tool, arguments that are not a JSON object matching the tool's schema, or a
            value over ``max_value_bytes``; ``RUNTIME_CLOSED`` once the runtime is closed; the
            runtime's code for a refusal (``FORBIDDEN``) or a failing store; ``INTERNAL_ERROR``
            (details in the log) for anything unexpected.
        """
        try:
            return await self._call(name, arguments)
        except DittoError as exc:
            return _error(exc.code, exc.message)
        except Exception:
            logger.exception("memory tool %s failed", name if isinstance(name, str) else "?")
            return _error(ErrorCode.INTERNAL_ERROR, "the tool failed unexpectedly (see the log)")

    async def _call(self, name: object, arguments: object) -> Result:
        spec = TOOLS.get(name) if isinstance(name, str) else None
        if spec is None or spec not in self._specs:
            offered = ", ".join(spec.name for spec in self._specs)
            shown = repr(name) if isinstance(name, str) else f"of type {type(name).__name__}"
            return _error(ErrorCode.INVALID_INPUT, f"unknown tool {shown[:100]}; tools: {offered}")
        try:
            parsed = _parse_arguments(arguments, spec.arguments)
        except (msgspec.ValidationError, msgspec.DecodeError) as exc:
            return _error(ErrorCode.INVALID_INPUT, f"{spec.name}: {exc}")
        except UnicodeError:
            return _error(
                ErrorCode.INVALID_INPUT, f"{spec.name}: the arguments are not valid Unicode"
            )
        except RecursionError:
            return _error(
                ErrorCode.INVALID_INPUT, f"{spec.name}: the arguments are nested too deep"
            )
        return await self._handlers[spec.name](parsed)

    def _unstorable(
        self, tool: str, field: str, text: str | None, *, blank: bool = False
    ) -> Result | None:
        """``INVALID_INPUT`` for a value over ``max_value_bytes`` or (unless ``blank``) blank."""
        if text is not None and not blank and not text.strip():
            return _error(ErrorCode.INVALID_INPUT, f"{tool}: {field} is blank: nothing to remember")
        # Four UTF-8 bytes per character at most: most values skip the encoding.
        if text is None or len(text) * 4 <= self.max_value_bytes:
            return None
        size = len(text.encode("utf-8", "surrogatepass"))
        if size <= self.max_value_bytes:
            return None
        return _error(
            ErrorCode.INVALID_INPUT,
            f"{tool}: {field} is {size:,} bytes; the limit is {self.max_value_bytes:,} bytes "
            "(max_value_bytes)",
        )

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
        refused = self._unstorable("memory_store", "value", arguments.value)
        if refused is not None:
            return refused
        draft = self._draft(key=arguments.key, content=arguments.value, category=arguments.category)
        output = await self._run("MEMORY.WRITE", {"memories": [draft], "mode": "upsert"})
        if isinstance(output, dict):
            return output
        (item,) = output.items
        return {
            "stored": item.key,
            "category": item.category,
            "version": item.version,
            "note": say_outcome(output.outcomes[0]),
        }

    async def _memory_recall(self, arguments: RecallArguments) -> Result:
        return await self._search(
            arguments.query,
            arguments.max_results,
            {},
            min_score=self.min_relevance,
            turns=False,
        )

    async def _memory_search(self, arguments: SearchArguments) -> Result:
        # Memories, not the transcript (search_history searches that), unless the model asks
        # for the conversation category: a forgotten preference must not come back from the
        # turn in which the user stated it.
        if arguments.category is None:
            return await self._search(arguments.query, arguments.max_results, {}, turns=False)
        narrowed = {"category": arguments.category}
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
        refused = self._unstorable("remember_memory", "content", arguments.content)
        refused = refused or self._unstorable(
            "remember_memory", "summary", arguments.summary, blank=True
        )
        if refused is not None:
            return refused
        draft = self._draft(
            content=arguments.content, summary=arguments.summary, tags=arguments.categories
        )
        output = await self._run("MEMORY.WRITE", {"memories": [draft]})
        if isinstance(output, dict):
            return output
        (item,) = output.items
        return {"stored": item.id, "note": say_outcome(output.outcomes[0])}

    async def _recall_memory(self, arguments: SessionSearchArguments) -> Result:
        return await self._search(
            arguments.query, arguments.limit, self._session(), min_score=self.min_relevance
        )

    async def _memory_why(self, arguments: WhyArguments) -> Result:
        request = {
            "query": arguments.query,
            "limit": 10,  # memory_search's default: the results the model saw
            "filter": {"namespace": self.namespace},
            "explain_miss": {"key": arguments.key},
        }
        output = await self._run("MEMORY.SEARCH", request)
        if isinstance(output, dict):
            return output
        miss = output.miss
        return {"key": arguments.key, "stage": miss.stage, "reason": miss.reason, "rank": miss.rank}

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
        turns: bool = True,
    ) -> Result:
        """One MEMORY.SEARCH; ``turns=False`` leaves out saved conversation turns (fetching
        more, so that ``limit`` memories can still come back)."""
        request: dict[str, Any] = {
            "query": query,
            "limit": limit if turns else min(limit * 3, 10_000),
            "filter": {"namespace": self.namespace, **narrowed},
        }
        if strategy is not None:
            request["strategy"] = strategy
        if min_score is not None:
            request["options"] = {"min_score": min_score}
        output = await self._run("MEMORY.SEARCH", request)
        if isinstance(output, dict):
            return output
        hits = output.hits
        if not turns:
            hits = [hit for hit in hits if hit.memory.category != CONVERSATION][:limit]
        return {"memories": [_listed(hit) for hit in hits]}


def _parse_arguments(arguments: object, kind: type[Any]) -> Any:
    """``arguments`` (a mapping, its JSON text or ``None``) converted to the tool's Struct.

    Raises:
        msgspec.ValidationError: Not an object, or not one the schema accepts.
        msgspec.DecodeError: Text that is not JSON.
        UnicodeError: Text holding a lone surrogate.
        RecursionError: A mapping nested deeper than the converter goes.
    """
    if arguments is None:
        return msgspec.convert({}, kind)
    if isinstance(arguments, str):
        arguments = arguments.encode("utf-8")
    if isinstance(arguments, bytes | bytearray | memoryview):
        return msgspec.json.decode(bytes(arguments) or b"{}", type=kind)
    if not isinstance(arguments, Mapping):
        raise msgspec.ValidationError(
            f"the arguments are a JSON object, not {type(arguments).__name__}"
        )
    return msgspec.convert(dict(arguments), kind)


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
