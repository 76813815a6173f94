"""``InProcessMemoryStore``: the reference store and the test double.

Records live in a dict; every operation is atomic because it never awaits while it changes
state. Keyword search is BM25 over the same words FTS5 would see (with a lighter stemmer).

The class is assembled from parts, one module each: ``state`` (what it keeps, and how it
commits), ``vectors``, ``logs`` (history and audit), and ``store`` (reads, search and writes).
"""

from workers.memory.stores.inprocess.store import InProcessMemoryStore

__all__ = ("InProcessMemoryStore",)
