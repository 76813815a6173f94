"""What crosses the wire between a runtime and a remote worker, and how it is sealed.

A call, a reply and a cancel notice are msgspec Structs encoded as MessagePack, then sealed with
ChaCha20-Poly1305 (an AEAD: encrypted *and* authenticated) under a key derived from the shared
secret ``DITTO_REMOTE_SECRET`` with HKDF-SHA256. A sealed message is a version byte, a random
12-byte nonce, and the ciphertext with its 16-byte tag; the associated data names the message's
kind (call, reply, cancel), so a sealed reply can never be passed off as a call. Redis readers
see neither the input, the principal, the graph scope nor the reply stream. A message that does
not open — forged, edited, sealed under another secret, of another kind — is refused before it
is decoded, and one over the size cap before it is even checked.

Key rotation without downtime: ``DITTO_REMOTE_SECRET_PREVIOUS`` names the secret being retired.
A signer seals with the current secret and opens with either; a worker answers a call under the
key that opened it, so callers not yet rotated still read their replies. Workers announce the
fingerprints of both (a second HKDF key, never the encryption key), so a caller refuses at once
a call no live worker could open.

The input and output travel as MessagePack of the node's wire types (``msgspec.Raw``), so each
side converts them with its own contract: the caller validated the input before sending, the
worker validates it again (never trust the wire).
"""

from __future__ import annotations

import hashlib
import hmac
import os
from typing import TYPE_CHECKING, Any, Literal

import msgspec

from ditto.errors import ConfigError, DittoError, ErrorCode, ErrorInfo

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.ciphers.aead import ChaCha20Poly1305

__all__ = (
    "DEFAULT_MAX_BYTES",
    "PREVIOUS_SECRET_VARIABLE",
    "SECRET_VARIABLE",
    "CallEnvelope",
    "CancelNotice",
    "ReplyEnvelope",
    "Signer",
)

SECRET_VARIABLE = "DITTO_REMOTE_SECRET"
PREVIOUS_SECRET_VARIABLE = "DITTO_REMOTE_SECRET_PREVIOUS"
DEFAULT_MAX_BYTES = 1 << 20
"""Largest sealed message either side accepts (1 MiB)."""
_MIN_SECRET_BYTES = 16
_VERSION = b"\x02"
_NONCE_BYTES = 12
_OVERHEAD = len(_VERSION) + _NONCE_BYTES + 16


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
    entry_id: str | None = None
    """The stream entry id the caller chose for this call (``"<ms>-<seq>"``), sealed so that a
    worker can tell the entry it was sent as from any copy added later: a stream never accepts an
    id twice, so only that first entry carries it. ``None`` from older callers, and the entry's
    id differs when Redis refused the chosen one (another caller's entry was newer); either way
    the worker then checks the call in Redis (:mod:`ditto.adapters.redis.admission`)."""
    answer: tuple[msgspec.Raw] | None = None
    """MessagePack of the answer given to ``runtime.resume`` when the call resumes an
    interrupted task (the handler's ``ctx.resume_value``), in a one-item array so that an
    answer of ``None`` is told apart from none; ``None`` when the call resumes nothing. Last
    and optional, like the fields before it."""


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


class CancelNotice(msgspec.Struct, frozen=True, array_like=True):
    """A caller abandoned a call (sealed like the others, so nobody without the key can cancel
    another's call)."""

    execution_id: str


_KINDS: dict[type[Any], bytes] = {
    CallEnvelope: b"ditto call",
    ReplyEnvelope: b"ditto reply",
    CancelNotice: b"ditto cancel",
}
"""The associated data of each message kind."""


class _Key:
    """One secret's derived keys: the cipher, and the fingerprint that names it."""

    __slots__ = ("aead", "fingerprint", "invalid")

    aead: ChaCha20Poly1305
    fingerprint: str
    invalid: type[Exception]

    def __init__(self, secret: bytes) -> None:
        if len(secret) < _MIN_SECRET_BYTES:
            raise ConfigError(
                f"{SECRET_VARIABLE} must be at least {_MIN_SECRET_BYTES} bytes: use a long "
                "random value, e.g. the output of `openssl rand -hex 32`"
            )
        # Loaded here, not at import: `import ditto` must not pay for a cipher library that
        # only remote workers use.
        from cryptography.exceptions import InvalidTag
        from cryptography.hazmat.primitives.ciphers.aead import ChaCha20Poly1305

        self.invalid = InvalidTag
        self.aead = ChaCha20Poly1305(_derive(secret, b"ditto remote envelope encryption v2"))
        self.fingerprint = hmac.new(
            _derive(secret, b"ditto remote key fingerprint v2"),
            b"ditto remote key fingerprint",
            hashlib.sha256,
        ).hexdigest()[:16]


