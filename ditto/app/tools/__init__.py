"""Memory for agents: the PRX and PAR memory tools (``MemoryToolkit``), prompt recall blocks
and conversation auto-save, all through ``runtime.invoke`` so access control, audit and usage
apply."""

from ditto.app.tools.recall import clip_utf8, recall_block, save_turn
from ditto.app.tools.specs import (
    PAR_TOOLS,
    PRX_TOOLS,
    TOOLS,
    ToolSpec,
    anthropic_tools,
    mcp_tools,
    openai_tools,
)
from ditto.app.tools.toolkit import MemoryToolkit

__all__ = (
    "PAR_TOOLS",
    "PRX_TOOLS",
    "TOOLS",
    "MemoryToolkit",
    "ToolSpec",
    "anthropic_tools",
    "clip_utf8",
    "mcp_tools",
    "openai_tools",
    "recall_block",
    "save_turn",
)
