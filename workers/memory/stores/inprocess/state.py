"""What the in-process store keeps (records, keys, terms, history, audit, vectors), the deep
copies it keeps and hands out, and how it commits records all or nothing."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

import msgspec

from ditto.contracts.outcomes import claim_outcome
from workers.memory.model.contracts import AuditEntry, HistoryEntry, MemoryItem
from workers.memory.model.records import Clock, content_text, utc_now
from workers.memory.retrieval.embeddings.base import EmbeddingModel, Matrix
from workers.memory.retrieval.text import light_stem
from workers.memory.retrieval.text import words as text_words
from workers.memory.retrieval.vectors import VectorIndex, VectorState

__all__ = ("InProcessState", "clone", "clone_entry")


class InProcessState:
    """The state of an in-process memory store (the arguments are
    :class:`~workers.memory.stores.inprocess.InProcessMemoryStore`'s)."""

    def __init__(self, *, clock: Clock = utc_now) -> None:
        super().__init__()
        self._clock = clock
        self._items: dict[str, MemoryItem] = {}
        self._keys: dict[tuple[str, str], str] = {}
        """(namespace, key) -> the id of the active record that holds the key."""
        self._sharing: dict[tuple[str, str], set[str]] = {}
        """(namespace, key) -> the ids of the other records that share it (superseded,
        contested, quarantined)."""
        self._terms: dict[str, Counter[str]] = {}
        self._history: dict[str, list[HistoryEntry]] = {}
        self._audit: list[AuditEntry] = []
        self._audit_seq = 0
        self._vectors: dict[str, dict[EmbeddingModel, tuple[Matrix, str]]] = {}
        """id -> model -> (unit vectors, one row per chunk; hash of the text they come from)."""
        self._state = VectorState()
        self._index = VectorIndex()

    def _put_all(self, items: Sequence[MemoryItem], entries: Sequence[HistoryEntry]) -> None:
        """Store records and their history entries, all or nothing: everything that can fail
        (copying, indexing) happens before the first change, as in a transaction."""
        prepared = [self._prepared(item) for item in items]
        logged = [clone_entry(entry) for entry in entries]
        claim_outcome()  # committed from here: a deadline that fires later is not "not written"
        self._commit(prepared)
        for entry in logged:
            self._history.setdefault(entry.id, []).append(entry)

    @staticmethod
    def _prepared(item: MemoryItem) -> tuple[MemoryItem, Counter[str]]:
        item = clone(item)  # never share mutable content with a caller
        text = " ".join(filter(None, (item.key, item.summary, content_text(item.content))))
        return item, Counter(light_stem(word) for word in text_words(text))

    def _commit(self, prepared: Sequence[tuple[MemoryItem, Counter[str]]]) -> None:
        for item, terms in prepared:
            previous = self._items.get(item.id)
            if previous is not None:
                self._unindex_key(previous)
            self._items[item.id] = item
            if item.key is not None:
                if item.status == "active":
                    self._keys[(item.namespace, item.key)] = item.id
                else:
                    self._sharing.setdefault((item.namespace, item.key), set()).add(item.id)
            self._terms[item.id] = terms

    def _unindex_key(self, item: MemoryItem) -> None:
        """Forget ``item`` as a holder or sharer of its key."""
        if item.key is None:
            return
        place = (item.namespace, item.key)
        if self._keys.get(place) == item.id:
            del self._keys[place]
        sharing = self._sharing.get(place)
        if sharing is not None:
            sharing.discard(item.id)
            if not sharing:
                del self._sharing[place]

    def _ids_with_key(self, namespace: str, key: str) -> list[str]:
        """The active record's id first, then the others sharing the key (sorted)."""
        place = (namespace, key)
        holder = self._keys.get(place)
        return ([] if holder is None else [holder]) + sorted(self._sharing.get(place, ()))


_encode_item = msgspec.json.Encoder()
_decode_item = msgspec.json.Decoder(MemoryItem)
_decode_entry = msgspec.json.Decoder(HistoryEntry)


def clone_entry(entry: HistoryEntry) -> HistoryEntry:
    return _decode_entry.decode(_encode_item.encode(entry))


def clone(item: MemoryItem) -> MemoryItem:
    """A deep copy: what the store keeps and what it hands out never share mutable objects,
    exactly as with a database."""
    return _decode_item.decode(_encode_item.encode(item))
