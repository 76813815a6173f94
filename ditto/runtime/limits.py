"""The runtime's scheduling defaults, as plain values.

``ditto.yaml`` (``runtime:``) overrides them: the application's ``Settings`` has a ``limits``
property that builds a :class:`RuntimeLimits`, and ``create_ditto(config=settings)`` reads only
that. The runtime never imports the configuration package (pydantic, PyYAML), so ``import
ditto`` and a bare ``Ditto()`` stay light, and the SDK does not depend on the app layer.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

__all__ = ("DEFAULT_LIMITS", "LimitsSource", "RuntimeLimits")


@dataclass(frozen=True, slots=True)
class RuntimeLimits:
    """What the runtime reads from ``runtime:`` (see ``RuntimeSettings`` for each meaning)."""

    timeout_ms: int = 30_000
    graph_concurrency: int | None = None
    stall_warning_ms: int | None = 250
    loop_max_iterations: int = 32
    checkpoint_lease_ms: int = 15_000
    tracing: bool = False


class LimitsSource(Protocol):
    """Anything that can say which limits a runtime runs with, e.g. the ``Settings`` from
    :func:`ditto.load_config`."""

    @property
    def limits(self) -> RuntimeLimits: ...


DEFAULT_LIMITS = RuntimeLimits()
