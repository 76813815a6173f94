"""The record file: front matter with every field but the content, then the content as the
Markdown body.

::

    ---
    id: "0192f0c4-..."
    key: "user_timezone"
    namespace: "default"
    summary: null
    tags: ["profile"]
    ...
    ---
    The user is located in UTC+8.

Each front matter line is ``name: <JSON value>`` in :class:`MemoryItem`'s field order: valid
YAML too, yet read and written with msgspec alone (no YAML on a store's path), one field per
line so a change touches one line of a diff. A person may leave strings unquoted (a value that
is not JSON is read as a string), drop fields (a new record gets defaults) and leave out the
front matter altogether. Text content is the body exactly (a final newline is added, and one
is taken off when read, so files end in one); any other JSON value — or text no UTF-8 file
can hold — is a fenced ```` ```json ```` block, flagged by a ``content: json`` line so a text
that merely looks like such a block stays text.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import msgspec

from workers.memory.model.contracts import MemoryItem

__all__ = ("FIELDS", "MalformedFileError", "RecordFile", "parse", "render", "to_item")

FIELDS = tuple(name for name in MemoryItem.__struct_fields__ if name != "content")
"""The front matter's fields, in the order they are written."""
_JSON_MARK = "json"
_FENCE_OPEN = "```json"
_FENCE_CLOSE = "```"
_FRONT = re.compile(r"---\r?\n((?:.*\n)*?)---[ \t]*(?:\r?\n|\Z)")
_LINE = re.compile(r"([A-Za-z_]+)[ \t]*:[ \t]?(.*)")

_encode = msgspec.json.Encoder()
_encode_sorted = msgspec.json.Encoder(order="sorted")
_decode_item = msgspec.json.Decoder(MemoryItem)


class MalformedFileError(Exception):
    """A record file the store cannot read (the message says why, never the content)."""


@dataclass(frozen=True, slots=True)
class RecordFile:
    """What a record file says, before it is a record."""

    fields: Mapping[str, bytes]
    """Front matter name -> its value as JSON (only the names the file gives)."""
    content: Any


def render(item: MemoryItem) -> bytes:
    """The file of ``item``: the same record always gives the same bytes."""
    values = msgspec.to_builtins(item)
    lines = ["---"]
    lines.extend(f"{name}: {_encode_sorted.encode(values[name]).decode()}" for name in FIELDS)
    body = _text_body(item.content)
    if body is None:
        lines.append(f"content: {_JSON_MARK}")
        # Key order kept: the content comes back exactly as it was written.
        block = msgspec.json.format(_encode.encode(item.content), indent=2).decode()
        body = f"{_FENCE_OPEN}\n{block}\n{_FENCE_CLOSE}\n"
    lines.append("---")
    return ("\n".join(lines) + "\n" + body).encode("utf-8")


def _text_body(content: Any) -> str | None:
    if not isinstance(content, str):
        return None
    try:
        content.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate: only JSON escapes can hold it
        return None
    return content + "\n"


def parse(data: bytes) -> RecordFile:
    """Read a record file.

    Raises:
        MalformedFileError: Not UTF-8, a front matter line that is not ``name: value``, a name
            given twice, or a ``content: json`` body that is not one fenced JSON block.
    """
    try:
        text = data.decode("utf-8").removeprefix("\ufeff")  # a byte-order mark some editors add
    except UnicodeDecodeError as exc:
        raise MalformedFileError(f"not UTF-8 text (byte {exc.start})") from None
    match = _FRONT.match(text)
    fields: dict[str, bytes] = {}
    json_body = False
    body = text
    if match is not None:
        body = text[match.end() :]
        # "\n" only: str.splitlines would also split at U+0085 or U+2028, which JSON leaves
        # unescaped inside a string.
        for number, line in enumerate(match.group(1).split("\n"), start=2):
            line = line.rstrip("\r")
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            parsed = _LINE.fullmatch(line)
            if parsed is None:
                raise MalformedFileError(f"line {number} is not 'name: value'")
            name, value = parsed.group(1), parsed.group(2).strip()
            if name in fields or (name == "content" and json_body):
                raise MalformedFileError(f"line {number}: {name!r} is given twice")
            if name == "content":
                if value.strip("\"'") != _JSON_MARK:
                    raise MalformedFileError(f"line {number}: content can only say 'json'")
                json_body = True
                continue
            fields[name] = _json_value(value, number)
    if json_body:
        return RecordFile(fields, _json_content(body))
    # An editor that saved the file with Windows line endings ended it with "\r\n", not the
    # "\n" the store writes (the body's own line endings are the content's).
    crlf = match is not None and match.group(0).endswith("\r\n") and body.endswith("\r\n")
    return RecordFile(fields, body[:-2] if crlf else body[:-1] if body.endswith("\n") else body)


def _json_value(value: str, number: int) -> bytes:
    raw = value.encode("utf-8")
    try:
        msgspec.json.decode(raw)
    except msgspec.DecodeError:
        if len(value) >= 2 and value[0] == value[-1] == "'":  # YAML's single-quoted string
            return _encode.encode(value[1:-1].replace("''", "'"))
        if value.startswith('"'):  # a quoted string not closed: never part of the value
            raise MalformedFileError(f"line {number}: a quoted value is not closed") from None
        return _encode.encode(value)  # a person's unquoted string
    return raw


def _json_content(body: str) -> Any:
    block = body.strip()
    if not (block.startswith(_FENCE_OPEN + "\n") and block.endswith("\n" + _FENCE_CLOSE)):
        raise MalformedFileError("the body of a 'content: json' file is not one ```json block")
    try:
        return msgspec.json.decode(block[len(_FENCE_OPEN) : -len(_FENCE_CLOSE)].encode("utf-8"))
    except msgspec.DecodeError as exc:
        raise MalformedFileError(f"the ```json block is not JSON: {exc}") from None


def to_item(fields: Mapping[str, bytes], content: Any) -> MemoryItem:
    """The record ``fields`` (JSON values, every required one present) and ``content`` make.

    Raises:
        MalformedFileError: A field missing, unknown or of the wrong type (msgspec's message
            names it).
    """
    parts = {name: msgspec.Raw(value) for name, value in fields.items()}
    try:
        return _decode_item.decode(_encode.encode({**parts, "content": content}))
    except (msgspec.ValidationError, msgspec.DecodeError) as exc:
        raise MalformedFileError(str(exc)) from None
