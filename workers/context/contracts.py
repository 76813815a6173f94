"""CONTEXT wire types: items, contexts, scopes and the four nodes' inputs.

Field names are snake_case everywhere, item metadata keys included (``current_goal``,
``call_id``, ``memory_candidate``...). Unknown fields are refused.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

import msgspec
from msgspec import Meta

__all__ = (
    "Budget",
    "CompressInput",
    "Context",
    "ContextIngress",
    "ContextItem",
    "ContextScope",
    "ContextSelection",
    "LoadInput",
    "Message",
    "Purpose",
    "Reference",
    "SelectInput",
    "SelectStrategy",
    "UpdateInput",
)

NonEmpty = Annotated[str, Meta(min_length=1)]
Budget = Annotated[int, Meta(ge=0, le=1_000_000)]
"""A request budget: 0..1,000,000 (0 is a zero budget). Requests only tighten the policy."""
NodeName = Annotated[str, Meta(pattern=r"^[^.\s]+(?:\.[^.\s]+)+$")]
Purpose = Literal["infer", "memory"]


class _Struct(msgspec.Struct, frozen=True, forbid_unknown_fields=True, omit_defaults=True):
    pass


class Reference(_Struct, frozen=True, forbid_unknown_fields=True, omit_defaults=True):
    """Where content lives instead of inline (a document, a file, an artifact)."""

    uri: NonEmpty
    media_type: NonEmpty | None = None
    digest: NonEmpty | None = None


class Message(_Struct, frozen=True, forbid_unknown_fields=True, omit_defaults=True):
    """A chat message; as a LOAD source it becomes an item with id ``message:<sha256>``."""

    role: Literal["system", "user", "assistant", "tool"]
    content: Any
    name: NonEmpty | None = None


class ContextItem(_Struct, frozen=True, forbid_unknown_fields=True, omit_defaults=True):
    """One entry of the working set."""

    id: NonEmpty
    content: Any
    source: Reference | None = None
    metadata: dict[str, Any] | None = None


class Context(_Struct, frozen=True, forbid_unknown_fields=True, omit_defaults=True):
    """A working set. ``version`` is set on results of scoped calls: the stored version the
    result was read from or written as (pass it back as ``expected_version``)."""

    items: list[ContextItem]
    version: str | None = None


class ContextScope(_Struct, frozen=True, forbid_unknown_fields=True, omit_defaults=True):
    """Which cached working set: the whole tuple is the identity (no parent fallback)."""

    session_id: NonEmpty | None = None
    turn_id: NonEmpty | None = None
    invocation_id: NonEmpty | None = None


class ContextIngress(_Struct, frozen=True, forbid_unknown_fields=True, omit_defaults=True):
    """Output of another node entering the context; ``source_node`` is stamped in metadata."""

    id: NonEmpty
    source_node: NodeName
    content: Any
    reference: Reference | None = None
    metadata: dict[str, Any] | None = None


class SelectStrategy(_Struct, frozen=True, forbid_unknown_fields=True, omit_defaults=True):
    kind: Literal["default", "rag", "provider"] = "default"
    name: NonEmpty | None = None
    """The selector to use (``provider`` kind)."""
    corpus: Reference | None = None
    """What to retrieve from (``rag`` kind)."""
    options: dict[str, Any] | None = None


class ContextSelection(_Struct, frozen=True, forbid_unknown_fields=True, omit_defaults=True):
    purpose: Purpose
    context: Context
    selected_item_ids: list[str]
    """Exactly the ids of ``context.items``, in order."""


class _Scoped(_Struct, frozen=True, forbid_unknown_fields=True, omit_defaults=True):
    scope: ContextScope | None = None
    """Operate on the cached working set of this scope instead of an explicit context."""
    expected_version: NonEmpty | None = None
    """Scoped calls only: fail with ``STATE_CONFLICT`` unless the stored version is this."""


class LoadInput(_Scoped, frozen=True, forbid_unknown_fields=True, omit_defaults=True):
    """Build a context from sources (messages, references, items). In scoped mode, a LOAD with
    ``sources`` creates or replaces the scope's state; without them it reads it."""

    sources: list[Any] | None = None
    resolve_references: bool = False


class SelectInput(
    _Scoped, frozen=True, forbid_unknown_fields=True, omit_defaults=True, kw_only=True
):
    purpose: Purpose
    context: Context | None = None
    query: Any = None
    limit: Budget | None = None
    max_tokens: Budget | None = None
    strategy: SelectStrategy | None = None


class UpdateInput(_Scoped, frozen=True, forbid_unknown_fields=True, omit_defaults=True):
    """Remove, then add, then take in ingress — in that order."""

    context: Context | None = None
    remove_ids: list[NonEmpty] = msgspec.field(default_factory=list)
    add: list[ContextItem] = msgspec.field(default_factory=list)
    ingress: list[ContextIngress] = msgspec.field(default_factory=list)


class CompressInput(_Scoped, frozen=True, forbid_unknown_fields=True, omit_defaults=True):
    context: Context | None = None
    max_items: Budget | None = None
    max_tokens: Budget | None = None
