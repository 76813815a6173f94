"""``MarkdownMemoryStore``: memory as a folder of Markdown files a person can edit and keep in
git (PRX's Markdown backend).

One module per concern: ``layout`` (folders and file names), ``fileformat`` (the record
file), ``files`` (all-or-nothing batches, the journal), ``jsonlog`` (history and audit files),
``state`` and ``scan`` (what the store knows, and the changes a person made), ``errors`` (the
one error boundary), ``base`` (lifecycle, the thread and the lock), ``logs`` (history and
audit capabilities) and ``store`` (reads, search and writes).
"""

from workers.memory.stores.markdown.store import MarkdownMemoryStore

__all__ = ("MarkdownMemoryStore",)
