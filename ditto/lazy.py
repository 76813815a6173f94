"""Package attributes imported on first use, so importing a package loads no driver."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from importlib import import_module
from typing import Any

__all__ = ("lazy_attributes",)


def lazy_attributes(
    package: str, namespace: dict[str, Any], table: Mapping[str, str]
) -> Callable[[str], Any]:
    """A module ``__getattr__`` for ``package``: ``table`` maps an attribute to the module that
    defines it; the first access imports it and keeps it in ``namespace`` (the package's
    ``globals()``), so later accesses cost nothing.

    Example::

        __getattr__ = lazy_attributes(__name__, globals(), {"Store": "pkg.backend"})
    """

    def __getattr__(name: str) -> Any:
        module = table.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(import_module(module), name)
        namespace[name] = value
        return value

    return __getattr__
