"""The sealed envelopes: what one side seals the other opens; anything else is refused before it
is decoded; bodies are private; secrets rotate."""

from __future__ import annotations

from collections.abc import Callable

import msgspec
import pytest

from ditto import ConfigError, DittoError, ErrorCode, ErrorInfo
from ditto.runtime.transports.envelope import (
    DEFAULT_MAX_BYTES,
    PREVIOUS_SECRET_VARIABLE,
    SECRET_VARIABLE,
    CallEnvelope,
    CancelNotice,
    ReplyEnvelope,
    Signer,
)

SECRET = b"0123456789abcdef0123456789abcdef"
OTHER_SECRET = b"fedcba9876543210fedcba9876543210"


def call(payload: object = None, *, execution_id: str = "exec-1") -> CallEnvelope:
    return CallEnvelope(
        execution_id,
        "PROBE.WORK",
        msgspec.Raw(msgspec.msgpack.encode({"n": 1} if payload is None else payload)),
        1_900_000_000.5,
        "alice",
        ("graph", "run", "task"),
        1,
        "ditto:replies:caller",
    )


def reply() -> ReplyEnvelope:
    return ReplyEnvelope(
        "exec-1",
        "failed",
        msgspec.Raw(msgspec.msgpack.encode(None)),
        ErrorInfo("NOT_FOUND", "no such thing", False, {"id": "x"}),
        "w1",
        2,
        1.5,
        20.25,
    )


def test_what_one_signer_seals_another_with_the_same_secret_opens() -> None:
    sealed = Signer(SECRET).seal(call())
    opened = Signer(SECRET).open(sealed, CallEnvelope)
    assert opened == call()
    assert msgspec.msgpack.decode(opened.input) == {"n": 1}
    assert opened.execution == ("graph", "run", "task")
    assert Signer(SECRET).open(Signer(SECRET).seal(reply()), ReplyEnvelope) == reply()


def _flip_tag(sealed: bytes) -> bytes:
    return bytes([sealed[0] ^ 0x01]) + sealed[1:]


def _flip_body(sealed: bytes) -> bytes:
    return sealed[:-1] + bytes([sealed[-1] ^ 0x01])


TAMPERING: dict[str, Callable[[bytes], bytes]] = {
    "flipped-tag-byte": _flip_tag,
    "flipped-body-byte": _flip_body,
    "truncated-body": lambda sealed: sealed[:-1],
    "truncated-into-tag": lambda sealed: sealed[:20],
    "empty": lambda sealed: b"",
    "unsigned-body": lambda sealed: sealed[32:],
    "appended-byte": lambda sealed: sealed + b"\x00",
}


@pytest.mark.parametrize("tamper", TAMPERING.values(), ids=TAMPERING.keys())
def test_a_tampered_message_is_rejected(tamper: Callable[[bytes], bytes]) -> None:
    signer = Signer(SECRET)
    with pytest.raises(DittoError) as caught:
        signer.open(tamper(signer.seal(call())), CallEnvelope)
    assert caught.value.code == ErrorCode.MESSAGE_REJECTED


def test_a_message_signed_with_another_secret_is_rejected() -> None:
    with pytest.raises(DittoError) as caught:
        Signer(SECRET).open(Signer(OTHER_SECRET).seal(call()), CallEnvelope)
    assert caught.value.code == ErrorCode.MESSAGE_REJECTED


def test_a_signed_message_of_another_kind_is_rejected() -> None:
    signer = Signer(SECRET)
    with pytest.raises(DittoError) as caught:
        signer.open(signer.seal(reply()), CallEnvelope)
    assert caught.value.code == ErrorCode.MESSAGE_REJECTED


def test_an_oversized_message_is_neither_sealed_nor_opened() -> None:
    small = Signer(SECRET, max_bytes=200)
    big = call("x" * 500)
    with pytest.raises(DittoError) as sealing:
        small.seal(big)
    assert sealing.value.code == ErrorCode.MESSAGE_REJECTED
    # Correctly signed, but over the receiver's cap: refused before the tag is even checked.
    sealed = Signer(SECRET).seal(big)
    with pytest.raises(DittoError) as opening:
        small.open(sealed, CallEnvelope)
    assert opening.value.code == ErrorCode.MESSAGE_REJECTED
    assert Signer(SECRET).open(sealed, CallEnvelope) == big


def test_the_default_cap_is_one_mebibyte() -> None:
    signer = Signer(SECRET)
    assert signer.max_bytes == DEFAULT_MAX_BYTES == 1 << 20
    with pytest.raises(DittoError) as caught:
        signer.seal(call(b"\x00" * DEFAULT_MAX_BYTES))
    assert caught.value.code == ErrorCode.MESSAGE_REJECTED


def test_a_rejection_names_no_secret_and_no_content() -> None:
    signer = Signer(SECRET)
    with pytest.raises(DittoError) as caught:
        signer.open(Signer(OTHER_SECRET).seal(call("payload-text")), CallEnvelope)
    text = str(caught.value)
    assert SECRET.decode() not in text
    assert OTHER_SECRET.decode() not in text
    assert "payload-text" not in text


