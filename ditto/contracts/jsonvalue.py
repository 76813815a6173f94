"""Checks for values that must travel as JSON (record contents, context items)."""

from __future__ import annotations

import math
from typing import Any

from ditto.errors import InvalidInputError

__all__ = ("check_json",)


def check_json(value: Any, where: str) -> None:
    """Refuse what JSON cannot hold faithfully: NaN/infinity (msgspec would write ``null``),
    lone surrogates, non-string keys and non-JSON types.

    Raises:
        InvalidInputError: ``INVALID_INPUT`` naming ``where`` (never echoing the value).
    """
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            _check_text(item, where)
        elif isinstance(item, bool) or item is None or isinstance(item, int):
            continue
        elif isinstance(item, float):
            if not math.isfinite(item):
                raise InvalidInputError(f"{where} contains a non-finite number")
        elif isinstance(item, list | tuple):
            stack.extend(item)
        elif isinstance(item, dict):
            for key, child in item.items():
                if not isinstance(key, str):
                    raise InvalidInputError(f"{where} has a non-string object key")
                _check_text(key, where)
                stack.append(child)
        else:
            raise InvalidInputError(f"{where} contains a {type(item).__name__}, which is not JSON")


def _check_text(text: str, where: str) -> None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidInputError(f"{where} contains text that is not valid Unicode") from None
