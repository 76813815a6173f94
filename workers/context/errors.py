"""CONTEXT error codes (the reference's set) and the error the worker raises."""

from __future__ import annotations

from enum import StrEnum

from ditto.errors import DittoError

__all__ = ("ContextError", "ContextErrorCode")


class ContextErrorCode(StrEnum):
    """Stable codes of the CONTEXT worker."""

    INVALID_INPUT = "INVALID_INPUT"
    """The input breaks the contract (shape, scope, budgets)."""
    INLINE_LIMIT_EXCEEDED = "INLINE_LIMIT_EXCEEDED"
    """An item's inline content is over ``max_inline_bytes`` and carries no reference."""
    ITEM_LIMIT_EXCEEDED = "ITEM_LIMIT_EXCEEDED"
    """LOAD or UPDATE would leave more than ``max_items`` items (nothing compresses silently)."""
    DUPLICATE_ITEM = "DUPLICATE_ITEM"
    """An item id is already present and the duplicate policy is ``reject``."""
    MISSING_ITEM = "MISSING_ITEM"
    """An id to remove is absent and ``missing_removal`` is ``reject``."""
    STRATEGY_UNAVAILABLE = "STRATEGY_UNAVAILABLE"
    """SELECT asked for a strategy whose service is not configured."""
    INVALID_PROVIDER_OUTPUT = "INVALID_PROVIDER_OUTPUT"
    """A selector, compressor, estimator or resolver returned something off-contract."""
    BUDGET_UNSATISFIABLE = "BUDGET_UNSATISFIABLE"
    """Protected items alone exceed the COMPRESS budget."""
    RESOLVER_UNAVAILABLE = "RESOLVER_UNAVAILABLE"
    """LOAD asked to resolve references and no resolver is configured."""
    STATE_STORE_UNAVAILABLE = "STATE_STORE_UNAVAILABLE"
    """A scope was given but no store is configured, or the store cannot be reached."""
    CONTEXT_NOT_FOUND = "CONTEXT_NOT_FOUND"
    """The scope has no state (never loaded, or expired)."""
    STATE_CONFLICT = "STATE_CONFLICT"
    """The state changed since it was read, or ``expected_version`` is stale."""
    INVALID_STATE = "INVALID_STATE"
    """The store holds corrupt or invalid state."""
    QUEUE_FULL = "QUEUE_FULL"
    """The per-scope operation queue is at capacity (retryable)."""


class ContextError(DittoError):
    """A CONTEXT failure with a stable code and a message safe to show."""

    def __init__(self, code: ContextErrorCode, message: str, *, retryable: bool = False) -> None:
        super().__init__(message, code=code, retryable=retryable)