@pytest.mark.parametrize("secret", [b"", b"short", b"x" * 15])
def test_a_secret_under_sixteen_bytes_is_a_config_error(secret: bytes) -> None:
    with pytest.raises(ConfigError):
        Signer(secret)


def test_sixteen_bytes_is_enough() -> None:
    signer = Signer(b"x" * 16)
    assert signer.open(signer.seal(call()), CallEnvelope) == call()


@pytest.mark.parametrize(
    "environ",
    [{}, {SECRET_VARIABLE: ""}, {SECRET_VARIABLE: "too-short"}],
    ids=["missing", "empty", "short"],
)
def test_from_environment_refuses_a_missing_or_short_secret(environ: dict[str, str]) -> None:
    with pytest.raises(ConfigError) as caught:
        Signer.from_environment(environ)
    assert SECRET_VARIABLE in str(caught.value)
    assert "too-short" not in str(caught.value)


def test_from_environment_signs_with_the_variable() -> None:
    signer = Signer.from_environment({SECRET_VARIABLE: SECRET.decode()})
    assert Signer(SECRET).open(signer.seal(call()), CallEnvelope) == call()
    with pytest.raises(DittoError):
        Signer(OTHER_SECRET).open(signer.seal(call()), CallEnvelope)


# ----------------------------------------------------------------- privacy and rotation


def test_a_sealed_call_shows_nothing_of_its_body() -> None:
    sealed = Signer(SECRET).seal(call("input-marker"))
    for clear in (b"input-marker", b"alice", b"ditto:replies:caller", b"PROBE.WORK", b"exec-1"):
        assert clear not in sealed


def test_each_seal_uses_a_fresh_nonce() -> None:
    signer = Signer(SECRET)
    first, second = signer.seal(call()), signer.seal(call())
    assert first != second
    assert signer.open(first, CallEnvelope) == signer.open(second, CallEnvelope) == call()


def test_a_sealed_reply_cannot_be_opened_as_a_cancel_notice() -> None:
    signer = Signer(SECRET)
    notice = CancelNotice("exec-1")
    assert signer.open(signer.seal(notice), CancelNotice) == notice
    for sealed, kind in ((signer.seal(reply()), CancelNotice), (signer.seal(notice), CallEnvelope)):
        with pytest.raises(DittoError) as caught:
            signer.open(sealed, kind)
        assert caught.value.code == ErrorCode.MESSAGE_REJECTED


def test_a_rotating_signer_seals_with_the_current_secret_and_opens_either() -> None:
    rotating = Signer(SECRET, previous=OTHER_SECRET)
    assert Signer(SECRET).open(rotating.seal(call()), CallEnvelope) == call()
    with pytest.raises(DittoError):
        Signer(OTHER_SECRET).open(rotating.seal(call()), CallEnvelope)
    assert rotating.open_keyed(Signer(SECRET).seal(call()), CallEnvelope) == (call(), 0)
    assert rotating.open_keyed(Signer(OTHER_SECRET).seal(call()), CallEnvelope) == (call(), 1)
    # An answer under the key that opened the message reaches a side that has not rotated.
    assert Signer(OTHER_SECRET).open(rotating.seal(reply(), key=1), ReplyEnvelope) == reply()


def test_a_third_secret_opens_with_neither() -> None:
    rotating = Signer(SECRET, previous=OTHER_SECRET)
    with pytest.raises(DittoError) as caught:
        rotating.open(Signer(b"a-third-secret-0123456789").seal(call()), CallEnvelope)
    assert caught.value.code == ErrorCode.MESSAGE_REJECTED


def test_fingerprints_name_both_secrets_and_reveal_neither() -> None:
    rotating = Signer(SECRET, previous=OTHER_SECRET)
    assert rotating.fingerprint == Signer(SECRET).fingerprint
    assert rotating.fingerprints == (Signer(SECRET).fingerprint, Signer(OTHER_SECRET).fingerprint)
    assert Signer(SECRET).fingerprints == (Signer(SECRET).fingerprint,)
    assert Signer(SECRET, previous=SECRET).fingerprints == (Signer(SECRET).fingerprint,)
    assert Signer(SECRET).fingerprint != Signer(OTHER_SECRET).fingerprint
    for fingerprint in rotating.fingerprints:
        assert SECRET.hex()[:16] not in fingerprint
        assert OTHER_SECRET.hex()[:16] not in fingerprint


def test_from_environment_reads_the_previous_secret() -> None:
    signer = Signer.from_environment(
        {SECRET_VARIABLE: SECRET.decode(), PREVIOUS_SECRET_VARIABLE: OTHER_SECRET.decode()}
    )
    assert signer.fingerprints == Signer(SECRET, previous=OTHER_SECRET).fingerprints
    blank = Signer.from_environment(
        {SECRET_VARIABLE: SECRET.decode(), PREVIOUS_SECRET_VARIABLE: ""}
    )
    assert blank.fingerprints == (Signer(SECRET).fingerprint,)
    with pytest.raises(ConfigError) as caught:
        Signer.from_environment(
            {SECRET_VARIABLE: SECRET.decode(), PREVIOUS_SECRET_VARIABLE: "too-short"}
        )
    assert PREVIOUS_SECRET_VARIABLE in str(caught.value)
    assert "too-short" not in str(caught.value)
