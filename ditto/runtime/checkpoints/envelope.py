"""What the runtime writes into a checkpoint store, and the digests that make tampering visible.

An envelope is the reference's ``StateCheckpoint``: ``{format, scope, version, state, digest}``
where ``digest`` is the SHA-256 of the canonical JSON (sorted keys, no spaces) of the other
four fields. A graph run's finished tasks are records beside the envelope (one per task, so
recording a task costs one small append, not a rewrite of everything): each record value is
the hex SHA-256 of ``checkpoint id, task id, result`` followed by the result's JSON, so a
record edited, truncated or copied from another checkpoint is refused as well.

Digests detect corruption and edits by anyone who cannot recompute them; they are not a
signature (anyone with write access to the store can recompute a SHA-256). Keep the store as
private as the data in it.
"""

from __future__ import annotations

import hashlib
from typing import Any

import msgspec

from ditto.errors import DittoError, ErrorCode, InvalidInputError

__all__ = (
    "FORMAT",
    "Envelope",
    "canonical",
    "corrupt",
    "digest",
    "open_envelope",
    "open_record",
    "plain_json",
    "seal_envelope",
    "seal_record",
)

FORMAT = 1
"""The envelope format this runtime writes and reads."""

_DIGEST_HEX = 64


class Envelope(msgspec.Struct, frozen=True):
    """A checked envelope: its scope (``graph:<id>`` or ``loop:<id>``), version and state."""

    scope: str
    version: int
    state: dict[str, Any]


class _Sealed(msgspec.Struct, frozen=True):
    format: int
    scope: str
    version: int
    state: dict[str, Any]
    digest: str


def canonical(value: Any) -> bytes:
    """``value`` as canonical JSON: sorted keys, no spaces.

    Raises:
        InvalidInputError: ``value`` is not plain JSON data (checkpointed inputs, states and
            interrupt payloads must be).
    """
    try:
        return msgspec.json.encode(value, order="sorted")
    except RecursionError:
        raise InvalidInputError(
            "checkpointed values must be plain JSON data: it is nested too deeply"
        ) from None
    except (TypeError, ValueError, OverflowError) as exc:
        raise InvalidInputError(
            f"checkpointed values must be plain JSON data: {type(exc).__name__}: {exc}"
        ) from None


def plain_json(value: Any, what: str) -> bytes:
    """Canonical JSON of ``value``, refusing values JSON would change (tuples, sets, objects,
    integer keys): what a checkpoint gives back must be exactly what was saved.

    Raises:
        InvalidInputError: ``value`` would not come back equal.
    """
    try:
        if _deeper_than(value, MAX_DEPTH):
            raise RecursionError
        encoded = canonical(value)
        same = msgspec.json.decode(encoded) == value
    except RecursionError:
        raise InvalidInputError(
            f"{what} is nested too deeply to be checkpointed (at most {MAX_DEPTH} levels)"
        ) from None
    if not same:
        raise InvalidInputError(
            f"{what} must be plain JSON data (dicts with string keys, lists, strings, numbers, "
            "booleans, None) to be checkpointed: it would come back changed"
        )
    return encoded


MAX_DEPTH = 256
"""Most levels of lists and dicts a checkpointed value may nest. A fixed bound, not Python's
recursion limit: the envelope nests the value a few levels deeper, and it is decoded again on
threads whose stacks are already deep, so a value just under the limit where it was checked
would overflow where it is read."""


def _deeper_than(value: Any, limit: int) -> bool:
    """Whether ``value`` nests lists and dicts more than ``limit`` levels (without recursing)."""
    pending = [(value, 1)]
    while pending:
        item, depth = pending.pop()
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, list | tuple):
            children = item
        else:
            continue
        if depth > limit:
            return True
        pending.extend((child, depth + 1) for child in children)
    return False


def digest(*parts: bytes) -> str:
    """Hex SHA-256 over ``parts`` separated by NUL bytes."""
    return hashlib.sha256(b"\0".join(parts)).hexdigest()


def corrupt(what: str) -> DittoError:
    """The error for content whose digest does not match (never shows the content)."""
    return DittoError(f"{what}: the digest does not match", code=ErrorCode.CHECKPOINT_CORRUPT)


def seal_envelope(scope: str, version: int, state: dict[str, Any]) -> bytes:
    """The envelope bytes for ``state`` (plain JSON; see :func:`canonical`)."""
    body = {"format": FORMAT, "scope": scope, "state": state, "version": version}
    return canonical({**body, "digest": digest(canonical(body))})


def open_envelope(raw: bytes, checkpoint_id: str) -> Envelope:
    """Check and decode an envelope.

    Raises:
        DittoError: ``CHECKPOINT_CORRUPT`` when it is not an envelope of this format or its
            digest does not match.
    """
    try:
        sealed = msgspec.json.decode(raw, type=_Sealed)
    except msgspec.DecodeError:
        raise corrupt(f"checkpoint {checkpoint_id!r} is not a checkpoint envelope") from None
    if sealed.format != FORMAT:
        raise corrupt(f"checkpoint {checkpoint_id!r} has format {sealed.format}, not {FORMAT}")
    body = {
        "format": sealed.format,
        "scope": sealed.scope,
        "state": sealed.state,
        "version": sealed.version,
    }
    if digest(canonical(body)) != sealed.digest:
        raise corrupt(f"checkpoint {checkpoint_id!r}")
    return Envelope(sealed.scope, sealed.version, sealed.state)


def seal_record(checkpoint_id: str, key: str, payload: bytes) -> bytes:
    """A record value: the digest of ``(checkpoint_id, key, payload)``, then ``payload``."""
    tag = digest(checkpoint_id.encode(), key.encode(), payload)
    return tag.encode("ascii") + payload


def open_record(checkpoint_id: str, key: str, value: bytes) -> bytes:
    """The payload of a record, checked.

    Raises:
        DittoError: ``CHECKPOINT_CORRUPT`` when the digest does not match.
    """
    tag, payload = value[:_DIGEST_HEX], value[_DIGEST_HEX:]
    if digest(checkpoint_id.encode(), key.encode(), payload).encode("ascii") != tag:
        raise corrupt(f"checkpoint {checkpoint_id!r}, record {key!r}")
    return payload
