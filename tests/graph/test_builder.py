"""``graph()``: an immutable builder that rejects malformed graphs naming the offending task."""

from __future__ import annotations

from typing import Any

import pytest

from ditto import ErrorCode, GraphError, graph


def noop(run_input: Any, deps: Any) -> None:
    return None


def test_node_returns_a_new_graph_and_leaves_the_original_unchanged() -> None:
    empty = graph("g")
    one = empty.node("a", "PROBE.WORK", [], noop)
    two = one.node("b", "PROBE.WORK", ["a"], noop)
    assert (len(empty), len(one), len(two)) == (0, 1, 2)
    assert [task.id for task in two] == ["a", "b"]
    assert "b" not in one


def test_branching_from_an_older_version_does_not_leak_between_branches() -> None:
    base = graph("g").node("a", "PROBE.WORK", [], noop)
    left = base.node("left", "PROBE.WORK", ["a"], noop)
    right = base.node("right", "PROBE.WORK", ["a"], noop)
    assert [task.id for task in left] == ["a", "left"]
    assert [task.id for task in right] == ["a", "right"]
    # Both branches can keep growing independently, reusing the same ids.
    assert [t.id for t in left.node("x", "PROBE.WORK", [], noop)] == ["a", "left", "x"]
    assert [t.id for t in right.node("x", "PROBE.WORK", [], noop)] == ["a", "right", "x"]


def test_duplicate_deps_are_ignored() -> None:
    g = graph("g").node("a", "PROBE.WORK", [], noop).node("b", "PROBE.WORK", ["a", "a"], noop)
    assert g.tasks[1].deps == ("a",)


@pytest.mark.parametrize(
    ("build", "fragment"),
    [
        (lambda g: g.node("", "PROBE.WORK", [], noop), "non-empty"),
        (lambda g: g.node("  ", "PROBE.WORK", [], noop), "non-empty"),
        (lambda g: g.node("a", "PROBE.WORK", [], noop), "task 'a': duplicate"),
        (lambda g: g.node("b", "PROBE.WORK", ["missing"], noop), "task 'b': dependency 'missing'"),
        (lambda g: g.node("b", "PROBE.WORK", ["b"], noop), "task 'b': dependency 'b'"),
        (lambda g: g.node("b", "probe.work", [], noop), "task 'b': invalid node type"),
        (lambda g: g.node("b", "PROBE", [], noop), "task 'b': invalid node type"),
        (lambda g: g.node("b", "PROBE.", [], noop), "task 'b': invalid node type"),
        (lambda g: g.node("b", "PROBE.WORK", "a", noop), "task 'b': deps must be a list"),
        (lambda g: g.node("b", "PROBE.WORK", [], "not callable"), "task 'b': bind"),
        (lambda g: g.node("b", "PROBE.WORK", [], noop, timeout=0), "task 'b': timeout"),
        (lambda g: g.node("b", "PROBE.WORK", [], noop, timeout=float("nan")), "task 'b': timeout"),
        (lambda g: g.node("b", "PROBE.WORK", [], noop, worker=""), "task 'b': worker"),
    ],
)
def test_malformed_tasks_are_rejected_naming_the_task(build: Any, fragment: str) -> None:
    base = graph("g").node("a", "PROBE.WORK", [], noop)
    with pytest.raises(GraphError) as raised:
        build(base)
    assert raised.value.code == ErrorCode.INVALID_GRAPH
    assert fragment in raised.value.message
    assert len(base) == 1  # a rejected task never lands in the graph


def test_a_dependency_declared_later_is_rejected_so_cycles_cannot_be_built() -> None:
    g = graph("g").node("a", "PROBE.WORK", [], noop)
    with pytest.raises(GraphError, match="'later'"):
        g.node("b", "PROBE.WORK", ["later"], noop).node("later", "PROBE.WORK", [], noop)


def test_empty_graph_name_is_rejected() -> None:
    with pytest.raises(GraphError):
        graph("")


def test_compile_indexes_dependencies_and_dependents() -> None:
    g = (
        graph("g")
        .node("a", "PROBE.WORK", [], noop)
        .node("b", "PROBE.WORK", [], noop)
        .node("c", "OTHER.WORK", ["a", "b"], noop)
    )
    plan = g.compile()
    assert plan is g.compile()  # cached
    assert plan.roots == (0, 1)
    assert plan.dependencies == ((), (), (0, 1))
    assert plan.dependents == ((2,), (2,), ())
    assert plan.node_types == {"PROBE.WORK", "OTHER.WORK"}


def test_to_networkx_exports_edges_from_dependency_to_dependent() -> None:
    g = graph("g").node("a", "PROBE.WORK", [], noop).node("b", "PROBE.WORK", ["a"], noop)
    digraph = g.to_networkx()
    assert list(digraph.edges) == [("a", "b")]
    assert digraph.nodes["b"]["node_type"] == "PROBE.WORK"
