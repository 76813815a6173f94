"""The MEMORY write nodes: ``WRITE``, ``UPDATE`` and ``DELETE``, each validating its batch,
embedding new text, and checking what the store returned."""

from __future__ import annotations

import hashlib

import msgspec

from ditto.runtime.context import NodeContext
from workers.memory.model.contracts import (
    DEFAULT_NAMESPACE,
    DeleteInput,
    DeleteOutput,
    MemoryDraft,
    MemoryItem,
    MemoryPatch,
    UpdateInput,
    UpdateOutput,
    WriteInput,
    WriteOutput,
)
from workers.memory.model.errors import MemoryStoreError
from workers.memory.model.patches import changes_text, plan_updates
from workers.memory.model.records import now_from
from workers.memory.model.validation import check_input
from workers.memory.worker.boundary import check_items, off_contract
from workers.memory.worker.node_base import NodeBase

__all__ = ("WriteNodes",)

_PATCH_FIELDS = (
    "content",
    "summary",
    "metadata",
    "tags",
    "category",
    "pinned",
    "visibility",
    "archived",
    "expires_at",
    "ttl",
)


def _keyed_by_work(drafts: list[MemoryDraft], idempotency_key: str) -> list[MemoryDraft]:
    """``drafts``, each without a key given one derived from the work and its position (the
    idempotency key itself is not stored: it may name a checkpoint or a run)."""
    work = hashlib.sha256(idempotency_key.encode()).hexdigest()[:24]
    return [
        draft
        if draft.key is not None
        else msgspec.structs.replace(draft, key=f"~{work}:{position}")
        for position, draft in enumerate(drafts)
    ]


def namespaced(position: int, draft: MemoryDraft) -> MemoryDraft:
    """``draft`` in the namespace its metadata names, if any: the reference and the handbook
    keep the namespace in ``metadata.namespace``, and a filter on ``namespace`` must find what
    they write. A draft naming two different namespaces is refused, never guessed.

    Raises:
        MemoryStoreError: ``INVALID_INPUT``: ``metadata.namespace`` is not a namespace name, or
            differs from a namespace the draft gives.
    """
    named = draft.metadata.get("namespace", draft.namespace)
    if named == draft.namespace:
        return draft
    if not isinstance(named, str) or not 1 <= len(named) <= 256:
        raise MemoryStoreError(
            f"memories[{position}].metadata.namespace must be a namespace name (1 to 256 "
            "characters)"
        )
    if draft.namespace != DEFAULT_NAMESPACE:
        raise MemoryStoreError(
            f"memories[{position}] names two namespaces: namespace and metadata.namespace "
            "differ (give one)"
        )
    return msgspec.structs.replace(draft, namespace=named)


