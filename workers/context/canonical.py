"""Canonical JSON exactly as the reference computes it in JavaScript, and the stable ids built
on it.

Stable ids must match the reference byte for byte (``message:f4f7e7...`` for
``{"role": "user", "content": "hello"}``), so this serialiser follows ``JSON.stringify``, not
Python's ``json``: numbers in JavaScript's shortest form (``1.0`` is ``1``, ``1e-7`` is
``1e-7``), object keys sorted by UTF-16 code units, lone surrogates escaped, no spaces. The same
serialiser, in insertion order, measures inline bytes and estimates tokens.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from decimal import Decimal
from functools import lru_cache
from typing import Any

from ditto.errors import ErrorCode
from workers.context.errors import ContextError

__all__ = ("js_json", "json_string", "scope_key", "stable_id", "utf8_size")

# The C encoder escapes exactly what JSON.stringify escapes ('"', '\\', control characters, with
# the short forms \n \t ...) and leaves other characters raw, as JSON.stringify does.
_escape_string = json.encoder.encode_basestring
_SURROGATE = re.compile("[\ud800-\udfff]")
_EXACT = 2**53  # integers below this are exact doubles, printed in full by JavaScript


def _js_number(value: float) -> str:
    if not math.isfinite(value):
        raise ContextError(ErrorCode.INVALID_INPUT, "numbers must be finite")
    if value == 0:
        return "0"
    if value.is_integer() and abs(value) < _EXACT:
        return str(int(value))
    # repr gives the shortest round-trip digits, as JavaScript does; only the layout differs.
    _, digit_tuple, exponent = Decimal(repr(abs(value))).as_tuple()
    assert isinstance(exponent, int)
    point = len(digit_tuple) + exponent  # JavaScript's n: digits before the decimal point
    digits = "".join(map(str, digit_tuple)).rstrip("0") or "0"
    negative = value < 0
    sign = "-" if negative else ""
    if len(digits) <= point <= 21:
        text = digits + "0" * (point - len(digits))
    elif 0 < point <= 21:
        text = f"{digits[:point]}.{digits[point:]}"
    elif -6 < point <= 0:
        text = "0." + "0" * -point + digits
    else:
        exponent = point - 1
        head = digits[0] + ("." + digits[1:] if len(digits) > 1 else "")
        text = f"{head}e{'+' if exponent >= 0 else '-'}{abs(exponent)}"
    return sign + text


def _utf16_order(key: str) -> bytes:
    return key.encode("utf-16-be", "surrogatepass")


def json_string(text: str) -> str:
    """``JSON.stringify(text)``."""
    encoded: str = _escape_string(text)
    if _SURROGATE.search(encoded):
        # JSON.stringify escapes lone surrogates; Python would leave them unencodable.
        encoded = _SURROGATE.sub(lambda match: f"\\u{ord(match.group()):04x}", encoded)
    return encoded


def js_json(value: Any, *, sort_keys: bool) -> str:
    """``JSON.stringify(value)`` (compact); with ``sort_keys`` the reference's canonical form.

    Raises:
        ContextError: ``INVALID_INPUT`` for values JSON cannot hold (non-finite numbers, cycles,
            non-string keys, other types).
    """
    parts: list[str] = []
    _write(value, parts, sort_keys, set())
    return "".join(parts)


def _write(value: Any, parts: list[str], sort_keys: bool, active: set[int]) -> None:
    if value is None:
        parts.append("null")
    elif value is True:
        parts.append("true")
    elif value is False:
        parts.append("false")
    elif isinstance(value, str):
        parts.append(json_string(value))
    elif isinstance(value, int):
        # Beyond 2**53 JavaScript holds the nearest double, and prints that.
        if abs(value) < _EXACT:
            parts.append(str(value))
        else:
            try:
                parts.append(_js_number(float(value)))
            except OverflowError:
                raise ContextError(ErrorCode.INVALID_INPUT, "numbers must be finite") from None
    elif isinstance(value, float):
        parts.append(_js_number(value))
    elif isinstance(value, list | tuple | dict):
        marker = id(value)
        if marker in active:
            raise ContextError(ErrorCode.INVALID_INPUT, "content must not be cyclic")
        active.add(marker)
        if isinstance(value, dict):
            keys = list(value)
            if not all(isinstance(key, str) for key in keys):
                raise ContextError(ErrorCode.INVALID_INPUT, "object keys must be strings")
            if sort_keys:
                keys.sort(key=_utf16_order)
            parts.append("{")
            for position, key in enumerate(keys):
                if position:
                    parts.append(",")
                parts.append(json_string(key))
                parts.append(":")
                _write(value[key], parts, sort_keys, active)
            parts.append("}")
        else:
            parts.append("[")
            for position, item in enumerate(value):
                if position:
                    parts.append(",")
                _write(item, parts, sort_keys, active)
            parts.append("]")
        active.discard(marker)
    else:
        raise ContextError(ErrorCode.INVALID_INPUT, f"a {type(value).__name__} is not a JSON value")


def utf8_size(text: str) -> int:
    return len(text.encode("utf-8", "surrogatepass"))


def stable_id(prefix: str, value: Any) -> str:
    """``prefix + ":" + sha256(canonical JSON)`` — identical values get identical ids."""
    canonical = js_json(value, sort_keys=True).encode("utf-8", "surrogatepass")
    return f"{prefix}:{hashlib.sha256(canonical).hexdigest()}"


@lru_cache(maxsize=4096)
def scope_key(session_id: str | None, turn_id: str | None, invocation_id: str | None) -> str:
    """The id of a scope: its full ``(session, turn, invocation)`` tuple, never a parent's."""
    return stable_id("scope", [session_id, turn_id, invocation_id])
