"""Install hints name packages an index really serves: the extra's own requirements, from the
installed metadata, never the unpublished ``ditto-runtime[extra]`` where that can be avoided."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet

from ditto.extras import extra_requirements, install_hint

PYPROJECT = Path(__file__).resolve().parents[1] / "pyproject.toml"


@pytest.mark.parametrize("extra", ["postgres", "mysql", "embeddings", "mcp", "ui", "retrieval"])
def test_a_hint_installs_exactly_the_packages_the_extra_declares(extra: str) -> None:
    declared = tomllib.loads(PYPROJECT.read_text())["project"]["optional-dependencies"][extra]
    assert _parsed(extra_requirements(extra)) == _parsed(declared)
    hint = install_hint(extra)
    assert hint.startswith("pip install ")
    assert "ditto-runtime" not in hint


def _parsed(requirements: list[str]) -> set[tuple[str, SpecifierSet]]:
    return {(r.name, r.specifier) for r in map(Requirement, requirements)}


def test_an_unknown_extra_falls_back_to_the_distribution_name() -> None:
    assert install_hint("nonexistent") == "pip install 'ditto-runtime[nonexistent]'"
