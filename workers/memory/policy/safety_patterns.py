"""The built-in detectors of the safety stage, as data: one row per pattern, plus the tables
their validators read (IBAN lengths, card issuer ranges).

A row is a regex, the kind it reports, an optional validator (by name, see
:mod:`workers.memory.policy.safety_checks`) and cheap pre-checks that keep the regex off text
that cannot match. The scanner (:mod:`workers.memory.policy.safety`) compiles the rows once.
Patterns were written from the formats' specifications and tuned on the ``dev`` split of
``bench/data/write_policy/safety.jsonl`` only. The prompt-injection rows live in
:mod:`workers.memory.policy.safety_injection`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

__all__ = (
    "BUILTIN_KINDS",
    "BUILTIN_PATTERNS",
    "CARD_PREFIXES",
    "IBAN_LENGTHS",
    "PatternSpec",
    "injection_row",
)


@dataclass(frozen=True, slots=True)
class PatternSpec:
    """One built-in detector row.

    The finding spans the named group ``v`` when the pattern has one (``token=<v>`` redacts
    the value and keeps the name, so a reader still sees what was there), else the match.
    """

    kind: str
    """The kind a match reports."""
    pattern: str
    """A Python regular expression."""
    check: str | None = None
    """A validator in :mod:`workers.memory.policy.safety_checks` a match must also pass."""
    gate: str = ""
    """Lower-case literals, ``|``-separated, of which one must occur in the text before the
    regex runs: a substring test costs far less than a regex pass."""
    ignore_case: bool = False
    """Compile with ``re.IGNORECASE``."""
    also: str = ""
    """A second ``|``-separated set of which one literal must also occur (a verb *and* a noun)."""
    pre: str | None = None
    """A cheap regex that must find something first (seven digits before a card or phone)."""
    min_chunk: int = 0
    """Run only when some whitespace-free run of the text is at least this long (``-1``: the
    rules' ``min_token_length``). One ``str.split`` per scan answers it for every row, far
    cheaper than a row's literals or regex on the short text most writes carry."""
    fallback: bool = False
    """Report a match only where no earlier row found anything: a catch-all whose check is
    costly (entropy) is not run over a key or a JWT that a specific row already named."""
    unmask: bool = False
    """Also run over the de-obfuscated view of the text (zero-width characters, look-alike
    letters, leetspeak, spaced-out letters undone: :mod:`workers.memory.policy.safety_unmask`).
    Such a row uses only ``gate``, ``also`` and ``pre`` (no check, no ``v`` group)."""
    view_only: bool = False
    """Run over the de-obfuscated view only (a pattern for text that only the view has)."""
    whole_words: bool = False
    """``gate`` and ``also`` name whole words (matched against the text's set of words, made
    once per scan for every such row), not substrings: a row whose literals are common words
    and their inflections pays one set test instead of a substring search per literal. A row
    with ``also`` words needs ``gate`` words too."""
    non_ascii: bool = False
    """Run only on text with a non-ASCII character (a row for Cyrillic or CJK text): one
    ``str.isascii`` per scan answers it for every such row."""


def injection_row(
    pattern: str,
    gate: str,
    also: str = "",
    *,
    ignore_case: bool = True,
    pre: str | None = None,
    view_only: bool = False,
    non_ascii: bool = False,
    words: bool = False,
) -> PatternSpec:
    """A prompt-injection row: case-insensitive unless told, and run on the de-obfuscated view
    too (``words`` makes ``gate`` and ``also`` whole words, see ``PatternSpec.whole_words``)."""
    return PatternSpec(
        "injection",
        pattern,
        gate=gate,
        also=also,
        ignore_case=ignore_case,
        pre=pre,
        unmask=True,
        view_only=view_only,
        non_ascii=non_ascii,
        whole_words=words,
    )


_SEVEN_DIGITS = r"\d(?:[ ().\-/]{0,2}\d){6}"
"""Cards and phone numbers have seven digits or more, close together: absent, skip them."""

_B = r"(?<![A-Za-z0-9_])"  # a token boundary that, unlike \b, also holds before "-" or "+"

_KEY_FORMATS = (
    r"(?:AKIA|ASIA)[A-Z0-9]{16}(?![A-Za-z0-9_])",  # AWS access key id
    r"gh[pousr]_[A-Za-z0-9]{36,255}(?![A-Za-z0-9_])",  # GitHub tokens
    r"github_pat_[A-Za-z0-9_]{22,255}",  # GitHub fine-grained token
    r"xox[abpr]-[A-Za-z0-9-]{10,}",  # Slack
    r"(?:sk|rk)_live_[A-Za-z0-9]{16,}",  # Stripe secret and restricted keys
    r"sk-(?:ant-|proj-)?[A-Za-z0-9_-]{20,}",  # Anthropic, OpenAI
    r"AIza[0-9A-Za-z_-]{35}",  # Google API key
)
"""Secret formats with a known prefix: one alternation, so one regex pass for all of them."""

BUILTIN_PATTERNS: tuple[PatternSpec, ...] = (
    # ------------------------------------------------------------ secrets with a known shape
    PatternSpec(
        "api_key",
        _B + "(?:" + "|".join(_KEY_FORMATS) + ")",
        gate="akia|asia|ghp_|gho_|ghu_|ghs_|ghr_|github_pat_|xox|_live_|sk-|aiza",
        min_chunk=15,
    ),
    # An AWS secret key has no prefix: only its neighbourhood ("aws ... secret") names it.
    PatternSpec(
        "api_key",
        r"(?i:aws)[\w ]{0,24}?(?i:secret)[\w ]{0,24}?(?:[\"']?\s*[:=]\s*[\"']?|\s+(?:is|was)\s+)"
        r"(?P<v>[A-Za-z0-9/+]{40})(?![A-Za-z0-9/+=])",
        gate="secret",
        min_chunk=40,
    ),
    # A value assigned to a secret-sounding name (config lines, env files, chat pastes).
    PatternSpec(
        "api_key",
        r"\b(?:api[_-]?key|apikey|secret(?:[_-]?key)?|client[_-]?secret|access[_-]?token"
        r"|auth[_-]?token|private[_-]?token|token|password|passwd|pwd)[\"']?\s*(?::|=|=>)\s*"
        r"[\"']?(?P<v>[A-Za-z0-9_\-./+=~!@#$%^&*]{8,})",
        check="assignment",
        gate="key|secret|token|pass|pwd",
        also=":|=",
        ignore_case=True,
    ),
    # A password in a connection URL (scheme://user:password@host): the password alone.
    PatternSpec(
        "password",
        r"\b[A-Za-z][A-Za-z0-9+.-]{1,20}://[^\s:/@]{0,64}:(?P<v>[^\s/@]{3,})@[A-Za-z0-9]",
        gate="://",
        also="@",
    ),
    # A password stated in prose or a config line, in a few languages: the word, a few words
    # naming what it opens ("for the NAS"), a verb or a colon, then a value with a digit or a
    # symbol ("is stored in the vault" is not a password; "is Correct-Horse-Battery-9" is).
    PatternSpec(
        "password",
        r"(?<![A-Za-z])(?:pass(?:word|wort|phrase|code)|passwd|mot de passe|contrase\u00f1a"
        r"|senha|\u043f\u0430\u0440\u043e\u043b\u044c|\u5bc6\u7801|\u30d1\u30b9\u30ef\u30fc\u30c9)"
        r"[^\n.:=\uff1a\u662f]{0,40}?"
        r"(?:\s(?:is|was|ist|est|es|\u00e9|\u2014|-)|:|=|\uff1a|\u662f)\s*[\"'\u201c\u00ab]?"
        # The whole token, however long, less the punctuation that ends a sentence.
        r"(?P<v>[^\s\"'\u201d\u00bb]{5,}[^\s\"'\u201d\u00bb.,;:!?)])",
        check="password",
        gate="pass|mot de passe|contrase|senha"
        "|\u043f\u0430\u0440\u043e\u043b|\u5bc6\u7801|\u30d1\u30b9",
        ignore_case=True,
    ),
    PatternSpec(
        "api_key",
        r"\bbearer\s+(?P<v>[A-Za-z0-9_\-.~+/]{16,}=*)",
        check="assignment",
        gate="bearer",
        min_chunk=16,
        ignore_case=True,
    ),
    PatternSpec(
        "private_key",
        r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----(?:"
        # The body never holds "--" (base64 and "Proc-Type:" headers), so the lazy scan stops at
        # the next dashes: many BEGIN lines without an END cost linear time, not quadratic.
        r"(?:[^-]|-(?!-)){0,16384}?-----END (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----"
        # A block pasted without its END line: its header lines and base64 lines, no further,
        # so the rest of the text keeps its own findings.
        r"|(?:[ \t]*\r?\n(?:[A-Za-z-]+:[^\n]*|[A-Za-z0-9+/=]+))*)",
        gate="private key",
    ),
    PatternSpec(
        "jwt",
        _B + r"eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*",
        "jwt",
        "eyj",
        min_chunk=19,
    ),
    # Any long token; the entropy check (threshold and length in SafetyRules) decides.
    PatternSpec(
        "high_entropy",
        r"(?<![A-Za-z0-9+/=_\-])[A-Za-z0-9+/=_\-]{%(min)d,}",
        "entropy",
        min_chunk=-1,
        fallback=True,
    ),
    # ------------------------------------------------------------ payment and bank data
    PatternSpec(
        "card",
        r"\d(?<![\w.,-]\d)(?:[ -]?\d){11,17}[ -]?\d(?![\w-]|[.,]\d)",
        "card",
        pre=_SEVEN_DIGITS,
    ),
    PatternSpec(
        "iban",
        # Starts with a character class, not \b, so the engine can skip to capitals.
        r"[A-Z](?<![A-Za-z0-9][A-Z])[A-Z]\d{2}(?: ?[A-Z0-9]{4}){2,7}(?: ?[A-Z0-9]{1,3})?\b",
        "iban",
    ),
    # ------------------------------------------------------------ contact data
    PatternSpec(
        "email",
        # Local part and DNS labels bounded by their RFC lengths (64 and 63), which also bounds
        # the backtracking on a long run of letters after an "@".
        r"[A-Za-z0-9](?<![\w.+-][A-Za-z0-9])[A-Za-z0-9._%+-]{0,63}@[A-Za-z0-9](?:[A-Za-z0-9-]"
        r"{0,61}[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*\.[A-Za-z]{2,24}\b",
        gate="@",
    ),
    # International (E.164, with or without separators), North American, European national
    # (0-prefixed trunk code) and Russian (8/+7) numbers. Dates, versions, IPs and bare order
    # numbers fail the separator rules here or the digit count of the "phone" check.
    PatternSpec(
        "phone",
        r"\+(?<![\w+.]\+)[1-9]\d{0,3}(?:[ .-]?\(?\d{1,5}\)?){1,5}(?![\w.-]|[.,]\d)"
        r"|\((?<![\w.-]\()\d{3}\)\s?\d{3}[-. ]\d{4}(?![\w-]|[.,]\d)"
        r"|\d(?<![\w.-]\d)\d\d[-. ]\d{3}[-. ]\d{4}(?![\w-]|[.,]\d)"
        r"|0(?<![\w.,/:-]0)\d{2,4}[ /-]\d{3,8}(?:[ -]\d{2,4}){0,3}(?![\w/:-]|[.,]\d)"
        r"|8(?<![\w.-]8)[ -]?\(\d{3}\)[ -]?\d{3}[ -]?\d{2}[ -]?\d{2}(?![\w-])",
        "phone",
        pre=_SEVEN_DIGITS,
    ),
)
"""The built-in secret and personal-data detectors, in the order the scanner reports ties
(the injection rows follow them, from :mod:`workers.memory.policy.safety_injection`)."""

BUILTIN_KINDS: tuple[str, ...] = (
    "private_key",
    "jwt",
    "api_key",
    "password",
    "iban",
    "card",
    "email",
    "phone",
    "high_entropy",
    "injection",
)
"""Built-in kinds, most specific first: redaction labels a merged span with the earliest."""

IBAN_LENGTHS: Mapping[str, int] = {
    "AD": 24, "AE": 23, "AL": 28, "AT": 20, "AZ": 28, "BA": 20, "BE": 16, "BG": 22, "BH": 22,
    "BR": 29, "CH": 21, "CR": 22, "CY": 28, "CZ": 24, "DE": 22, "DK": 18, "DO": 28, "EE": 20,
    "EG": 29, "ES": 24, "FI": 18, "FO": 18, "FR": 27, "GB": 22, "GE": 22, "GI": 23, "GL": 18,
    "GR": 27, "GT": 28, "HR": 21, "HU": 28, "IE": 22, "IL": 23, "IS": 26, "IT": 27, "JO": 30,
    "KW": 30, "KZ": 20, "LB": 28, "LI": 21, "LT": 20, "LU": 20, "LV": 21, "MC": 27, "MD": 24,
    "ME": 22, "MK": 19, "MR": 27, "MT": 31, "MU": 30, "NL": 18, "NO": 15, "PK": 24, "PL": 28,
    "PS": 29, "PT": 25, "QA": 29, "RO": 24, "RS": 22, "SA": 24, "SE": 24, "SI": 19, "SK": 24,
    "SM": 27, "TN": 24, "TR": 26, "UA": 29, "VG": 24, "XK": 20,
}  # fmt: skip
"""IBAN length per country (ISO 13616 registry): a wrong length is not an IBAN."""

CARD_PREFIXES: tuple[tuple[int, int, int, int], ...] = (
    # (low prefix, high prefix, min length, max length), prefixes compared at their own width
    (4, 4, 13, 19),  # Visa
    (51, 55, 16, 16),  # Mastercard
    (2221, 2720, 16, 16),  # Mastercard 2-series
    (34, 34, 15, 15),  # American Express
    (37, 37, 15, 15),
    (300, 305, 14, 19),  # Diners Club
    (36, 36, 14, 19),
    (38, 39, 14, 19),
    (6011, 6011, 16, 19),  # Discover
    (644, 649, 16, 19),
    (65, 65, 16, 19),
    (3528, 3589, 16, 19),  # JCB
    (62, 62, 16, 19),  # UnionPay
    (5018, 5018, 12, 19),  # Maestro
    (5020, 5020, 12, 19),
    (5038, 5038, 12, 19),
    (5893, 5893, 12, 19),
    (6304, 6304, 12, 19),
    (6759, 6759, 12, 19),
    (6761, 6763, 12, 19),
    (2200, 2204, 16, 19),  # Mir
)
"""Issuer prefixes (IIN ranges) with their card lengths: a Luhn-valid number outside them is a
number, not a card (one random digit string in ten passes Luhn)."""
