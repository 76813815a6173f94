"""The four context operations on an explicit context: pure transformations (no store), the
reference's rules exactly. Scoped calls wrap these with one read and one compare-and-set."""

from __future__ import annotations

import math
from typing import Any

import msgspec

from ditto.errors import ErrorCode
from ditto.runtime.context import NodeContext
from workers.context.canonical import js_json, stable_id
from workers.context.compress import deterministic_compress, validate_compressed
from workers.context.contracts import (
    CompressInput,
    Context,
    ContextItem,
    ContextSelection,
    LoadInput,
    Message,
    Reference,
    SelectInput,
    UpdateInput,
)
from workers.context.errors import ContextError
from workers.context.policy import ContextPolicy, inline_bytes
from workers.context.select import default_select
from workers.context.services import ContextServices, resolve_maybe_async

__all__ = ("ContextOperations",)


def _invalid(message: str) -> ContextError:
    return ContextError(ErrorCode.INVALID_INPUT, message)


def _provider_output(message: str) -> ContextError:
    return ContextError(ErrorCode.INVALID_PROVIDER_OUTPUT, message)


class ContextOperations:
    """LOAD, UPDATE, SELECT and COMPRESS under one policy and one set of services."""

    def __init__(self, policy: ContextPolicy, services: ContextServices) -> None:
        self.policy = policy
        self.services = services

    # ----------------------------------------------------------------- shared rules

    def _put(self, items: dict[str, ContextItem], item: ContextItem) -> None:
        if item.id in items:
            if self.policy.duplicate == "keep-first":
                return
            if self.policy.duplicate == "reject":
                raise ContextError(ErrorCode.DUPLICATE_ITEM, f"item {item.id!r} is already present")
        items[item.id] = item  # replacing keeps the original position

    def _check_count(self, items: dict[str, ContextItem]) -> None:
        if len(items) > self.policy.max_items:
            raise ContextError(
                ErrorCode.ITEM_LIMIT_EXCEEDED,
                f"the context would hold {len(items)} items; the limit is {self.policy.max_items} "
                "(COMPRESS it first)",
            )

    async def tokens(self, item: ContextItem) -> int:
        """An item's token estimate: the configured estimator, else ``ceil(bytes / 4)``."""
        estimator = self.services.token_estimator
        if estimator is None:
            return math.ceil(inline_bytes(item.content) / 4)
        value = await resolve_maybe_async(estimator.estimate(item.content))
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise _provider_output("the token estimator must return a non-negative integer")
        return value

    @staticmethod
    def unique(context: Context) -> dict[str, ContextItem]:
        items: dict[str, ContextItem] = {}
        for item in context.items:
            if item.id in items:
                raise _invalid(f"the context contains duplicate item id {item.id!r}")
            items[item.id] = item
        return items

    # ----------------------------------------------------------------- LOAD

    async def load(self, request: LoadInput, ctx: NodeContext) -> Context:
        resolver = self.services.reference_resolver
        if request.resolve_references and resolver is None:
            raise ContextError(
                ErrorCode.RESOLVER_UNAVAILABLE, "no reference resolver is configured"
            )
        normalised = [
            _normalise(position, source) for position, source in enumerate(request.sources or [])
        ]
        items: dict[str, ContextItem] = {}
        for item, bare_reference in normalised:
            if request.resolve_references and bare_reference is not None and resolver is not None:
                content = await resolver.resolve(bare_reference, ctx)
                try:
                    size = inline_bytes(content)
                except ContextError as exc:
                    raise _provider_output(
                        "the resolver returned content that is not JSON"
                    ) from exc
                if size > self.policy.max_inline_bytes:
                    raise ContextError(
                        ErrorCode.INLINE_LIMIT_EXCEEDED,
                        f"resolved content of {bare_reference.uri!r} is over the inline limit",
                    )
                item = msgspec.structs.replace(item, content=content)
            else:
                self.policy.check_inline(item)
            self._put(items, item)
        self._check_count(items)
        return Context(list(items.values()))

    # ----------------------------------------------------------------- UPDATE

    async def update(self, request: UpdateInput, context: Context) -> Context:
        items = self.unique(context)
        for item in items.values():
            self.policy.check_inline(item)
        for item_id in request.remove_ids:
            if items.pop(item_id, None) is None and self.policy.missing_removal == "reject":
                raise ContextError(ErrorCode.MISSING_ITEM, f"no item {item_id!r} to remove")
        for item in request.add:
            self._put(items, self.policy.check_inline(item))
        for entry in request.ingress:
            metadata = {**(entry.metadata or {}), "source_node": entry.source_node}
            item = ContextItem(entry.id, entry.content, entry.reference, metadata)
            self._put(items, self.policy.check_inline(item))
        self._check_count(items)
        return Context(list(items.values()))

    # ----------------------------------------------------------------- SELECT

    async def select(
        self, request: SelectInput, context: Context, ctx: NodeContext, *, checked: bool = False
    ) -> ContextSelection:
        """``checked``: the context's ids are known to be unique (it came from the store); the
        selection carries ``context.version``."""
        if not checked:
            self.unique(context)
        strategy = request.strategy
        kind = strategy.kind if strategy is not None else "default"
        candidates: Any
        if kind == "default":
            ranked = default_select(request.purpose, request.query, context.items)
            return await self._budgeted(request, ranked, context.version, unique=True)
        service = self.services.selector if kind == "provider" else self.services.rag
        if kind == "provider" and (strategy is None or strategy.name is None):
            raise _invalid("a provider strategy needs a name")
        if service is None:
            raise ContextError(ErrorCode.STRATEGY_UNAVAILABLE, f"no {kind} selector is configured")
        scoped_request = msgspec.structs.replace(request, context=context)
        candidates = await service.select(scoped_request, ctx)
        if not isinstance(candidates, list):
            raise _provider_output("a selector must return a list of items")
        # Every candidate is validated, also past the limit: a selector's output is never trusted.
        validated = [_as_item(candidate) for candidate in candidates]
        return await self._budgeted(request, validated, context.version)

    async def _budgeted(
        self,
        request: SelectInput,
        candidates: list[ContextItem],
        version: str | None,
        *,
        unique: bool = False,
    ) -> ContextSelection:
        """Walk valid candidates best first: skip repeated ids (the first wins), stop at the
        limit, skip what does not fit the token budget. ``unique``: no id repeats."""
        limit = self.policy.item_cap(request.limit)
        token_cap = self.policy.token_cap(request.max_tokens)
        budgeted = math.isfinite(token_cap)
        check_inline = self.policy.check_inline
        if unique and not budgeted:
            # The common case needs no walk: the first ``limit`` candidates are the selection.
            first = candidates[:limit]
            for item in first:
                check_inline(item)
            return ContextSelection(
                request.purpose, Context(first, version), [item.id for item in first]
            )
        seen: set[str] = set()
        selected: list[ContextItem] = []
        spent = 0
        for item in candidates:
            if len(selected) >= limit:
                break
            if item.id in seen:
                continue
            seen.add(item.id)
            check_inline(item)
            if budgeted:
                cost = await self.tokens(item)
                if spent + cost > token_cap:
                    continue  # too big for what is left: skip it, smaller ones may still fit
                spent += cost
            selected.append(item)
        ids = [item.id for item in selected]
        return ContextSelection(request.purpose, Context(selected, version), ids)

    # ----------------------------------------------------------------- COMPRESS

    async def compress(self, request: CompressInput, context: Context, ctx: NodeContext) -> Context:
        self.unique(context)
        for item in context.items:  # an explicit context is caller data: JSON, like everywhere
            js_json(item.content, sort_keys=False)
            js_json(item.metadata, sort_keys=False)
        max_items = self.policy.item_cap(request.max_items)
        max_tokens = self.policy.token_cap(request.max_tokens)
        compressor = self.services.compressor
        if compressor is None:
            output = await deterministic_compress(context.items, max_items, max_tokens, self.tokens)
        else:
            output = await compressor.compress(
                msgspec.structs.replace(request, context=context), ctx
            )
        return await validate_compressed(
            context, output, max_items, max_tokens, self.tokens, self.policy
        )


