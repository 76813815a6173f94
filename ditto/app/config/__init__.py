"""``ditto.yaml`` + environment -> frozen :class:`Settings` (pydantic, strict)."""

from ditto.app.config.loader import (
    CONFIG_ENV_VAR,
    DEFAULT_CONFIG_FILE,
    load_config,
    resolve_config_path,
)
from ditto.app.config.settings import (
    ContextWorkerSettings,
    MemoryWorkerSettings,
    RuntimeSettings,
    Settings,
    WorkersSettings,
    redact_url,
)

__all__ = (
    "CONFIG_ENV_VAR",
    "DEFAULT_CONFIG_FILE",
    "ContextWorkerSettings",
    "MemoryWorkerSettings",
    "RuntimeSettings",
    "Settings",
    "WorkersSettings",
    "load_config",
    "redact_url",
    "resolve_config_path",
)
