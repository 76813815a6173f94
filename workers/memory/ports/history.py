"""Capabilities over time: the history of every record, and importing records as they were."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Sequence

from workers.memory.model.contracts import HistoryEntry, MemoryItem

__all__ = ("HistoryLog", "RecordImport")


class HistoryLog(ABC):
    """Capability: every change of a record, kept in the same transaction as the change.

    The log outlives the records: a deleted record's history is found by its id
    (:meth:`history`), by its key (:meth:`key_history`) and in the whole log
    (:meth:`history_page`, which export reads)."""

    @abstractmethod
    async def history(self, id: str) -> list[HistoryEntry]:
        """Every change of record ``id``, oldest first.

        ``create``, ``upsert``, ``update`` and ``archive`` carry the record as it stood after
        the change, ``delete`` its last state. The history outlives the record. A replayed
        write (nothing changed) and usage counters add nothing.

        Returns:
            The entries; ``[]`` for an id the store never held.
        """

    @abstractmethod
    async def history_page(
        self, after: int, limit: int, *, namespace: str | None = None, key: str | None = None
    ) -> tuple[list[HistoryEntry], int]:
        """Up to ``limit`` entries of the whole log after position ``after``, deleted records'
        entries included.

        Every entry comes exactly once over the pages, each record's entries oldest first
        (the order across records is the store's: append order for the SQL stores, so a log
        restored page by page reads back in the same order).

        Args:
            after: ``0`` for the first page, then the position the previous page returned.
            limit: The most entries to return (at least 1).
            namespace: Only entries of records in this namespace.
            key: Only the records that held this key (in ``namespace`` when one is given), all
                of their entries: a key survives the record's deletion here.

        Returns:
            The entries and the position to read the next page from; a page shorter than
            ``limit`` is the last.
        """

    async def history_pages(
        self, *, namespace: str | None = None, key: str | None = None, size: int = 1000
    ) -> AsyncIterator[list[HistoryEntry]]:
        """Every entry :meth:`history_page` selects, ``size`` at a time (flat memory)."""
        after = 0
        while True:
            page, after = await self.history_page(after, size, namespace=namespace, key=key)
            if page:
                yield page
            if len(page) < size:
                return

    async def key_history(self, namespace: str, key: str) -> list[HistoryEntry]:
        """Every change of every record that held ``key`` in ``namespace``, deleted ones
        included (a key freed by a delete and taken by a new record names both).

        Returns:
            The entries, each record's oldest first; ``[]`` when no record ever held the key.
        """
        return [
            entry
            async for page in self.history_pages(namespace=namespace, key=key)
            for entry in page
        ]

    @abstractmethod
    async def restore_history(self, entries: Sequence[HistoryEntry]) -> int:
        """Append imported entries in order, skipping any already held (same id, version and
        change), so importing a file twice adds nothing.

        Returns:
            How many entries were added.
        """


class RecordImport(ABC):
    """Capability: records stored exactly as exported (``ditto memory import``). Export needs
    no capability: it pages through :meth:`MemoryStore.pages`."""

    @abstractmethod
    async def restore(self, items: Sequence[MemoryItem]) -> int:
        """Store records exactly as given (ids, timestamps, versions and usage included), in
        one transaction.

        A record with the same id is replaced, so importing the same records twice changes
        nothing the second time. No history is written (it describes changes; an import
        restores a state). A vector whose record's text changed is dropped (reindex makes a
        new one).

        Returns:
            How many records were stored.

        Raises:
            MemoryStoreError: ``CONFLICT`` when another record already holds one of the keys;
                nothing is stored then.
        """
