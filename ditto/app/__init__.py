"""The application layer: configuration, bootstrap, the ``Memory`` API, CLI, MCP server and UI.

It is the one layer that imports Ditto's top-level ``workers`` package, so it first makes sure
that name is Ditto's: a project with its own ``workers`` package or module earlier on
``sys.path`` would otherwise fail later, deep inside a call, with a bare
``ModuleNotFoundError: No module named 'workers.memory'``.
"""

from __future__ import annotations

from importlib.util import find_spec
from pathlib import Path


def _check_workers_package() -> None:
    ours = (Path(__file__).resolve().parent.parent.parent / "workers").resolve()
    spec = find_spec("workers")
    origin = None if spec is None else spec.origin
    if origin is not None and Path(origin).resolve().parent == ours:
        return
    found = "nothing" if spec is None else (origin or "a namespace package")
    raise ImportError(
        f"Ditto needs its own top-level package 'workers' ({ours}), but 'workers' resolves to "
        f"{found}: a package or module of that name earlier on sys.path (often your project's "
        "own workers/ folder, importable from the current directory) shadows it; rename yours "
        "or run from another folder"
    )


_check_workers_package()