def _derive(secret: bytes, info: bytes) -> bytes:
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.kdf.hkdf import HKDF

    return HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=info).derive(secret)


class Signer:
    """Seals and opens messages with the current secret (and opens with the previous one).

    Args:
        secret: At least 16 bytes; from :meth:`from_environment` in practice.
        max_bytes: The size cap for sealed messages.
        previous: The secret being retired (opened, announced, never sealed with unless a
            message that it opened is answered).
    """

    __slots__ = ("_keys", "max_bytes")

    def __init__(
        self, secret: bytes, max_bytes: int = DEFAULT_MAX_BYTES, *, previous: bytes | None = None
    ) -> None:
        keys = [_Key(secret)]
        if previous is not None and previous != secret:
            keys.append(_Key(previous))
        self._keys = tuple(keys)
        self.max_bytes = max_bytes

    @property
    def fingerprint(self) -> str:
        """Names the current secret without revealing it (an HMAC of a fixed text under a key
        derived for that alone): callers look for a live worker announcing it."""
        return self._keys[0].fingerprint

    @property
    def fingerprints(self) -> tuple[str, ...]:
        """The current secret's fingerprint, then the previous one's (what a worker announces:
        every caller holding either can reach it)."""
        return tuple(key.fingerprint for key in self._keys)

    @classmethod
    def from_environment(cls, environ: dict[str, str] | None = None) -> Signer:
        """The signer for ``DITTO_REMOTE_SECRET`` (and ``DITTO_REMOTE_SECRET_PREVIOUS`` when set
        and not empty).

        Raises:
            ConfigError: The variable is missing or too short (remote workers refuse to run
                unsealed), or the previous secret is too short.
        """
        variables = os.environ if environ is None else environ
        value = variables.get(SECRET_VARIABLE, "")
        if not value:
            raise ConfigError(
                f"remote workers need a shared secret: set {SECRET_VARIABLE} to the same long "
                "random value on every runtime and worker"
            )
        previous = variables.get(PREVIOUS_SECRET_VARIABLE, "")
        try:
            return cls(value.encode(), previous=previous.encode() if previous else None)
        except ConfigError:
            if previous and len(previous.encode()) < _MIN_SECRET_BYTES:
                raise ConfigError(
                    f"{PREVIOUS_SECRET_VARIABLE} must be at least {_MIN_SECRET_BYTES} bytes "
                    "(it is the secret being retired, as long as the current one)"
                ) from None
            raise

    def seal(self, message: msgspec.Struct, *, key: int = 0) -> bytes:
        """The message, encoded, encrypted and authenticated.

        Args:
            key: 0 for the current secret; the index :meth:`open_keyed` returned to answer a
                message under the key that opened it.

        Raises:
            DittoError: ``MESSAGE_REJECTED`` when it is over the size cap.
        """
        body = msgspec.msgpack.encode(message)
        if len(body) + _OVERHEAD > self.max_bytes:
            raise DittoError(
                f"the message is {len(body):,} bytes, over the {self.max_bytes:,}-byte cap",
                code=ErrorCode.MESSAGE_REJECTED,
            )
        nonce = os.urandom(_NONCE_BYTES)
        sealed = self._keys[key].aead.encrypt(nonce, body, _KINDS[type(message)])
        return _VERSION + nonce + sealed

    def open(self, sealed: bytes, kind: type[Any]) -> Any:
        """Check, decrypt and decode a sealed message of type ``kind``.

        Raises:
            DittoError: ``MESSAGE_REJECTED`` for a message over the cap, that no key opens, or
                that does not decode as ``kind``.
        """
        return self.open_keyed(sealed, kind)[0]

    def open_keyed(self, sealed: bytes, kind: type[Any]) -> tuple[Any, int]:
        """:meth:`open`, and which key opened it (0 current, 1 previous) — to answer under it.

        Raises:
            DittoError: ``MESSAGE_REJECTED`` as :meth:`open`.
        """
        if len(sealed) > self.max_bytes:
            raise _rejected("it is over the size cap")
        if len(sealed) < _OVERHEAD or sealed[:1] != _VERSION:
            raise _rejected("it is not a sealed message")
        nonce, ciphertext = sealed[1 : 1 + _NONCE_BYTES], sealed[1 + _NONCE_BYTES :]
        associated = _KINDS[kind]
        for index, key in enumerate(self._keys):
            try:
                body = key.aead.decrypt(nonce, ciphertext, associated)
            except key.invalid:
                continue
            try:
                return msgspec.msgpack.decode(body, type=kind), index
            except (msgspec.DecodeError, msgspec.ValidationError):
                raise _rejected("it is not a valid message") from None
        raise _rejected("it does not open with this secret (forged, edited or another key)")


def _rejected(why: str) -> DittoError:
    return DittoError(f"message rejected: {why}", code=ErrorCode.MESSAGE_REJECTED)