def _as_item(candidate: Any) -> ContextItem:
    try:
        item = msgspec.convert(
            msgspec.to_builtins(candidate) if isinstance(candidate, msgspec.Struct) else candidate,
            ContextItem,
        )
        js_json(item.content, sort_keys=False)
    except (msgspec.ValidationError, TypeError, ContextError) as exc:
        raise _provider_output("a selector returned something that is not a context item") from exc
    return item


def _normalise(position: int, source: Any) -> tuple[ContextItem, Reference | None]:
    """A LOAD source as an item, and the reference when the source is a bare reference."""
    if not isinstance(source, dict):
        raise _invalid(f"sources[{position}] must be an object")
    try:
        if "id" in source:
            return msgspec.convert(source, ContextItem), None
        if "role" in source:
            message = msgspec.convert(source, Message)
            metadata: dict[str, Any] = {"source_type": "message", "role": message.role}
            if message.name is not None:
                metadata["name"] = message.name
            item_id = stable_id("message", msgspec.to_builtins(message))
            return ContextItem(item_id, message.content, None, metadata), None
        reference = msgspec.convert(source, Reference)
    except msgspec.ValidationError as exc:
        raise _invalid(f"sources[{position}]: {exc}") from None
    except ValueError:  # msgspec's UnicodeEncodeError for a lone surrogate in a name or value
        raise _invalid(f"sources[{position}] holds text that is not valid Unicode") from None
    except TypeError:  # msgspec.to_builtins: a Python value that is not JSON (a complex number)
        raise _invalid(f"sources[{position}] holds a value that is not JSON") from None
    reference_json = msgspec.to_builtins(reference)
    item = ContextItem(
        stable_id("reference", reference_json),
        [{"type": "reference", "reference": reference_json}],
        reference,
        {"source_type": "reference"},
    )
    return item, reference
