"""The house plan holds where import-linter cannot look: no import cycle at all (``TYPE_CHECKING``
and function-level imports included, which a runtime import graph misses), and no module past
the house size. The layer contracts themselves are ``lint-imports`` (``pyproject.toml``)."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("ditto", "workers")
MAX_LINES = 400


def _modules() -> dict[str, tuple[Path, bool]]:
    """Dotted module name -> (file, is a package ``__init__``)."""
    found: dict[str, tuple[Path, bool]] = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            is_package = parts[-1] == "__init__"
            if is_package:
                parts.pop()
            found[".".join(parts)] = (path, is_package)
    return found


def _imported(name: str, modules: dict[str, tuple[Path, bool]]) -> str | None:
    """The project module an import of ``name`` executes (its longest known prefix)."""
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def _imports(
    module: str, path: Path, is_package: bool, modules: dict[str, tuple[Path, bool]]
) -> Iterator[str]:
    """Every project module ``module`` imports, wherever the import statement stands."""
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                target = _imported(alias.name, modules)
                if target is not None:
                    yield target
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".") if is_package else module.split(".")[:-1]
                base = base[: len(base) - node.level + 1]
                name = ".".join([*base, *([node.module] if node.module else [])])
            else:
                name = node.module or ""
            for alias in node.names:
                submodule = f"{name}.{alias.name}"
                target = _imported(submodule if submodule in modules else name, modules)
                if target is not None:
                    yield target


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_the_import_graph_has_no_cycle() -> None:
    modules = _modules()
    graph = {
        module: set(_imports(module, path, is_package, modules)) - {module}
        for module, (path, is_package) in modules.items()
    }
    assert _cycles(graph) == []


def test_the_cycle_finder_sees_type_checking_and_function_level_imports(tmp_path: Path) -> None:
    # The check above must be able to fail: an edge that only a type checker or a function
    # body follows closes a cycle too.
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    source = tmp_path / "x.py"
    source.write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from ditto.graph import plan\n"
        "def f() -> None:\n    import ditto.errors\n",
        encoding="utf-8",
    )
    modules = {
        "ditto.errors": (source, False),
        "ditto.graph": (source, True),
        "ditto.graph.plan": (source, False),
        "x": (source, False),
    }
    assert sorted(_imports("x", source, False, modules)) == ["ditto.errors", "ditto.graph.plan"]


def test_no_module_is_over_the_house_size() -> None:
    long = {
        str(path.relative_to(ROOT)): lines
        for path, _ in _modules().values()
        if (lines := len(path.read_text(encoding="utf-8").splitlines())) > MAX_LINES
    }
    assert long == {}
