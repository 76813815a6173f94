"""The runtime's scheduling defaults, as plain values.

``ditto.yaml`` (``runtime:``) overrides them through :class:`~ditto.config.settings.Settings`;
a runtime created without settings uses these and never imports the configuration package
(pydantic, PyYAML), so ``import ditto`` and a bare ``Ditto()`` stay light.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ditto.config.settings import Settings

__all__ = ("DEFAULT_LIMITS", "RuntimeLimits")


@dataclass(frozen=True, slots=True)
class RuntimeLimits:
    """What the runtime reads from ``runtime:`` (see ``RuntimeSettings`` for each meaning)."""

    timeout_ms: int = 30_000
    graph_concurrency: int | None = None
    stall_warning_ms: int | None = 250
    loop_max_iterations: int = 32

    @classmethod
    def from_settings(cls, settings: Settings) -> RuntimeLimits:
        runtime = settings.runtime
        return cls(
            timeout_ms=runtime.timeout_ms,
            graph_concurrency=runtime.graph_concurrency,
            stall_warning_ms=runtime.stall_warning_ms,
            loop_max_iterations=runtime.loop_max_iterations,
        )


DEFAULT_LIMITS = RuntimeLimits()
