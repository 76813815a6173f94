"""What the conformance modules share."""

from __future__ import annotations

from typing import Any


def code_of(result: Any) -> str | None:
    """The error code of a node result, ``None`` when it succeeded."""
    return result.error.code if result.error is not None else None
