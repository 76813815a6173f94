"""``workers.memory.policy:`` — the MEMORY write policy's settings (see
:class:`~workers.memory.policy.config.WritePolicy`, which ``bootstrap`` builds from them)."""

from __future__ import annotations

from typing import Any, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

__all__ = ("MemoryPolicySettings", "PolicyOverrideSettings", "PolicyStagesSettings")

Mode = Literal["off", "observe", "enforce"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class _Modes(_Strict):
    @field_validator("*", mode="before")
    @classmethod
    def _bare_off(cls, value: object) -> object:
        # YAML 1.1 reads a bare `off` as the boolean false; that is what `off` means here.
        return "off" if value is False else value


class PolicyStagesSettings(_Modes):
    """Each stage's mode: ``off``, ``observe`` (report what it would do) or ``enforce``."""

    safety: Mode = "off"
    dedupe: Mode = "off"
    contradiction: Mode = "off"


class PolicyOverrideSettings(_Modes):
    """A namespace's or category's stage modes; a stage left out keeps the mode it overrides."""

    safety: Mode | None = None
    dedupe: Mode | None = None
    contradiction: Mode | None = None


_MAX_TTL_DAYS = 36_500


class MemoryPolicySettings(_Strict):
    """``workers.memory.policy:`` — what the write policy does, and where."""

    stages: PolicyStagesSettings = PolicyStagesSettings()
    """Every stage's mode, wherever no override says otherwise."""
    namespaces: dict[str, PolicyOverrideSettings] = Field(default_factory=dict)
    """Overrides per namespace."""
    categories: dict[str, PolicyOverrideSettings] = Field(default_factory=dict)
    """Overrides per category (they win over a namespace's)."""
    trust_levels: list[str] = Field(
        default_factory=lambda: ["verified", "user", "agent", "inferred"], min_length=1
    )
    """The trust scale, most trusted first."""
    default_trust: str | None = None
    """The trust of a draft that names none (null: none, ranking below every level)."""
    ttl_days: dict[str, float] = Field(default_factory=dict)
    """Days until a new record of a category expires when its draft sets no expiry, e.g.
    ``daily: 7``."""
    renew_on_read: bool = False
    """Renew the expiry of a record of a ``ttl_days`` category that GET or SEARCH returns with
    less than half of its ttl left (a record kept as long as it is used)."""
    safety: dict[str, Any] = Field(default_factory=dict)
    """The safety stage's rules: ``actions`` (kind -> allow | redact | quarantine | reject),
    ``extra_patterns`` (``{kind, pattern, action?}``), ``disabled`` kinds,
    ``entropy_threshold``, ``min_token_length`` (see ``SafetyRules``)."""

    @field_validator("safety")
    @classmethod
    def _safety_rules(cls, value: dict[str, Any]) -> dict[str, Any]:
        from ditto.errors import DittoError
        from workers.memory.policy.safety_rules import SafetyRules

        try:
            SafetyRules.from_mapping(value)  # a bad regex or action fails at start
        except DittoError as exc:
            raise ValueError(exc.message) from None
        return value

    @field_validator("ttl_days")
    @classmethod
    def _positive(cls, value: dict[str, float]) -> dict[str, float]:
        for category, days in value.items():
            if not 0 < days <= _MAX_TTL_DAYS or days * 86_400 < 1:
                raise ValueError(
                    f"ttl_days.{category} must be more than a second and at most "
                    f"{_MAX_TTL_DAYS} days"
                )
        return value

    @model_validator(mode="after")
    def _default_on_the_scale(self) -> Self:
        if len(set(self.trust_levels)) != len(self.trust_levels) or not all(self.trust_levels):
            raise ValueError("trust_levels must name distinct, non-empty levels")
        if self.default_trust is not None and self.default_trust not in self.trust_levels:
            raise ValueError(f"default_trust {self.default_trust!r} is not one of trust_levels")
        return self
