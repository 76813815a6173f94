"""``MarkdownMemoryStore`` itself: reads, keyword search and writes over the folder's files."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

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
from workers.memory.model.records import now_from, order_key
from workers.memory.model.review_plan import (
    ReviewGuard,
    contested_to_review,
    keys_to_review,
    plan_reviews,
    review_history,
)
from workers.memory.model.reviews import ReviewDecision
from workers.memory.ports import KeywordSearch, QueryPosition, RecordImport
from workers.memory.retrieval.keyword import bm25, explained, keyword_request
from workers.memory.retrieval.text import light_stem
from workers.memory.retrieval.vectors import Vectors, matching_rows
from workers.memory.stores.markdown.logs import MarkdownLogs
from workers.memory.stores.markdown.state import clone
from workers.memory.stores.markdown.vectors import MarkdownVectors

if TYPE_CHECKING:
    from ditto.runtime.context import NodeContext

__all__ = ("MarkdownMemoryStore",)


class MarkdownMemoryStore(MarkdownLogs, MarkdownVectors, KeywordSearch, RecordImport):
    """Memory records as Markdown files in a folder a person can read, edit and keep in git.

    One folder per namespace, one file per record (front matter with every field, the content
    as the body: see :mod:`~workers.memory.stores.markdown.fileformat`), the history and audit
    log in ``.ditto/``. A person's edits are taken in on the next operation, as new versions
    (:mod:`~workers.memory.stores.markdown.scan`); every batch is all or nothing, also across
    a crash (:mod:`~workers.memory.stores.markdown.files`). Keyword search is BM25 over the
    records in memory, on the same calibrated scale as the other stores; vectors live in
    ``.ditto/vectors.bin`` (:mod:`~workers.memory.stores.markdown.vectors`), ignored by git
    and rebuilt by reindex. There are no usage counters (a counter that changed a file on
    every search would bury a person's edits in ``git diff``).

    Args:
        path: The folder (created on first use).
        clock: Source of ``created_at``/``updated_at`` (default: the system clock, UTC).
    """

    # ----------------------------------------------------------------- reads

    async def get(
        self, ids: Sequence[str], keys: Sequence[str], namespace: str
    ) -> list[MemoryItem]:
        def get() -> list[MemoryItem]:
            folder = self._folder
            found = [folder.items[item_id] for item_id in ids if item_id in folder.items]
            for key in keys:
                found.extend(folder.items[i] for i in folder.ids_with_key(namespace, key))
            return [clone(item) for item in found]

        return await self._run(get)

    async def query(
        self, filter: MemoryFilter, order: OrderBy, limit: int, after: QueryPosition | None
    ) -> list[MemoryItem]:
        descending = order.direction == "desc"

        def query() -> list[MemoryItem]:
            now = now_from(self._clock)
            ranked = sorted(
                (
                    (order_key(item, order.field), item.id, item)
                    for item in self._folder.items.values()
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

        return await self._run(query)

    async def count(self, filter: MemoryFilter) -> int:
        def count() -> int:
            now = now_from(self._clock)
            return sum(
                1 for item in self._folder.items.values() if matches_filter(item, filter, now)
            )

        return await self._run(count)

    async def search(self, input: SearchInput, ctx: NodeContext | None = None) -> list[SearchHit]:
        words, explain = keyword_request(input, "the Markdown store")
        limit = input.limit or 10
        terms = {light_stem(word) for word in words}

        def search() -> list[SearchHit]:
            folder = self._folder
            now = now_from(self._clock)
            candidates = [
                (item, folder.terms[item.id])
                for item in folder.items.values()
                if not terms.isdisjoint(folder.terms[item.id])
                and matches_filter(item, input.filter, now)
            ]
            if not candidates:
                return []
            scores = bm25(terms, [counts for _, counts in candidates], list(folder.terms.values()))
            scored = [(score, item) for score, (item, _) in zip(scores, candidates, strict=True)]
            scored.sort(key=lambda row: (-row[0], row[1].id))
            return [SearchHit(clone(item), score) for score, item in scored[:limit]]

        return explained(await self._run(search), explain)

    async def health(self) -> dict[str, object]:
        return await self._run(self._describe)

    # ----------------------------------------------------------------- writes

    async def write(
        self,
        drafts: Sequence[MemoryDraft],
        mode: WriteMode,
        vectors: Vectors | None = None,
        guard: WriteGuard | None = None,
        rules: WriteRules | None = None,
    ) -> list[MemoryItem]:
        def write() -> list[MemoryItem]:
            folder = self._folder
            self._check_vectors(vectors, needed=True)
            existing = {
                (draft.namespace, draft.key): [
                    clone(folder.items[i]) for i in folder.ids_with_key(draft.namespace, draft.key)
                ]
                for draft in drafts
                if draft.key is not None
            }
            now = now_from(self._clock)
            targets = {
                item_id: clone(folder.items[item_id])
                for item_id in (rules.targets if rules is not None else ())
                if item_id in folder.items
            }
            steps = plan_writes(drafts, mode, existing, now, guard, rules, targets)
            merges = plan_merges(targets, rules, steps, now, guard) if rules is not None else []
            written = [step.item for step in steps]
            if vectors is not None:  # refuse before any change: all or nothing
                matching_rows(written, vectors.hashes, skip=False)
            retired = [step.retired for step in steps if step.retired is not None]
            changed = [step.item for step in [*steps, *merges] if step.entry is not None]
            if retired or changed:
                folder.save([*retired, *changed], history_of([*steps, *merges]))
            if vectors is not None:
                self._store_vectors(vectors, written)
            return written

        return await self._run(write, writes=True)

    async def update(
        self,
        patches: Sequence[MemoryPatch],
        vectors: Vectors | None = None,
        guard: WriteGuard | None = None,
    ) -> list[MemoryItem]:
        def update() -> list[MemoryItem]:
            folder = self._folder
            now = now_from(self._clock)
            self._check_vectors(vectors, needed=any(map(changes_text, patches)))
            stored = {
                patch.id: folder.items[patch.id] for patch in patches if patch.id in folder.items
            }
            steps = plan_updates(patches, stored, now, guard)
            updated = [step.item for step in steps]
            if vectors is not None:  # refuse before any change: all or nothing
                matching_rows(updated, vectors.hashes, skip=False)
            folder.save(updated, [step.entry for step in steps])
            if vectors is not None:
                self._store_vectors(vectors, updated)
            return updated

        return await self._run(update, writes=True)

    async def delete(self, ids: Sequence[str], guard: WriteGuard | None = None) -> list[str]:
        def delete() -> list[str]:
            folder = self._folder
            now = now_from(self._clock)
            chosen = list(dict.fromkeys(item_id for item_id in ids if item_id in folder.items))
            if guard is not None:  # every check before any change: all or nothing
                chosen = [i for i in chosen if guard.check_delete(folder.items[i])]
            if chosen:
                entries = [history_entry(folder.items[i], "delete", now) for i in chosen]
                folder.save([], entries, deleted=chosen)
            return chosen

        return await self._run(delete, writes=True)

    async def review(
        self,
        decisions: Sequence[ReviewDecision],
        reviewer: str | None = None,
        guard: ReviewGuard | None = None,
    ) -> list[MemoryItem]:
        def review() -> list[MemoryItem]:
            folder = self._folder
            now = now_from(self._clock)
            stored = {d.id: folder.items[d.id] for d in decisions if d.id in folder.items}
            holders = {
                place: folder.items[holder]
                for place in keys_to_review(decisions, stored)
                if (holder := folder.holder(*place)) is not None
            }
            contested = {
                item_id: folder.items[item_id]
                for item_id in contested_to_review(decisions, stored)
                if item_id in folder.items
            }
            steps = plan_reviews(decisions, stored, holders, now, reviewer, guard, contested)
            retired = [step.retired for step in steps if step.retired is not None]
            accepted = [step.item for step in steps if step.decision == "accept"]
            rejected = [step.item.id for step in steps if step.decision == "reject"]
            # One batch: the holder's file moves aside as the accepted record's takes its name.
            folder.save([*retired, *accepted], review_history(steps), deleted=rejected)
            return [step.item for step in steps]

        return await self._run(review, writes=True)

    async def restore(self, items: Sequence[MemoryItem]) -> int:
        def restore() -> int:
            folder = self._folder
            for item in items:  # check everything first: all or nothing
                if item.key is not None and item.status == "active":
                    holder = folder.holder(item.namespace, item.key)
                    if holder is not None and holder != item.id:
                        raise key_taken(item.namespace, item.key)
            if items:
                folder.save(list(items), [])
            return len(items)

        return await self._run(restore, writes=True)
