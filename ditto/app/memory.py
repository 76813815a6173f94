"""``Memory`` and ``AsyncMemory``: agent memory in three lines.

    from ditto import Memory

    m = Memory("memory.sqlite")
    m.add("I prefer 4-space indentation", key="indent")
    print(m.search("coding preferences")[0].memory.content)

Both are thin layers over a runtime with the MEMORY worker on a SQLite file (or a PostgreSQL
URL): every call is a ``runtime.invoke``, so validation, access control, audit and usage
tracking are the same as for any other caller. ``AsyncMemory`` (``memory_async``) has the
methods as coroutines; ``Memory`` (``memory_sync``) runs them on an event loop of its own, in a
background thread, so it works from plain scripts and notebooks alike. What can be checked
before the store opens (the folder, the extra a URL needs, the embedder) is checked when either
is made (``memory_setup``). Close either with ``close()`` or a ``with`` block.
"""

from __future__ import annotations

from ditto.app.memory_async import AsyncMemory
from ditto.app.memory_setup import EmbedderChoice
from ditto.app.memory_sync import Memory

__all__ = ("AsyncMemory", "EmbedderChoice", "Memory")
