"""Install hints for the optional extras, as commands that work wherever Ditto is installed.

``pip install 'ditto-runtime[mcp]'`` only works where an index serves ``ditto-runtime``; a
hint must work in the environment the user is in. So a hint names the extra's own packages
(read from the installed distribution's metadata, the single source of truth in
``pyproject.toml``), which any index serves: ``pip install 'mcp<3,>=2.3'``.
"""

from __future__ import annotations

import re
import shlex
from importlib.metadata import PackageNotFoundError, requires

__all__ = ("DISTRIBUTION", "extra_requirements", "install_hint")

DISTRIBUTION = "ditto-runtime"

_EXTRA = re.compile(r"""^(?P<requirement>[^;]+);\s*extra\s*==\s*["'](?P<extra>[^"']+)["']\s*$""")


def extra_requirements(extra: str) -> list[str]:
    """The requirements the ``extra`` adds (e.g. ``["asyncpg>=0.29"]``); ``[]`` when Ditto is
    not installed as a distribution (a bare source tree) or the extra is unknown."""
    try:
        declared = requires(DISTRIBUTION) or []
    except PackageNotFoundError:
        return []
    found = []
    for line in declared:
        match = _EXTRA.match(line)
        if match is not None and match["extra"] == extra:
            found.append(match["requirement"].strip())
    return found


def install_hint(extra: str) -> str:
    """The command that installs ``extra`` into the running environment, e.g.
    ``pip install 'asyncpg>=0.29'`` (``pip install 'ditto-runtime[extra]'`` only as a last
    resort, when the installed metadata cannot say)."""
    packages = extra_requirements(extra)
    if not packages:
        return f"pip install '{DISTRIBUTION}[{extra}]'"
    return "pip install " + " ".join(shlex.quote(package) for package in packages)
