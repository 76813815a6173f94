"""Text hidden in base64 inside a text, for the prompt-injection rows of the safety stage.

An instruction encoded in base64 reads as noise to a person and to every pattern, and as
plain text to a model asked to decode it ("decode this and do what it says"). A token of
base64's alphabet (standard or URL-safe, :data:`MIN_ENCODED` characters or more) that decodes
to readable UTF-8 text with a space in it is scanned by the injection rows; an injection found
there is reported over the whole token, and the ``high_entropy`` guess over the same token is
dropped (it is encoded text, not a random secret). Keys, hashes and other binary-decoding
tokens fail the readable-text test, so they cost one failed decode each.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Callable

from workers.memory.policy.safety_redact import Finding

__all__ = ("MIN_ENCODED", "with_encoded_injections")

MIN_ENCODED = 24
"""The shortest token read as base64 (18 bytes of text: "ignore all previous" needs more)."""
_TOKEN = re.compile(
    rf"(?<![A-Za-z0-9+/_\-])[A-Za-z0-9+/_\-]{{{MIN_ENCODED},}}={{0,2}}(?![A-Za-z0-9+/=_\-])"
)
_READABLE = 0.95
"""The share of printable characters (line breaks and tabs count) decoded text must have."""


def with_encoded_injections(
    text: str, found: list[Finding], injects: Callable[[str], bool], longest: int = -1
) -> list[Finding]:
    """``found`` with an ``injection`` finding over each base64 token of ``text`` whose
    decoded text ``injects`` (the scanner's injection rows, on its de-obfuscated view too)
    finds an injection in, and without the ``high_entropy`` findings overlapping it.
    ``longest``: the text's longest run without whitespace, if the caller measured it."""
    if longest < 0:
        longest = max(map(len, text.split()), default=0)
    if longest < MIN_ENCODED:
        return found
    hidden = [
        Finding("injection", match.start(), match.end())
        for match in _TOKEN.finditer(text)
        if (decoded := _decoded(match[0])) is not None and injects(decoded)
    ]
    if not hidden:
        return found
    kept = [
        finding
        for finding in found
        if finding.kind != "high_entropy"
        or not any(finding.start < h.end and h.start < finding.end for h in hidden)
    ]
    return kept + hidden


def _decoded(token: str) -> str | None:
    """The readable text ``token`` encodes in base64, or ``None``."""
    bare = token.rstrip("=")
    if len(bare) % 4 == 1:  # no base64 string has this length
        return None
    padded = bare + "=" * (-len(bare) % 4)
    urlsafe = "-" in bare or "_" in bare
    try:
        data = base64.b64decode(padded, altchars=b"-_" if urlsafe else None, validate=True)
        decoded = data.decode("utf-8")
    except (binascii.Error, ValueError):  # UnicodeDecodeError is a ValueError
        return None
    if " " not in decoded:
        return None
    readable = sum(char.isprintable() or char in "\n\r\t" for char in decoded)
    return decoded if readable >= _READABLE * len(decoded) else None
