"""What the safety stage does about each kind, and what a user may change: actions and
thresholds as data.

The built-in detectors are rows of
:data:`~workers.memory.policy.safety_patterns.BUILTIN_PATTERNS`; :class:`SafetyRules` adds a
user's own rows (``extra_patterns``), switches kinds off (``disabled``), overrides the action of
a kind (``actions``) and tunes the two thresholds of ``high_entropy``. The scanner
(:mod:`workers.memory.policy.safety`) compiles all of it once. Thresholds were chosen on the
``dev`` split of ``bench/data/write_policy/safety.jsonl`` only.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from types import MappingProxyType
from typing import Any

from ditto.errors import ConfigError

__all__ = (
    "ACTION_STRENGTH",
    "DEFAULT_ACTIONS",
    "ExtraPattern",
    "SafetyAction",
    "SafetyRules",
)

_KIND = re.compile(r"[a-z][a-z0-9_]{0,39}")
"""A kind names a placeholder (``[REDACTED:<kind>]``): short snake case, so it is never a value."""


class SafetyAction(StrEnum):
    """What a write does with content of a kind."""

    ALLOW = "allow"
    """Store it as is; the finding is still counted (observe)."""
    REDACT = "redact"
    """Replace each finding with ``[REDACTED:<kind>]`` before the store sees it."""
    QUARANTINE = "quarantine"
    """Store it hidden from search and recall until a person accepts it."""
    REJECT = "reject"
    """Refuse the write with ``UNSAFE_CONTENT``."""


ACTION_STRENGTH: Mapping[SafetyAction, int] = {
    SafetyAction.ALLOW: 0,
    SafetyAction.REDACT: 1,
    SafetyAction.QUARANTINE: 2,
    SafetyAction.REJECT: 3,
}
"""The strongest action of a write's findings wins (reject > quarantine > redact > allow)."""


DEFAULT_ACTIONS: Mapping[str, SafetyAction] = {
    "private_key": SafetyAction.REDACT,
    "jwt": SafetyAction.REDACT,
    "api_key": SafetyAction.REDACT,
    "password": SafetyAction.REDACT,
    "high_entropy": SafetyAction.REDACT,
    "card": SafetyAction.REDACT,
    "iban": SafetyAction.REDACT,
    "email": SafetyAction.ALLOW,
    "phone": SafetyAction.ALLOW,
    "injection": SafetyAction.QUARANTINE,
}
"""Secrets and bank data are redacted, contact data observed, injections held for review."""


@dataclass(frozen=True, slots=True)
class ExtraPattern:
    """A user's own detector (from config: ``{kind, pattern, action?}``).

    A named group ``v`` narrows the finding (and the redaction) to that part of the match.
    """

    kind: str
    """The kind it reports: a built-in kind or a new snake_case name."""
    pattern: str
    """A Python regular expression, matched case-sensitively unless it says ``(?i)``."""
    action: SafetyAction | None = None
    """The action for the kind, when the kind is new or the user overrides it here."""


