"""What the write policy does, and where: the trust scale, each stage's mode per namespace and
category, and expiry per category. Built once from ``ditto.yaml`` (``workers.memory.policy``)
or in code; the worker resolves it per draft on the hot path with two dictionary lookups."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Literal

from ditto.errors import InvalidInputError
from workers.memory.policy.safety_rules import SafetyRules

__all__ = (
    "DEFAULT_TRUST_LEVELS",
    "STAGES",
    "StageMode",
    "StageModes",
    "WritePolicy",
    "stricter",
)

StageMode = Literal["off", "observe", "enforce"]
"""``off``: the stage does nothing; ``observe``: it reports (in each write's outcome and the
log) what it would do and changes nothing; ``enforce``: it acts."""

STAGES = ("safety", "dedupe", "contradiction")
"""The stages whose mode is configured (expiry always holds once a record has one)."""

DEFAULT_TRUST_LEVELS = ("verified", "user", "agent", "inferred")
"""The default trust scale, most trusted first."""

_MODES = ("off", "observe", "enforce")


def stricter(*modes: StageMode | None) -> StageMode:
    """The strictest of ``modes`` (``None`` counts as ``off``)."""
    return max((mode or "off" for mode in modes), key=_MODES.index)


@dataclass(frozen=True, slots=True)
class StageModes:
    """The mode of each stage. ``None`` (in an override) keeps the mode it overrides."""

    safety: StageMode | None = None
    dedupe: StageMode | None = None
    contradiction: StageMode | None = None

    def __post_init__(self) -> None:
        for stage in STAGES:
            if getattr(self, stage) not in (None, *_MODES):
                raise InvalidInputError(f"the {stage} stage's mode must be off, observe or enforce")

    def over(self, base: StageModes) -> StageModes:
        """These modes where set, ``base``'s elsewhere."""
        return StageModes(
            *(
                getattr(self, stage) if getattr(self, stage) is not None else getattr(base, stage)
                for stage in STAGES
            )
        )


_ALL_OFF = StageModes("off", "off", "off")


@dataclass(frozen=True, slots=True)
class WritePolicy:
    """The write policy of one MEMORY worker.

    Args:
        stages: Each stage's mode everywhere (default: every stage ``off``).
        namespaces: Overrides per namespace.
        categories: Overrides per category; a category's override wins over its namespace's.
        trust_levels: The trust scale, most trusted first; a draft's ``trust`` must be one of
            them (``INVALID_INPUT`` otherwise).
        default_trust: The level of a draft that names none (``None``: it stays unset and
            ranks below every level).
        category_ttl_s: Seconds until a new record of the category expires, when its draft
            gives no ``expires_at`` or ``ttl``.
        safety: What the safety stage detects and does about each kind (patterns, actions,
            thresholds; see :class:`~workers.memory.policy.safety_rules.SafetyRules`).
        renew_on_read: Whether GET and SEARCH renew the expiry of a record of a category in
            ``category_ttl_s`` that they return with less than half of its ttl left
            (:mod:`~workers.memory.worker.renewal`).

    Raises:
        InvalidInputError: A mode that is not ``off``, ``observe`` or ``enforce``, an empty or
            repeated trust level, a default trust off the scale, a ttl that is not positive.
    """

    stages: StageModes = _ALL_OFF
    namespaces: Mapping[str, StageModes] = field(default_factory=dict)
    categories: Mapping[str, StageModes] = field(default_factory=dict)
    trust_levels: tuple[str, ...] = DEFAULT_TRUST_LEVELS
    default_trust: str | None = None
    category_ttl_s: Mapping[str, int] = field(default_factory=dict)
    safety: SafetyRules = field(default_factory=SafetyRules)
    renew_on_read: bool = False

    def __post_init__(self) -> None:
        levels = self.trust_levels
        if not levels or len(set(levels)) != len(levels) or not all(levels):
            raise InvalidInputError("trust_levels must name distinct, non-empty levels")
        if self.default_trust is not None and self.default_trust not in levels:
            raise InvalidInputError(
                f"default_trust {self.default_trust!r} is not on the trust scale "
                f"({', '.join(levels)})"
            )
        if any(
            isinstance(ttl, bool) or not isinstance(ttl, int) or ttl < 1
            for ttl in self.category_ttl_s.values()
        ):
            raise InvalidInputError("a category's ttl must be a whole number of seconds, >= 1")
        # Frozen copies: the worker resolves from these on every write.
        base = self.stages.over(_ALL_OFF)
        object.__setattr__(self, "stages", base)
        object.__setattr__(self, "namespaces", MappingProxyType(dict(self.namespaces)))
        object.__setattr__(self, "categories", MappingProxyType(dict(self.categories)))
        object.__setattr__(self, "category_ttl_s", MappingProxyType(dict(self.category_ttl_s)))

    @property
    def ranks(self) -> Mapping[str, int]:
        """Trust level -> rank, higher is more trusted."""
        count = len(self.trust_levels)
        return {level: count - index for index, level in enumerate(self.trust_levels)}

    @property
    def active(self) -> bool:
        """Whether any stage can act or report anywhere (else the worker skips the policy)."""
        every = (self.stages, *self.namespaces.values(), *self.categories.values())
        return any(
            getattr(modes, stage) not in (None, "off") for modes in every for stage in STAGES
        )

    def modes(self, namespace: str, category: str, call: StageModes | None = None) -> StageModes:
        """The modes for a draft of ``namespace`` and ``category``, with a call's overrides
        (which may only make the safety stage stricter, never looser)."""
        modes = self.stages
        by_namespace = self.namespaces.get(namespace)
        if by_namespace is not None:
            modes = by_namespace.over(modes)
        by_category = self.categories.get(category)
        if by_category is not None:
            modes = by_category.over(modes)
        if call is not None:
            safety = modes.safety
            modes = call.over(modes)
            modes = StageModes(stricter(safety, modes.safety), modes.dedupe, modes.contradiction)
        return modes
