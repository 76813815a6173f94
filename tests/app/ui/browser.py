"""Chromium for the page tests: Debian's package (installed once per machine, under a lock so
parallel sessions do not run apt-get together), driven by Playwright from PyPI. Never a
downloaded browser: ``playwright install`` is not run, the launch names ``/usr/bin/chromium``.

Where Chromium cannot be had, the tests skip with the reason, and fail under
``DITTO_REQUIRE_SERVICES=1``.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from tests.services import unavailable

__all__ = ("CHROMIUM", "INSTALL_SECONDS", "LAUNCH_ARGS", "chromium_or_skip")

CHROMIUM = Path("/usr/bin/chromium")
LAUNCH_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
_LOCK = Path(tempfile.gettempdir()) / "ditto-chromium-install.lock"
INSTALL_SECONDS = 900


def _install() -> str | None:
    """Install Debian's chromium; the reason it could not be, or ``None``."""
    if os.name != "posix" or os.geteuid() != 0:
        return "Chromium is not installed and installing it needs root (apt-get install chromium)"
    if shutil.which("apt-get") is None:
        return "Chromium is not installed and this machine has no apt-get"
    with _LOCK.open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another session may be installing it right now
        if CHROMIUM.exists():
            return None
        environment = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        for command in (
            ["apt-get", "update", "-q"],
            ["apt-get", "install", "-y", "-q", "chromium"],
        ):
            try:
                done = subprocess.run(
                    command,
                    capture_output=True,
                    text=True,
                    timeout=INSTALL_SECONDS,
                    env=environment,
                    check=False,
                )
            except subprocess.TimeoutExpired:
                return f"{' '.join(command)} took more than {INSTALL_SECONDS} s"
            if done.returncode != 0:
                tail = (done.stderr or done.stdout).strip().splitlines()[-1:]
                return f"{' '.join(command)} failed: {' '.join(tail)}"
    return None if CHROMIUM.exists() else "apt-get installed no /usr/bin/chromium"


def chromium_or_skip() -> Path:
    """``/usr/bin/chromium``, installed now if missing (skip or fail when it cannot be)."""
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        unavailable("playwright is not installed (the dev extra has it): pip install playwright")
    if not CHROMIUM.exists():
        reason = _install()
        if reason is not None:
            unavailable(reason)
    return CHROMIUM
