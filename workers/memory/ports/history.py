"""Capabilities over time: the history of every record, and importing records as they were."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence

from workers.memory.model.contracts import HistoryEntry, MemoryItem

__all__ = ("HistoryLog", "RecordImport")


class HistoryLog(ABC):
    """Capability: every change of a record, kept in the same transaction as the change."""

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
