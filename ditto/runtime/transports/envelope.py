"""What crosses the wire between a runtime and a remote worker, and how it is signed.

A call and a reply are msgspec Structs encoded as MessagePack, then sealed: the HMAC-SHA256 of
the bytes under a shared secret (``DITTO_REMOTE_SECRET``) comes first, the bytes follow. A
message whose tag does not match — forged, edited, unsigned, signed with another secret — is
refused before it is decoded, and a message over the size cap before it is even checked.

The input and output travel as MessagePack of the node's wire types (``msgspec.Raw``), so each
side converts them with its own contract: the caller validated the input before sending, the
worker validates it again (never trust the wire).
"""

from __future__ import annotations

import hashlib
import hmac
import os
from typing import Any, Literal

import msgspec

from ditto.errors import ConfigError, DittoError, ErrorCode, ErrorInfo

__all__ = (
    "DEFAULT_MAX_BYTES",
    "SECRET_VARIABLE",
    "CallEnvelope",
    "ReplyEnvelope",
    "Signer",
)

SECRET_VARIABLE = "DITTO_REMOTE_SECRET"
DEFAULT_MAX_BYTES = 1 << 20
"""Largest sealed message either side accepts (1 MiB)."""
_MIN_SECRET_BYTES = 16
_TAG_BYTES = 32


class CallEnvelope(msgspec.Struct, frozen=True, array_like=True):
    """One remote invocation."""

    execution_id: str
    node_type: str
    input: msgspec.Raw
    """MessagePack of the validated input."""
    deadline: float
    """Absolute, in Unix seconds: a worker never starts the call after it (hosts keep their
    clocks in sync, e.g. NTP)."""
    principal: str | None
    execution: tuple[str, str, str] | None
    """Graph id, run id and task id when the call is a task of a graph run."""
    attempt: int
    """1 when sent; a worker that takes over a dead worker's call runs it with attempt + 1."""
    reply_to: str
    """The stream the caller reads replies from."""
    idempotency_key: str | None = None
    """The call's ``ctx.idempotency_key`` (last and optional: older callers' envelopes still
    decode, and the worker then uses the execution id)."""


class ReplyEnvelope(msgspec.Struct, frozen=True, array_like=True):
    """The outcome of one remote invocation, as the worker's runtime reported it."""

    execution_id: str
    status: Literal["success", "failed", "cancelled", "timeout"]
    output: msgspec.Raw
    """MessagePack of the output (``nil`` unless the status is ``success``)."""
    error: ErrorInfo | None
    worker_id: str
    attempt: int
    queue_ms: float
    """From the call being sent to a worker taking it."""
    run_ms: float
    """Inside the worker's runtime."""


class Signer:
    """Seals and opens messages with one secret.

    Args:
        secret: At least 16 bytes; from :meth:`from_environment` in practice.
        max_bytes: The size cap for sealed messages.
    """

    __slots__ = ("_key", "max_bytes")

    def __init__(self, secret: bytes, max_bytes: int = DEFAULT_MAX_BYTES) -> None:
        if len(secret) < _MIN_SECRET_BYTES:
            raise ConfigError(
                f"{SECRET_VARIABLE} must be at least {_MIN_SECRET_BYTES} bytes: use a long "
                "random value, e.g. the output of `openssl rand -hex 32`"
            )
        self._key = secret
        self.max_bytes = max_bytes

    @property
    def fingerprint(self) -> str:
        """Names the secret without revealing it (an HMAC of a fixed text under it): workers
        announce it, so a caller refuses at once to send calls no live worker could verify."""
        return hmac.new(self._key, b"ditto remote key fingerprint", hashlib.sha256).hexdigest()[:16]

    @classmethod
    def from_environment(cls, environ: dict[str, str] | None = None) -> Signer:
        """The signer for ``DITTO_REMOTE_SECRET``.

        Raises:
            ConfigError: The variable is missing or too short (remote workers refuse to run
                unsigned).
        """
        value = (os.environ if environ is None else environ).get(SECRET_VARIABLE, "")
        if not value:
            raise ConfigError(
                f"remote workers need a shared secret: set {SECRET_VARIABLE} to the same long "
                "random value on every runtime and worker"
            )
        return cls(value.encode())

    def seal(self, message: msgspec.Struct) -> bytes:
        """The message, encoded and signed.

        Raises:
            DittoError: ``MESSAGE_REJECTED`` when it is over the size cap.
        """
        body = msgspec.msgpack.encode(message)
        if len(body) + _TAG_BYTES > self.max_bytes:
            raise DittoError(
                f"the message is {len(body):,} bytes, over the {self.max_bytes:,}-byte cap",
                code=ErrorCode.MESSAGE_REJECTED,
            )
        return hmac.digest(self._key, body, hashlib.sha256) + body

    def open(self, sealed: bytes, kind: type[Any]) -> Any:
        """Check and decode a sealed message of type ``kind``.

        Raises:
            DittoError: ``MESSAGE_REJECTED`` for a message over the cap, with a tag that does
                not match, or that does not decode as ``kind``.
        """
        if len(sealed) > self.max_bytes:
            raise _rejected("it is over the size cap")
        tag, body = sealed[:_TAG_BYTES], sealed[_TAG_BYTES:]
        if len(tag) < _TAG_BYTES or not hmac.compare_digest(
            tag, hmac.digest(self._key, body, hashlib.sha256)
        ):
            raise _rejected("its signature does not match")
        try:
            return msgspec.msgpack.decode(body, type=kind)
        except msgspec.DecodeError:
            raise _rejected("it is not a valid message") from None


def _rejected(why: str) -> DittoError:
    return DittoError(f"message rejected: {why}", code=ErrorCode.MESSAGE_REJECTED)
