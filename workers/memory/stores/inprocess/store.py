"""``InProcessMemoryStore`` itself: its reads, keyword search and writes, on the state and
capabilities of its sibling modules."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING

import msgspec

from ditto.contracts.outcomes import claim_outcome
from workers.memory.model.contracts import (
    MemoryDraft,
    MemoryFilter,
    MemoryItem,
    MemoryPatch,
    OrderBy,
    SearchHit,
    SearchInput,
    WriteMode,
)
from workers.memory.model.errors import key_taken
from workers.memory.model.filters import matches_filter
from workers.memory.model.merges import plan_merges
from workers.memory.model.patches import changes_text, plan_updates
from workers.memory.model.planning import (
    WriteGuard,
    WriteRules,
    history_entry,
    history_of,
    plan_writes,
)
from workers.memory.model.records import now_from, order_key, to_micros
from workers.memory.model.review_plan import (
    ReviewGuard,
    contested_to_review,
    keys_to_review,
    plan_reviews,
    review_history,
)
from workers.memory.model.reviews import ReviewDecision
from workers.memory.ports import (
    AuditLog,
    ChangedRecord,
    ChangeFeed,
    HistoryLog,
    KeywordSearch,
    MemoryStore,
    QueryPosition,
    RecordImport,
    UsageTracking,
    VectorStore,
)
from workers.memory.retrieval.keyword import bm25, explained, keyword_request
from workers.memory.retrieval.text import light_stem
from workers.memory.retrieval.vectors import Vectors, matching_rows, text_hash
from workers.memory.stores.inprocess.logs import InProcessLogs
from workers.memory.stores.inprocess.state import clone
from workers.memory.stores.inprocess.vectors import InProcessVectors

if TYPE_CHECKING:
    from ditto.runtime.context import NodeContext

__all__ = ("InProcessMemoryStore",)


class InProcessMemoryStore(
    InProcessVectors,
    InProcessLogs,
    MemoryStore,
    UsageTracking,
    KeywordSearch,
    VectorStore,
    HistoryLog,
    AuditLog,
    RecordImport,
    ChangeFeed,
):
    """Memory records in this process only: gone when it exits.

    Args:
        clock: Source of ``created_at``/``updated_at`` (default: the system clock, UTC).
    """

    # ----------------------------------------------------------------- reads

    async def get(
        self, ids: Sequence[str], keys: Sequence[str], namespace: str
    ) -> list[MemoryItem]:
        found = [self._items[item_id] for item_id in ids if item_id in self._items]
        for key in keys:
            found.extend(self._items[item_id] for item_id in self._ids_with_key(namespace, key))
        return [clone(item) for item in found]

    async def query(
        self, filter: MemoryFilter, order: OrderBy, limit: int, after: QueryPosition | None
    ) -> list[MemoryItem]:
        descending = order.direction == "desc"
        now = now_from(self._clock)
        ranked = sorted(
            (
                (order_key(item, order.field), item.id, item)
                for item in self._items.values()
                if matches_filter(item, filter, now)
            ),
            key=lambda row: (row[0], row[1]),
            reverse=descending,
        )
        if after is not None:
            if descending:
                ranked = [row for row in ranked if (row[0], row[1]) < after]
            else:
                ranked = [row for row in ranked if (row[0], row[1]) > after]
        return [clone(row[2]) for row in ranked[:limit]]

    async def changes_after(self, after: QueryPosition, limit: int) -> list[ChangedRecord]:
        # A test double: a pass over every record (a real store reads an index range).
        changed = sorted(
            (
                ChangedRecord(item.id, item.namespace, item.version, to_micros(item.updated_at))
                for item in self._items.values()
                if (to_micros(item.updated_at), item.id) > after
            ),
            key=lambda change: (change.updated_micros, change.id),
        )
        return changed[:limit]

    async def count(self, filter: MemoryFilter) -> int:
        now = now_from(self._clock)
        return sum(1 for item in self._items.values() if matches_filter(item, filter, now))

    async def search(self, input: SearchInput, ctx: NodeContext | None = None) -> list[SearchHit]:
        words, explain = keyword_request(input, "the in-process store")
        limit = input.limit or 10
        terms = {light_stem(word) for word in words}
        now = now_from(self._clock)
        candidates = [
            (item, self._terms[item.id])
            for item in self._items.values()
            if matches_filter(item, input.filter, now)
            and not terms.isdisjoint(self._terms[item.id])
        ]
        if not candidates:
            return []
        scores = bm25(terms, [counts for _, counts in candidates], list(self._terms.values()))
        scored = [(score, item) for score, (item, _) in zip(scores, candidates, strict=True)]
        scored.sort(key=lambda row: (-row[0], row[1].id))
        return explained([SearchHit(clone(item), score) for score, item in scored[:limit]], explain)

    # ----------------------------------------------------------------- writes

    async def write(
        self,
        drafts: Sequence[MemoryDraft],
        mode: WriteMode,
        vectors: Vectors | None = None,
        guard: WriteGuard | None = None,
        rules: WriteRules | None = None,
    ) -> list[MemoryItem]:
        self._check_vectors(vectors, needed=True)
        existing = {
            (draft.namespace, draft.key): [
                clone(self._items[item_id])
                for item_id in self._ids_with_key(draft.namespace, draft.key)
            ]
            for draft in drafts
            if draft.key is not None
        }
        now = now_from(self._clock)
        targets = {
            item_id: clone(self._items[item_id])
            for item_id in (rules.targets if rules is not None else ())
            if item_id in self._items
        }
        steps = plan_writes(drafts, mode, existing, now, guard, rules, targets)
        merges = plan_merges(targets, rules, steps, now, guard) if rules is not None else []
        if vectors is not None:  # refuse before any change: all or nothing
            matching_rows([step.item for step in steps], vectors.hashes, skip=False)
        retired = [step.retired for step in steps if step.retired is not None]
        changed = [step.item for step in [*steps, *merges] if step.entry is not None]
        self._put_all([*retired, *changed], history_of([*steps, *merges]))
        if vectors is not None:
            self._store_vectors(vectors, [step.item for step in steps])
        return [clone(step.item) for step in steps]

    async def update(
        self,
        patches: Sequence[MemoryPatch],
        vectors: Vectors | None = None,
        guard: WriteGuard | None = None,
    ) -> list[MemoryItem]:
        now = now_from(self._clock)  # read once per call, refused or not, like every store
        self._check_vectors(vectors, needed=any(map(changes_text, patches)))
        stored = {
            patch.id: clone(self._items[patch.id]) for patch in patches if patch.id in self._items
        }
        steps = plan_updates(patches, stored, now, guard)
        updated = [step.item for step in steps]
        if vectors is not None:  # refuse before any change: all or nothing
            matching_rows(updated, vectors.hashes, skip=False)
        self._put_all(updated, [step.entry for step in steps])
        if vectors is not None:
            self._store_vectors(vectors, updated)
        return [clone(item) for item in updated]

    async def delete(self, ids: Sequence[str], guard: WriteGuard | None = None) -> list[str]:
        now = now_from(self._clock)
        chosen = [item_id for item_id in ids if item_id in self._items]
        if guard is not None:  # every check before any change: all or nothing
            chosen = [item_id for item_id in chosen if guard.check_delete(self._items[item_id])]
        deleted = []
        if chosen:
            claim_outcome()
        for item_id in chosen:
            item = self._forget(item_id)
            self._history.setdefault(item_id, []).append(history_entry(item, "delete", now))
            deleted.append(item_id)
        return deleted

    def _forget(self, item_id: str) -> MemoryItem:
        """Remove a record with its words, vectors and key (its history stays)."""
        item = self._items.pop(item_id)
        self._terms.pop(item_id, None)
        self._vectors.pop(item_id, None)
        self._index.remove([item_id])
        self._unindex_key(item)
        return item

    async def review(
        self,
        decisions: Sequence[ReviewDecision],
        reviewer: str | None = None,
        guard: ReviewGuard | None = None,
    ) -> list[MemoryItem]:
        now = now_from(self._clock)
        stored = {d.id: clone(self._items[d.id]) for d in decisions if d.id in self._items}
        holders = {
            place: clone(self._items[self._keys[place]])
            for place in keys_to_review(decisions, stored)
            if place in self._keys
        }
        contested = {
            item_id: clone(self._items[item_id])
            for item_id in contested_to_review(decisions, stored)
            if item_id in self._items
        }
        steps = plan_reviews(decisions, stored, holders, now, reviewer, guard, contested)
        retired = [step.retired for step in steps if step.retired is not None]
        accepted = [step.item for step in steps if step.decision == "accept"]
        # Holders first: each gives its key up before the record accepted for it takes it.
        self._put_all([*retired, *accepted], review_history(steps))
        for step in steps:
            if step.decision == "reject":
                self._forget(step.item.id)
        return [clone(step.item) for step in steps]

    async def record_usage(self, ids: Sequence[str], at: datetime) -> None:
        for item_id in ids:
            item = self._items.get(item_id)
            if item is not None:
                self._items[item_id] = msgspec.structs.replace(
                    item, usage_count=item.usage_count + 1, last_used_at=at
                )

    async def restore(self, items: Sequence[MemoryItem]) -> int:
        for item in items:  # check everything first: all or nothing
            holds = item.key is not None and item.status == "active"
            holder = self._keys.get((item.namespace, item.key or "")) if holds else None
            if holder is not None and holder != item.id:
                raise key_taken(item.namespace, item.key)
        prepared = [self._prepared(item) for item in items]  # may fail: before any change
        for item in items:
            held = self._vectors.get(item.id, {})
            if any(fingerprint != text_hash(item) for _, fingerprint in held.values()):
                del self._vectors[item.id]  # its text changed: it needs a new vector
                self._index.remove([item.id])
        self._commit(prepared)
        return len(items)
