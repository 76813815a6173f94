"""Running the ``ditto`` command in tests.

Most tests call :func:`invoke_cli`: the Typer app in this process through ``CliRunner``, which
captures standard output and standard error apart. A few end-to-end tests call :func:`run_cli`:
the installed console script in a subprocess, so the real entry point stays covered.

Both run the command as a user's shell would, minus the user's own configuration: no
``DITTO_WORKER_*`` variables, no ``DITTO_CONFIG``, output 200 columns wide and without colour.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path
from unittest import mock

import pytest
from typer.testing import CliRunner, Result

from ditto.app.cli.app import app
from ditto.app.cli.output import console, errors

__all__ = ("REPO_ROOT", "invoke_cli", "run_cli")

REPO_ROOT = Path(__file__).resolve().parents[3]
_WIDTH = 200


def _environment(
    env: Mapping[str, str | None] | None, columns: int = _WIDTH
) -> dict[str, str | None]:
    """Overrides of ``os.environ``; ``None`` removes a variable."""
    overrides: dict[str, str | None] = {
        key: None for key in os.environ if key.startswith("DITTO_WORKER_")
    }
    overrides["DITTO_CONFIG"] = None
    overrides.update(env or {})
    overrides["COLUMNS"] = str(columns)
    return overrides


@contextlib.contextmanager
def _plain_consoles() -> Iterator[None]:
    # The CLI's rich consoles are built when ``ditto.app.cli.output`` is imported: they fix their
    # colour system (and, if COLUMNS is set, their width) against whatever stdout was then, a
    # terminal under ``pytest -s``. Render as the console script does into a pipe instead.
    with contextlib.ExitStack() as stack:
        for target in (console, errors):
            stack.enter_context(mock.patch.object(target, "_color_system", None))
            stack.enter_context(mock.patch.object(target, "_width", _WIDTH))
        yield


def invoke_cli(*args: str, cwd: Path = REPO_ROOT, env: dict[str, str] | None = None) -> Result:
    """``ditto *args`` in this process, in ``cwd`` with ``env`` added to the environment.

    An exception escaping a command fails the test where the console script would have printed a
    traceback; ``typer.Exit`` and usage errors give ``exit_code`` as the process would.
    """
    with contextlib.chdir(cwd), _plain_consoles():
        return CliRunner().invoke(app, list(args), env=_environment(env), catch_exceptions=False)


def ditto_command() -> list[str]:
    script = Path(sys.executable).parent / "ditto"
    if script.exists():
        return [str(script)]
    found = shutil.which("ditto")
    if found is None:
        pytest.fail("the `ditto` console script is not installed (pip install -e .)")
    return [found]


def run_cli(
    *args: str,
    cwd: Path = REPO_ROOT,
    env: Mapping[str, str | None] | None = None,
    columns: int = _WIDTH,
) -> subprocess.CompletedProcess[str]:
    """``ditto *args`` through the installed console script, in a subprocess (``env``: added
    to the environment, ``None`` removing a variable; ``columns``: the terminal's width)."""
    environment = {
        key: value
        for key, value in {**os.environ, **_environment(env, columns)}.items()
        if value is not None
    }
    return subprocess.run(
        [*ditto_command(), *args],
        cwd=cwd,
        env=environment,
        capture_output=True,
        text=True,
        timeout=60,
    )
