"""One validation walk over a MEMORY input, the same for every store.

The runtime has already converted the input to its contract (types, required fields). What a
type cannot say is checked here, in a single pass over the input's values:

* text must be valid Unicode (no lone surrogates) — a store cannot encode it;
* free-form values (content, metadata, options) must be JSON: no NaN or infinity (JSON has
  none; msgspec would write ``null``), only string object keys, only JSON types;
* NUL characters only in free text (content and the search query): keys, names, tags,
  metadata and filters are database text, which in PostgreSQL cannot hold NUL;
* nesting at most :data:`MAX_DEPTH` levels deep.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Collection
from datetime import UTC, datetime
from typing import Any

import msgspec
import msgspec.inspect

from workers.memory.model.contracts import HistoryEntry, MemoryItem
from workers.memory.model.errors import MemoryStoreError
from workers.memory.model.records import TIMESTAMP_FIELDS

__all__ = ("FREE_TEXT", "MAX_DEPTH", "check_input", "check_record")

MAX_DEPTH = 64
"""Most levels of nesting an input may have (the node input itself is level 0)."""

FREE_TEXT = frozenset({"content", "query"})
"""Fields whose text (at any depth) may hold NUL characters."""

_Where = tuple[Any, str | int] | None
"""A value's place in the input, as a chain ``(parent place, field or index)``; spelled out
only when a value is refused, so the walk formats nothing on the way."""


def check_input(request: msgspec.Struct, free_text: Collection[str] = FREE_TEXT) -> None:
    """Refuse, once and for every store, what a store could not keep faithfully.

    Args:
        request: A node input, already converted to its contract type.
        free_text: Names of fields whose text may hold NUL characters.

    Raises:
        MemoryStoreError: ``INVALID_INPUT`` naming the field (never echoing the value).
    """
    if _clean(request, free_text):
        return
    # Something is off: walk again, slowly, to name the field.
    stack: list[tuple[Any, _Where, int, bool]] = [(request, None, 0, False)]
    while stack:
        value, where, depth, nul_ok = stack.pop()
        if isinstance(value, str):
            _check_text(value, where, nul_ok)
        elif isinstance(value, bool | int) or value is None:
            continue
        elif isinstance(value, float):
            if not math.isfinite(value):
                raise _refused(where, "contains a non-finite number (NaN or infinity)")
        elif depth >= MAX_DEPTH:
            raise _refused(where, f"is nested more than {MAX_DEPTH} levels deep")
        elif isinstance(value, dict):
            for key, child in value.items():
                if not isinstance(key, str):
                    raise _refused(where, "has a non-string object key")
                _check_text(key, where, nul_ok)
                stack.append((child, (where, key), depth + 1, nul_ok))
        elif isinstance(value, list | tuple):
            stack.extend(
                (child, (where, index), depth + 1, nul_ok) for index, child in enumerate(value)
            )
        elif isinstance(value, msgspec.Struct):
            for name in value.__struct_fields__:
                child = getattr(value, name)
                # Typed fields the contract converted (times, unset patch fields) are fine here;
                # inside free-form values they are not JSON and fall through to the refusal.
                if child is not msgspec.UNSET and not isinstance(child, datetime):
                    stack.append((child, (where, name), depth + 1, nul_ok or name in free_text))
        else:
            raise _refused(where, f"contains a {type(value).__name__}, which is not JSON")


def _clean(request: msgspec.Struct, free_text: Collection[str]) -> bool:
    """The fast check: gather every text in one walk that formats nothing, then test the
    joined text once (NUL, valid Unicode) in C. ``False`` means "look closer", not "refused":
    the slow walk above decides, and names the field."""
    strict: list[str] = []
    free: list[str] = []
    if not _gather(request, 0, False, strict, free, free_text):
        return False
    text = "".join(strict)
    if "\x00" in text:
        return False
    return _encodable(text) and _encodable("".join(free))


def _encodable(text: str) -> bool:
    if text.isascii():
        return True
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _gather(
    value: Any,
    depth: int,
    nul_ok: bool,
    strict: list[str],
    free: list[str],
    free_text: Collection[str],
) -> bool:
    kind = type(value)
    if kind is str:
        (free if nul_ok else strict).append(value)
        return True
    if value is None or kind is int or kind is bool:
        return True
    if kind is float:
        return math.isfinite(value)
    if depth >= MAX_DEPTH:
        return False
    depth += 1
    if kind is dict:
        texts = free if nul_ok else strict
        for key, child in value.items():
            if type(key) is not str:
                return False
            texts.append(key)
            if not _gather(child, depth, nul_ok, strict, free, free_text):
                return False
        return True
    if kind is list or kind is tuple:
        if value and isinstance(value[0], msgspec.Struct):
            first = type(value[0])
            if all(type(child) is first for child in value):
                return _gather_structs(value, first, depth, nul_ok, strict, free, free_text)
        return all(_gather(child, depth, nul_ok, strict, free, free_text) for child in value)
    if isinstance(value, msgspec.Struct):
        for name, shape in _shapes(type(value)):
            child = getattr(value, name)
            if shape is _TEXT and type(child) is str:
                (free if nul_ok or name in free_text else strict).append(child)
            elif shape is _SCALAR and _scalar(child):
                continue
            elif shape is _TEXTS and type(child) is list:
                texts = free if nul_ok or name in free_text else strict
                texts.extend(child)
                if not all(type(text) is str for text in child):
                    return False
            elif child is None or child is msgspec.UNSET or isinstance(child, datetime):
                continue
            elif not _gather(child, depth, nul_ok or name in free_text, strict, free, free_text):
                return False
        return True
    return False  # str or int subclasses, other types: the slow walk decides


def _gather_structs(
    items: list[Any] | tuple[Any, ...],
    kind: type[msgspec.Struct],
    depth: int,
    nul_ok: bool,
    strict: list[str],
    free: list[str],
    free_text: Collection[str],
) -> bool:
    """:func:`_gather` of many Structs of one type (a batch of drafts) a field at a time: the
    per-value type tests of a field's texts run in one comprehension instead of a call per
    record. Anything unexpected is walked value by value, as :func:`_gather` would."""
    if depth >= MAX_DEPTH:
        return False
    depth += 1
    for name, shape in _shapes(kind):
        values = [getattr(item, name) for item in items]
        free_field = nul_ok or name in free_text
        texts = free if free_field else strict
        if shape is _TEXT:
            present = [value for value in values if value is not None]
            if all(type(value) is str for value in present):
                texts += present
                continue
        elif shape is _TEXTS and all(type(value) is list for value in values):
            flat = [text for value in values for text in value]
            if all(type(text) is str for text in flat):
                texts += flat
                continue
        elif shape is _SCALAR and all(map(_scalar, values)):
            continue
        for child in values:
            if child is None or child is msgspec.UNSET or isinstance(child, datetime):
                continue
            if not _gather(child, depth, free_field, strict, free, free_text):
                return False
    return True


_TEXT, _TEXTS, _SCALAR, _OTHER = "text", "texts", "scalar", "other"


@functools.cache
def _shapes(kind: type[msgspec.Struct]) -> tuple[tuple[str, str], ...]:
    """Each field of a Struct type with the shape its type declares: text, a list of texts, a
    number or flag, or anything else. Declared, not guaranteed (a Struct built in Python is
    not converted), so the walk still looks at each value's type; the shape only spares it a
    recursion."""
    shapes = []
    for field in msgspec.inspect.type_info(kind).fields:  # type: ignore[attr-defined]
        declared = field.type
        options = declared.types if isinstance(declared, msgspec.inspect.UnionType) else (declared,)
        shape = _OTHER
        if all(map(_textual, options)):
            shape = _TEXT
        elif isinstance(declared, msgspec.inspect.ListType) and _textual(declared.item_type):
            shape = _TEXTS
        elif all(isinstance(option, _SCALARS) for option in options):
            shape = _SCALAR
        shapes.append((field.name, shape))
    return tuple(shapes)


_SCALARS = msgspec.inspect.BoolType | msgspec.inspect.IntType | msgspec.inspect.NoneType


def _textual(declared: msgspec.inspect.Type) -> bool:
    """Whether a value of this type is a text (or ``None``): a string, or a literal of strings."""
    if isinstance(declared, msgspec.inspect.LiteralType):
        return all(type(value) is str for value in declared.values)
    return isinstance(declared, msgspec.inspect.StrType | msgspec.inspect.NoneType)


def _scalar(value: Any) -> bool:
    """A value the walk has nothing to check in: no text, no float, no nesting."""
    kind = type(value)
    return value is None or kind is bool or kind is int


def check_record(record: MemoryItem | HistoryEntry) -> None:
    """Refuse an imported record (or history entry) that a write could never have stored, so
    one bad line cannot poison every later read, export or count of the store: the checks of
    :func:`check_input`, and timestamps that stay within the calendar in UTC (a store keeps
    them as UTC microseconds).

    Raises:
        MemoryStoreError: ``INVALID_INPUT`` naming the field.
    """
    check_input(record)
    items = [("", record)] if isinstance(record, MemoryItem) else [("record.", record.record)]
    if isinstance(record, HistoryEntry):
        _check_moment("at", record.at)
    for prefix, item in items:
        for name in TIMESTAMP_FIELDS:
            moment = getattr(item, name)
            if moment is not None:
                _check_moment(prefix + name, moment)


def _check_moment(name: str, moment: datetime) -> None:
    try:
        moment.astimezone(UTC)
    except (OverflowError, ValueError):
        raise MemoryStoreError(f"{name} is outside the calendar in UTC") from None


def _check_text(text: str, where: _Where, nul_ok: bool) -> None:
    if not nul_ok and "\x00" in text:
        raise _refused(where, "must not contain NUL characters")
    if not text.isascii():
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            raise _refused(where, "contains text that is not valid Unicode") from None


def _refused(where: _Where, problem: str) -> MemoryStoreError:
    return MemoryStoreError(f"{_spell(where)} {problem}")


def _spell(where: _Where) -> str:
    parts: list[str] = []
    while where is not None:
        where, step = where
        parts.append(f"[{step}]" if isinstance(step, int) else f".{step}")
    return "".join(reversed(parts)).removeprefix(".") or "input"