@dataclass(frozen=True, slots=True)
class SafetyRules:
    """The safety stage's configuration: built-in defaults plus the user's additions.

    Construction validates everything and raises :class:`~ditto.errors.ConfigError`
    (``INVALID_CONFIG``) naming the key, so a bad regex fails at start, not on a write.

    Attributes:
        extra_patterns: The user's own detectors, run after the built-in ones.
        disabled: Kinds never reported (built-in or extra).
        actions: Action per kind, over :data:`DEFAULT_ACTIONS`; an unknown kind allows.
        entropy_threshold: Shannon entropy, in bits per character, above which a long token
            is ``high_entropy``.
        min_token_length: Shortest token the entropy check looks at.
    """

    extra_patterns: tuple[ExtraPattern, ...] = ()
    disabled: frozenset[str] = frozenset()
    actions: Mapping[str, SafetyAction] = field(default_factory=dict)
    entropy_threshold: float = 3.7
    min_token_length: int = 20

    def __post_init__(self) -> None:
        # Frozen means frozen: a caller's dict is copied behind a read-only view.
        object.__setattr__(self, "actions", MappingProxyType(dict(self.actions)))
        for index, extra in enumerate(self.extra_patterns):
            key = f"safety.extra_patterns[{index}]"
            _check_kind(extra.kind, f"{key}.kind")
            try:
                re.compile(extra.pattern)
            except (re.error, TypeError) as exc:
                raise ConfigError(
                    f"{key}.pattern is not a valid regular expression: {exc}"
                ) from exc
        for kind in self.disabled:
            _check_kind(kind, "safety.disabled")
        for kind, action in self.actions.items():
            _check_kind(kind, "safety.actions")
            if not isinstance(action, SafetyAction):
                raise ConfigError(f"safety.actions.{kind} must be one of {_choices()}")
        if not 1.0 <= self.entropy_threshold <= 8.0:
            raise ConfigError("safety.entropy_threshold must be between 1.0 and 8.0 bits")
        if not 8 <= self.min_token_length <= 256:
            raise ConfigError("safety.min_token_length must be between 8 and 256")

    def __hash__(self) -> int:
        # The generated hash would hash the actions mapping, which is not hashable; a worker
        # keys its compiled scanners by rules.
        return hash(
            (
                self.extra_patterns,
                self.disabled,
                tuple(sorted(self.actions.items())),
                self.entropy_threshold,
                self.min_token_length,
            )
        )

    def action_for(self, kind: str) -> SafetyAction:
        """The action for findings of ``kind``.

        Args:
            kind: A finding's kind.

        Returns:
            The configured action: ``actions``, then an extra pattern's own, then the default;
            ``allow`` for a kind nobody gave an action.
        """
        if kind in self.actions:
            return self.actions[kind]
        for extra in self.extra_patterns:
            if extra.kind == kind and extra.action is not None:
                return extra.action
        return DEFAULT_ACTIONS.get(kind, SafetyAction.ALLOW)

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any]) -> SafetyRules:
        """Build rules from plain config data (a ``safety:`` block of ``ditto.yaml``).

        Args:
            data: Keys ``extra_patterns`` (a list of ``{kind, pattern, action?}``),
                ``disabled`` (a list of kinds), ``actions`` (kind to action name),
                ``entropy_threshold`` and ``min_token_length``; all optional.

        Returns:
            The validated rules.

        Raises:
            ConfigError: An unknown key, a bad action name, an invalid kind or regex.
        """
        known = {"extra_patterns", "disabled", "actions", "entropy_threshold", "min_token_length"}
        for key in data:
            if key not in known:
                raise ConfigError(f"safety.{key} is not a known setting")
        extras = []
        for index, row in enumerate(_sequence(data, "extra_patterns")):
            if not isinstance(row, Mapping) or not {"kind", "pattern"} <= set(row):
                raise ConfigError(f"safety.extra_patterns[{index}] needs kind and pattern")
            action = row.get("action")
            extras.append(
                ExtraPattern(
                    row["kind"],
                    row["pattern"],
                    None if action is None else _action(action, f"extra_patterns[{index}]"),
                )
            )
        actions = data.get("actions", {})
        if not isinstance(actions, Mapping):
            raise ConfigError("safety.actions must map kinds to actions")
        return cls(
            extra_patterns=tuple(extras),
            disabled=frozenset(_sequence(data, "disabled")),
            actions={k: _action(v, f"actions.{k}") for k, v in actions.items()},
            entropy_threshold=_number(data, "entropy_threshold", 3.7, float),
            min_token_length=int(_number(data, "min_token_length", 20, int)),
        )


def _sequence(data: Mapping[str, Any], key: str) -> list[Any]:
    value = data.get(key, [])
    # A lone string would otherwise be read as a list of its letters.
    if isinstance(value, str | bytes) or not isinstance(value, list | tuple):
        raise ConfigError(f"safety.{key} must be a list")
    return list(value)


def _number(
    data: Mapping[str, Any], key: str, default: float, kind: type[float] | type[int]
) -> float:
    value = data.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int | float) or kind(value) != value:
        raise ConfigError(f"safety.{key} must be a number{' (whole)' if kind is int else ''}")
    return kind(value)


def _check_kind(kind: object, key: str) -> None:
    if not isinstance(kind, str) or _KIND.fullmatch(kind) is None:
        raise ConfigError(f"{key}: a kind is snake_case letters, digits and _ (at most 40)")


def _choices() -> str:
    return ", ".join(action.value for action in SafetyAction)


def _action(value: object, key: str) -> SafetyAction:
    try:
        return SafetyAction(str(value))
    except ValueError:
        raise ConfigError(f"safety.{key} must be one of {_choices()}") from None