class WriteNodes(NodeBase):
    """The handlers of ``MEMORY.WRITE``, ``MEMORY.UPDATE`` and ``MEMORY.DELETE``."""

    async def write(self, request: WriteInput, ctx: NodeContext) -> WriteOutput:
        self._start_hygiene()
        check_input(request)
        memories = [namespaced(position, draft) for position, draft in enumerate(request.memories)]
        if ctx.principal is not None:  # provenance: who wrote it, as the runtime knows the caller
            memories = [
                msgspec.structs.replace(draft, principal=ctx.principal) for draft in memories
            ]
        if request.idempotent:
            memories = _keyed_by_work(memories, ctx.idempotency_key)
        request = msgspec.structs.replace(request, memories=memories)
        seen: dict[tuple[str, str], int] = {}
        for position, draft in enumerate(request.memories):
            if draft.ttl is not None and draft.expires_at is not None:
                raise MemoryStoreError(f"memories[{position}]: give expires_at or ttl, not both")
            if draft.key is None:
                if request.mode == "upsert":
                    raise MemoryStoreError(f"memories[{position}]: upsert needs a key")
                continue
            earlier = seen.get((draft.namespace, draft.key))
            if earlier is not None:  # positions, not the key: it may hold what is redacted
                raise MemoryStoreError(
                    f"memories[{position}]: its key is also memories[{earlier}]'s (a key appears "
                    "once in one batch)"
                )
            seen[(draft.namespace, draft.key)] = position
        if not request.memories:
            return WriteOutput([])
        now = now_from(self.clock)
        # A duplicate is only ever one the caller may see (under access control).
        visible_to = self.access.principal(ctx) if self.access.enforcing else None
        prepared = await self.pipeline.prepare(request.memories, request.policy, now, visible_to)
        drafts = await self.access.stamp(ctx, prepared.to_write)
        written: list[MemoryItem] = []
        if drafts or prepared.rules.merges:  # a write of duplicates only still adds sources
            vectors = await self._vectors(drafts)
            writing = self.store.write(
                drafts, request.mode, vectors, self.access.guard(ctx), rules=prepared.rules
            )
            written = check_items(await self.access.audited(ctx, writing, []), "WRITE output")
        if len(written) != len(drafts) or any(
            (item.namespace, item.key) != (draft.namespace, draft.key)
            for item, draft in zip(written, drafts, strict=True)
        ):
            raise off_contract("WRITE must return one record per draft, in order")
        items, outcomes = self.pipeline.finish(written, prepared)
        if prepared.duplicates and self.usage is not None:  # a fact stated again is a use
            await self.usage.record_usage([item.id for item in prepared.duplicates.values()], now)
        await self.access.record_items(ctx, items)
        return WriteOutput(items, outcomes)

    async def update(self, request: UpdateInput, ctx: NodeContext) -> UpdateOutput:
        self._start_hygiene()
        check_input(request)
        ids = [patch.id for patch in request.updates]
        if len(set(ids)) != len(ids):
            raise MemoryStoreError("an id appears twice in one UPDATE")
        for position, patch in enumerate(request.updates):
            if patch.ttl is not msgspec.UNSET and patch.expires_at is not msgspec.UNSET:
                raise MemoryStoreError(f"updates[{position}]: give expires_at or ttl, not both")
            if all(getattr(patch, name) is msgspec.UNSET for name in _PATCH_FIELDS):
                raise MemoryStoreError(
                    f"updates[{position}]: nothing to change (give content, summary, metadata, "
                    "tags, category, pinned, visibility, archived, expires_at or ttl)"
                )
        if not ids:
            return UpdateOutput([])
        await self.access.screen_updates(ctx, request.updates)
        patches = request.updates
        if self.pipeline.safety.screens_updates:  # an update is a write: its new text is screened
            found = await self.store.get(ids, [], DEFAULT_NAMESPACE)
            patches = self.pipeline.safety.screen_patches(
                patches, {item.id: item for item in found}
            )
        vectors = None
        if self.embedder is not None and any(map(changes_text, patches)):
            vectors = await self._vectors(await self._patched(patches))
        updating = self.store.update(patches, vectors, self.access.guard(ctx))
        items = check_items(await self.access.audited(ctx, updating, ids), "UPDATE output")
        if [item.id for item in items] != ids:
            raise off_contract("UPDATE must return each requested record once, in order")
        await self.access.record_items(ctx, items)
        return UpdateOutput(items)

    async def _patched(self, patches: list[MemoryPatch]) -> list[MemoryItem]:
        """The records as the patches will leave them (to embed their new text first)."""
        found = await self.store.get([patch.id for patch in patches], [], DEFAULT_NAMESPACE)
        steps = plan_updates(patches, {item.id: item for item in found}, now_from(self.clock))
        return [step.item for step in steps]

    async def delete(self, request: DeleteInput, ctx: NodeContext) -> DeleteOutput:
        self._start_hygiene()
        check_input(request)
        ids = list(dict.fromkeys(request.ids))
        if request.keys:
            ids = list(dict.fromkeys([*ids, *await self._ids_of(ctx, request)]))
        if not ids:
            return DeleteOutput([])
        await self.access.screen_deletes(ctx, ids)
        deleting = self.store.delete(ids, self.access.guard(ctx))
        deleted = await self.access.audited(ctx, deleting, ids)
        requested = set(ids)
        if (
            not isinstance(deleted, list)
            or not all(isinstance(item_id, str) and item_id in requested for item_id in deleted)
            or len(set(deleted)) != len(deleted)
        ):
            raise off_contract("DELETE must return unique ids from the request")
        await self.access.record(ctx, deleted)
        return DeleteOutput(deleted)

    async def _ids_of(self, ctx: NodeContext, request: DeleteInput) -> list[str]:
        """The ids of the records holding ``request.keys`` in its namespace that the caller may
        see: forgetting by key never reveals that someone else's record holds the key."""
        keys = list(dict.fromkeys(request.keys))
        found = check_items(
            await self.store.get([], keys, request.namespace), "GET output", unique=False
        )
        principal = self.access.principal(ctx)
        return [
            item.id
            for item in found
            if item.namespace == request.namespace
            and item.key in keys
            and self.access.may_see(item, principal)
        ]
