"""An agent with memory: a scripted model calls the memory tools, turn by turn.

    python3 tasks.py run examples/agent_memory.py

No network: ``ScriptedModel`` stands in for an LLM. Like a real one it receives the user's
message, a system prompt (with the memories ``recall_block`` found for the message) and the
tools in OpenAI's format, and answers with tool calls; the loop runs each call through
``MemoryToolkit`` and hands the result back. Over four turns the agent stores a preference,
recalls it, searches the conversation so far, and forgets the preference when asked.
"""

from __future__ import annotations

import json
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio

from ditto import AsyncMemory
from ditto.app.tools import MemoryToolkit, recall_block, save_turn


@dataclass
class ToolCall:
    name: str
    arguments: str  # JSON text, as model APIs send it


class ScriptedModel:
    """Decides which tools to call from the user's words (a real model would read the tools'
    descriptions and the system prompt instead)."""

    def respond(self, system: str, user: str, tools: list[dict[str, Any]]) -> list[ToolCall]:
        offered = {tool["function"]["name"] for tool in tools}
        text = user.lower()
        if "forget" in text:
            return [ToolCall("memory_forget", json.dumps({"key": "code_style"}))]
        if "prefer" in text:
            value = user.split("prefer", 1)[1].strip(" .")
            arguments = {"key": "code_style", "value": f"prefers {value}", "category": "core"}
            return [ToolCall("memory_store", json.dumps(arguments))]
        if "earlier" in text and "search_history" in offered:
            return [ToolCall("search_history", json.dumps({"query": "indentation tabs"}))]
        return [ToolCall("memory_search", json.dumps({"query": user}))]


async def main() -> None:
    folder = Path(tempfile.mkdtemp(prefix="ditto-agent-"))
    async with AsyncMemory(folder / "memory.sqlite") as memory:
        await memory.list()  # opens the store and the runtime
        assert memory.runtime is not None
        toolkit = MemoryToolkit(memory.runtime, principal="alice", session_id="chat-1")
        tools = await toolkit.openai_tools()
        model = ScriptedModel()
        print(f"tools offered: {', '.join(tool['function']['name'] for tool in tools)}\n")
        for user in (
            "I prefer tabs over spaces for indentation.",
            "How should I indent my code?",
            "What did I say earlier about indentation?",
            "Please forget my indentation preference.",
            "How should I indent my code?",
        ):
            system = await recall_block(memory.runtime, user, principal="alice", min_relevance=0.2)
            print(f"user: {user}")
            if system:
                print("  " + system.replace("\n", "\n  "))
            for call in model.respond(system, user, tools):
                result = await toolkit.call(call.name, call.arguments)
                print(f"  -> {call.name}({call.arguments})\n     {json.dumps(result)}")
            await save_turn(toolkit, "user", user)  # auto-save: search_history finds it
            print()


if __name__ == "__main__":
    anyio.run(main)
