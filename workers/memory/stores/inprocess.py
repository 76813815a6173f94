"""``InProcessMemoryStore``: the reference store and the test double.

Records live in a dict; every operation is atomic because it never awaits while it changes
state. Keyword search is BM25 over the same words FTS5 would see (with a lighter stemmer).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from datetime import datetime
from itertools import islice
from typing import TYPE_CHECKING

import msgspec
import numpy as np

from ditto.runtime.deadlines import claim_outcome
from workers.memory.contracts import (
    AuditEntry,
    HistoryEntry,
    MemoryDraft,
    MemoryFilter,
    MemoryItem,
    MemoryPatch,
    OrderBy,
    SearchHit,
    SearchInput,
    WriteMode,
)
from workers.memory.embeddings.base import EmbeddingModel, Matrix
from workers.memory.errors import conflict, key_taken
from workers.memory.filters import matches_filter
from workers.memory.ports import (
    AuditEvent,
    AuditLog,
    HistoryLog,
    KeywordSearch,
    MemoryStore,
    QueryPosition,
    RecordImport,
    UsageTracking,
    VectorStore,
)
from workers.memory.records import (
    Clock,
    WriteGuard,
    changes_text,
    content_text,
    history_entry,
    now_from,
    order_key,
    plan_updates,
    plan_writes,
    utc_now,
)
from workers.memory.search.keyword import bm25, explained, keyword_request
from workers.memory.search.text import light_stem
from workers.memory.search.text import words as text_words
from workers.memory.vectors import (
    VectorIndex,
    Vectors,
    VectorState,
    check_model,
    matching_rows,
    ranked_filtered,
    text_hash,
    vectors_required,
)

if TYPE_CHECKING:
    from ditto.runtime.context import NodeContext

__all__ = ("InProcessMemoryStore",)


class InProcessMemoryStore(
    MemoryStore, UsageTracking, KeywordSearch, VectorStore, HistoryLog, AuditLog, RecordImport
):
    """Memory records in this process only: gone when it exits.

    Args:
        clock: Source of ``created_at``/``updated_at`` (default: the system clock, UTC).
    """

    def __init__(self, *, clock: Clock = utc_now) -> None:
        super().__init__()
        self._clock = clock
        self._items: dict[str, MemoryItem] = {}
        self._keys: dict[tuple[str, str], str] = {}
        self._terms: dict[str, Counter[str]] = {}
        self._history: dict[str, list[HistoryEntry]] = {}
        self._audit: list[AuditEntry] = []
        self._audit_seq = 0
        self._vectors: dict[str, dict[EmbeddingModel, tuple[Matrix, str]]] = {}
        """id -> model -> (unit vector, hash of the text it was computed from)."""
        self._state = VectorState()
        self._index = VectorIndex()

    # ----------------------------------------------------------------- reads

    async def get(
        self, ids: Sequence[str], keys: Sequence[str], namespace: str
    ) -> list[MemoryItem]:
        found = [self._items[item_id] for item_id in ids if item_id in self._items]
        for key in keys:
            item_id = self._keys.get((namespace, key))
            if item_id is not None:
                found.append(self._items[item_id])
        return [_copy(item) for item in found]

    async def query(
        self, filter: MemoryFilter, order: OrderBy, limit: int, after: QueryPosition | None
    ) -> list[MemoryItem]:
        descending = order.direction == "desc"
        ranked = sorted(
            (
                (order_key(item, order.field), item.id, item)
                for item in self._items.values()
                if matches_filter(item, filter)
            ),
            key=lambda row: (row[0], row[1]),
            reverse=descending,
        )
        if after is not None:
            if descending:
                ranked = [row for row in ranked if (row[0], row[1]) < after]
            else:
                ranked = [row for row in ranked if (row[0], row[1]) > after]
        return [_copy(row[2]) for row in ranked[:limit]]

    async def count(self, filter: MemoryFilter) -> int:
        return sum(1 for item in self._items.values() if matches_filter(item, filter))

    async def search(self, input: SearchInput, ctx: NodeContext | None = None) -> list[SearchHit]:
        words, explain = keyword_request(input, "the in-process store")
        limit = input.limit or 10
        terms = {light_stem(word) for word in words}
        candidates = [
            (item, self._terms[item.id])
            for item in self._items.values()
            if matches_filter(item, input.filter) and not terms.isdisjoint(self._terms[item.id])
        ]
        if not candidates:
            return []
        scores = bm25(terms, [counts for _, counts in candidates], list(self._terms.values()))
        scored = [(score, item) for score, (item, _) in zip(scores, candidates, strict=True)]
        scored.sort(key=lambda row: (-row[0], row[1].id))
        return explained([SearchHit(_copy(item), score) for score, item in scored[:limit]], explain)

    # ----------------------------------------------------------------- writes

    async def write(
        self,
        drafts: Sequence[MemoryDraft],
        mode: WriteMode,
        vectors: Vectors | None = None,
        guard: WriteGuard | None = None,
    ) -> list[MemoryItem]:
        self._check_vectors(vectors, needed=True)
        keys = self._keys
        existing = {
            (draft.namespace, draft.key): _copy(self._items[keys[(draft.namespace, draft.key)]])
            for draft in drafts
            if draft.key is not None and (draft.namespace, draft.key) in keys
        }
        steps = plan_writes(drafts, mode, existing, now_from(self._clock), guard)
        if vectors is not None:  # refuse before any change: all or nothing
            matching_rows([step.item for step in steps], vectors.hashes, skip=False)
        entries = [step.entry for step in steps if step.entry is not None]
        self._put_all([step.item for step in steps if step.entry is not None], entries)
        if vectors is not None:
            self._store_vectors(vectors, [step.item for step in steps])
        return [_copy(step.item) for step in steps]

    async def update(
        self,
        patches: Sequence[MemoryPatch],
        vectors: Vectors | None = None,
        guard: WriteGuard | None = None,
    ) -> list[MemoryItem]:
        now = now_from(self._clock)  # read once per call, refused or not, like every store
        self._check_vectors(vectors, needed=any(map(changes_text, patches)))
        stored = {
            patch.id: _copy(self._items[patch.id]) for patch in patches if patch.id in self._items
        }
        steps = plan_updates(patches, stored, now, guard)
        updated = [step.item for step in steps]
        if vectors is not None:  # refuse before any change: all or nothing
            matching_rows(updated, vectors.hashes, skip=False)
        self._put_all(updated, [step.entry for step in steps])
        if vectors is not None:
            self._store_vectors(vectors, updated)
        return [_copy(item) for item in updated]

    async def delete(self, ids: Sequence[str], guard: WriteGuard | None = None) -> list[str]:
        now = now_from(self._clock)
        chosen = [item_id for item_id in ids if item_id in self._items]
        if guard is not None:  # every check before any change: all or nothing
            chosen = [item_id for item_id in chosen if guard.check_delete(self._items[item_id])]
        deleted = []
        if chosen:
            claim_outcome()
        for item_id in chosen:
            item = self._items.pop(item_id)
            self._history.setdefault(item_id, []).append(history_entry(item, "delete", now))
            self._terms.pop(item_id, None)
            self._vectors.pop(item_id, None)
            self._index.remove([item_id])
            if item.key is not None:
                self._keys.pop((item.namespace, item.key), None)
            deleted.append(item_id)
        return deleted

    async def record_usage(self, ids: Sequence[str], at: datetime) -> None:
        for item_id in ids:
            item = self._items.get(item_id)
            if item is not None:
                self._items[item_id] = msgspec.structs.replace(
                    item, usage_count=item.usage_count + 1, last_used_at=at
                )

    async def restore(self, items: Sequence[MemoryItem]) -> int:
        for item in items:  # check everything first: all or nothing
            holder = self._keys.get((item.namespace, item.key)) if item.key is not None else None
            if holder is not None and holder != item.id:
                raise key_taken(item.namespace, item.key)
        prepared = [self._prepared(item) for item in items]  # may fail: before any change
        for item in items:
            previous = self._items.get(item.id)
            if previous is not None and previous.key is not None:
                self._keys.pop((previous.namespace, previous.key), None)
            held = self._vectors.get(item.id, {})
            if any(fingerprint != text_hash(item) for _, fingerprint in held.values()):
                del self._vectors[item.id]  # its text changed: it needs a new vector
                self._index.remove([item.id])
        self._commit(prepared)
        return len(items)

    # ----------------------------------------------------------------- vectors

    def _check_vectors(self, vectors: Vectors | None, *, needed: bool) -> None:
        if vectors is not None:
            check_model(vectors.model, self._state, writing=True)
        elif needed and self._state.active is not None:
            raise vectors_required(self._state)

    def _store_vectors(
        self, vectors: Vectors, items: Sequence[MemoryItem], *, skip_changed: bool = False
    ) -> int:
        rows = matching_rows(items, vectors.hashes, skip=skip_changed)
        model = vectors.model
        if self._state.active is None:
            self._state = VectorState(model, self._state.target)
            self._index.reset(model)
        for row in rows:
            fingerprint = text_hash(items[row])
            held = self._vectors.setdefault(items[row].id, {})
            for other in [m for m, (_, old) in held.items() if old != fingerprint]:
                del held[other]  # another model's vector of the old text is stale
            held[model] = (vectors.matrix[row].copy(), fingerprint)
        if model == self._state.active and rows:
            self._index.upsert([items[row].id for row in rows], vectors.matrix[rows])
        return len(rows)

    async def vector_state(self) -> VectorState:
        return self._state

    async def vector_search(
        self, model: EmbeddingModel, query: Matrix, filter: MemoryFilter, limit: int
    ) -> list[tuple[MemoryItem, float]]:
        check_model(model, self._state, writing=False)

        def matching(ids: list[str]) -> list[MemoryItem]:
            found = (self._items.get(item_id) for item_id in ids)
            return [
                _copy(item) for item in found if item is not None and matches_filter(item, filter)
            ]

        return ranked_filtered(self._index, query, limit, matching, lambda item: item.id)

    async def begin_reindex(self, model: EmbeddingModel) -> None:
        if self._state.active not in (None, model):
            self._state = VectorState(self._state.active, model)

    async def missing_vectors(
        self, model: EmbeddingModel, after: str | None, limit: int
    ) -> list[MemoryItem]:
        lacking = sorted(
            item_id
            for item_id in self._items
            if (after is None or item_id > after) and model not in self._vectors.get(item_id, {})
        )
        return [_copy(self._items[item_id]) for item_id in lacking[:limit]]

    async def put_vectors(self, ids: Sequence[str], vectors: Vectors) -> int:
        check_model(vectors.model, self._state, writing=True)
        present = [index for index, item_id in enumerate(ids) if item_id in self._items]
        hashes = None if vectors.hashes is None else tuple(vectors.hashes[i] for i in present)
        kept = Vectors(vectors.model, vectors.matrix[present], hashes)
        items = [self._items[ids[index]] for index in present]
        return self._store_vectors(kept, items, skip_changed=True)

    async def finish_reindex(self, model: EmbeddingModel) -> None:
        lacking = await self.missing_vectors(model, None, 1)
        if lacking:
            raise conflict("some records still lack a vector of the new model; run reindex again")
        self._vectors = {
            item_id: {model: by_model[model]}
            for item_id, by_model in self._vectors.items()
            if model in by_model
        }
        self._state = VectorState(model)
        self._index.reset(model)
        ids = list(self._vectors)
        if ids:
            rows = [self._vectors[item_id][model][0] for item_id in ids]
            self._index.upsert(ids, np.stack(rows))

    async def history(self, id: str) -> list[HistoryEntry]:
        return [_copy_entry(entry) for entry in self._history.get(id, [])]

    async def restore_history(self, entries: Sequence[HistoryEntry]) -> int:
        added = 0
        for entry in entries:
            log = self._history.setdefault(entry.id, [])
            if not any((e.version, e.change) == (entry.version, entry.change) for e in log):
                log.append(_copy_entry(entry))
                added += 1
        return added

    async def append_audit(self, events: Sequence[AuditEvent]) -> None:
        for event in events:
            self._audit_seq += 1
            self._audit.append(
                AuditEntry(
                    self._audit_seq,
                    event.at,
                    event.principal,
                    event.node,
                    list(event.ids),
                    event.decision,
                    event.detail,
                    list(event.keys),
                    list(event.categories),
                )
            )

    async def audit_log(
        self, *, after: int = 0, limit: int = 100, principal: str | None = None
    ) -> list[AuditEntry]:
        entries = (
            entry
            for entry in self._audit
            if entry.seq > after and (principal is None or entry.principal == principal)
        )
        return [
            msgspec.structs.replace(
                entry, ids=list(entry.ids), keys=list(entry.keys), categories=list(entry.categories)
            )
            for entry in islice(entries, limit)
        ]

    async def purge_audit(self, before: datetime, *, dry_run: bool = False) -> int:
        kept = [entry for entry in self._audit if entry.at >= before]
        purged = len(self._audit) - len(kept)
        if not dry_run:
            self._audit = kept
        return purged

    def _put_all(self, items: Sequence[MemoryItem], entries: Sequence[HistoryEntry]) -> None:
        """Store records and their history entries, all or nothing: everything that can fail
        (copying, indexing) happens before the first change, as in a transaction."""
        prepared = [self._prepared(item) for item in items]
        logged = [_copy_entry(entry) for entry in entries]
        claim_outcome()  # committed from here: a deadline that fires later is not "not written"
        self._commit(prepared)
        for entry in logged:
            self._history.setdefault(entry.id, []).append(entry)

    @staticmethod
    def _prepared(item: MemoryItem) -> tuple[MemoryItem, Counter[str]]:
        item = _copy(item)  # never share mutable content with a caller
        text = " ".join(filter(None, (item.key, item.summary, content_text(item.content))))
        return item, Counter(light_stem(word) for word in text_words(text))

    def _commit(self, prepared: Sequence[tuple[MemoryItem, Counter[str]]]) -> None:
        for item, terms in prepared:
            self._items[item.id] = item
            if item.key is not None:
                self._keys[(item.namespace, item.key)] = item.id
            self._terms[item.id] = terms


_encode_item = msgspec.json.Encoder()
_decode_item = msgspec.json.Decoder(MemoryItem)
_decode_entry = msgspec.json.Decoder(HistoryEntry)


def _copy_entry(entry: HistoryEntry) -> HistoryEntry:
    return _decode_entry.decode(_encode_item.encode(entry))


def _copy(item: MemoryItem) -> MemoryItem:
    """A deep copy: what the store keeps and what it hands out never share mutable objects,
    exactly as with a database."""
    return _decode_item.decode(_encode_item.encode(item))
