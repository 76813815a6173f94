"""Validators a regex match must pass before it counts: checksums, structure and entropy.

A regex finds what *looks like* a card or a token; these functions decide whether it is one.
Each takes the matched text (and the rules, for the thresholds) and returns a bool; the
scanner looks them up by the name a pattern row gives in ``check``.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
import re
from collections.abc import Callable, Mapping

from workers.memory.policy.safety_patterns import CARD_PREFIXES, IBAN_LENGTHS
from workers.memory.policy.safety_rules import SafetyRules

__all__ = ("CHECKS", "Check", "iban_valid", "luhn_valid", "shannon_entropy")

Check = Callable[[str, SafetyRules], bool]
"""A validator: the matched text and the rules in force -> whether the match counts."""

_SEPARATORS = re.compile(r"[ ()./-]")
_HEX = re.compile(r"[0-9a-fA-F-]+")
_DIGIT = re.compile(r"\d")
_LUHN_DOUBLED = {str(d): (2 * d) // 10 + (2 * d) % 10 for d in range(10)}
_CARD_RANGES: dict[str, tuple[tuple[int, int, int, int, int], ...]] = {
    first: tuple(
        (len(str(low)), low, high, shortest, longest)
        for low, high, shortest, longest in CARD_PREFIXES
        if str(low)[0] == first
    )
    for first in "0123456789"
}
"""Issuer ranges by first digit, each with the width of its prefix: one dict lookup leaves
the few ranges a number can be in."""
_C_LOG_C = (0.0, *(count * math.log2(count) for count in range(1, 1025)))
"""``c * log2(c)`` for the character counts of tokens up to 1,024 characters."""
_WORD_PART = re.compile(r"[A-Z]?[a-z]{2,}|[A-Z]{2,}(?![a-z])")
_VOWELS = frozenset("aeiouAEIOU")
_PLACEHOLDER_VALUE = re.compile(r"(?i)^(?:x+|\*+|\.+|<[^>]*>?|\$\{?\w*\}?|(?:your|my)[\w-]*)$")


def luhn_valid(digits: str) -> bool:
    """Whether a digit string passes the Luhn checksum (payment cards, some ids).

    Args:
        digits: Digits only.

    Returns:
        True when the checksum digit matches.
    """
    # Odd places from the right count as they are, even places doubled (digit sum): two
    # C-level sums over slices instead of a Python loop over the digits.
    plain = sum(map(int, digits[-1::-2]))
    doubled = sum(map(_LUHN_DOUBLED.__getitem__, digits[-2::-2]))
    return (plain + doubled) % 10 == 0


def iban_valid(compact: str) -> bool:
    """Whether an IBAN (no spaces, upper case) has its country's length and passes mod-97.

    Args:
        compact: The IBAN with separators removed.

    Returns:
        True for a well-formed IBAN of a known country.
    """
    if IBAN_LENGTHS.get(compact[:2]) != len(compact):
        return False
    rearranged = compact[4:] + compact[:4]
    # Letters count as 10..35 (ISO 13616); int() of the joined digits is exact at any length.
    number = "".join(str(int(char, 36)) for char in rearranged)
    return int(number) % 97 == 1


def shannon_entropy(token: str) -> float:
    """The Shannon entropy of a string's characters, in bits per character.

    Args:
        token: Any non-empty string.

    Returns:
        ``-sum(p * log2 p)`` over the character frequencies.
    """
    size = len(token)
    if size > len(_C_LOG_C) - 1:
        return -sum((n := token.count(char)) / size * math.log2(n / size) for char in set(token))
    # H = log2(size) - sum(c * log2 c) / size, the sum from a table through C-level map():
    # about half the cost of a Python loop over the counts.
    counted = map(token.count, set(token))
    return math.log2(size) - sum(map(_C_LOG_C.__getitem__, counted)) / size


def _card(text: str, rules: SafetyRules) -> bool:
    # Grouped numbers use one separator kind: "4111 1111-1111 1111" is two numbers glued.
    if " " in text and "-" in text:
        return False
    digits = text.replace(" ", "").replace("-", "")
    size = len(digits)
    # The issuer range first: most digit runs (ISBNs, order numbers) fail it at once.
    for width, low, high, shortest, longest in _CARD_RANGES.get(digits[0], ()):
        if shortest <= size <= longest and low <= int(digits[:width]) <= high:
            return luhn_valid(digits)
    return False


def _iban(text: str, rules: SafetyRules) -> bool:
    return iban_valid(text.replace(" ", ""))


def _jwt(text: str, rules: SafetyRules) -> bool:
    header = text.split(".", 1)[0]
    try:
        decoded = json.loads(base64.urlsafe_b64decode(header + "=" * (-len(header) % 4)))
    except (binascii.Error, ValueError):
        return False
    return isinstance(decoded, dict) and "alg" in decoded


_INTEGRITY = ("sha1-", "sha256-", "sha384-", "sha512-")


def _entropy(token: str, rules: SafetyRules) -> bool:
    # Hex (git SHAs, content hashes, UUIDs) is an identifier far more often than a secret in
    # chat memory; a hex secret with a name ("token=...") is caught by the assignment rule.
    if _HEX.fullmatch(token):
        return False
    # A Subresource Integrity digest ("sha512-<base64>", as package locks carry) is a public
    # content hash, not a secret.
    if token.startswith(_INTEGRITY):
        return False
    # Case folding and one regex search run in C; a loop over the characters would not.
    has_digit = _DIGIT.search(token) is not None
    has_lower = token.upper() != token
    has_upper = token.lower() != token
    # A random 20+ character token almost surely mixes digits with letters; identifiers
    # (snake_case names, CamelCase words) usually lack digits or one of the cases.
    if not (has_digit and (has_lower or has_upper)):
        return False
    if not (has_lower and has_upper) and "_" in token:
        return False
    # Entropy is at most log2(distinct characters): too few distinct ones settle it cheaply.
    if math.log2(len(set(token))) < rules.entropy_threshold:
        return False
    return shannon_entropy(token) >= rules.entropy_threshold and not _wordlike(token)


def _wordlike(token: str) -> bool:
    """Whether a token is mostly words glued together (``renderUserAvatarV2``).

    Identifiers are covered by camel/snake parts and have word-like vowel shares (about 0.4
    of their letters); random text has short parts or few vowels (about 0.2). Both tests
    must hold: about one random 24-character token in a hundred passes them (measured).
    """
    covered = sum(len(part) for part in _WORD_PART.findall(token))
    if covered < 0.75 * len(token):
        return False
    letters = sum(char.isalpha() for char in token)
    return sum(char in _VOWELS for char in token) >= 0.3 * letters


def _assignment(value: str, rules: SafetyRules) -> bool:
    value = value.rstrip(".,;:!?\"'")
    if len(value) < 8 or _PLACEHOLDER_VALUE.match(value):
        return False
    # A plain word or phrase ("password=reset", "token: expired") is not a secret.
    rest = value[1:]
    return not (rest.isalpha() and rest.islower())


def _password(value: str, rules: SafetyRules) -> bool:
    value = value.rstrip(".,;:!?)")
    if len(value) < 6 or _PLACEHOLDER_VALUE.match(value):
        return False
    # A word of prose ("stored", "case-sensitive", "e-mailed") is not a password: one has a
    # digit or a symbol other than a hyphen somewhere.
    return any(char.isdigit() or not (char.isalpha() or char == "-") for char in value)


def _phone(text: str, rules: SafetyRules) -> bool:
    digits = sum(map(str.isdigit, text))
    # A bare run of digits is an order or account number; a phone number is written with
    # a "+" or separators.
    if not (text.startswith("+") or _SEPARATORS.search(text)):
        return False
    return 8 <= digits <= 15


CHECKS: Mapping[str, Check] = {
    "card": _card,
    "iban": _iban,
    "jwt": _jwt,
    "entropy": _entropy,
    "assignment": _assignment,
    "password": _password,
    "phone": _phone,
}
"""Validators by the name a :class:`~workers.memory.policy.safety_patterns.PatternSpec` gives."""
