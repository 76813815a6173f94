"""Pictures of graphs and runs: Mermaid and DOT text that parse whatever the task ids hold, and
the plan's shape (levels, width, depth, critical path) computed with networkx."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from dataclasses import dataclass, field
from itertools import pairwise
from typing import Any

import pytest

from ditto import graph
from ditto.contracts.result import NodeResult
from ditto.errors import ErrorInfo
from ditto.graph import Graph, pictures
from ditto.graph.pictures import PlanShape


def noop(run_input: Any, deps: Any) -> None:
    return None


def build(name: str, *tasks: tuple[str, list[str]]) -> Graph:
    g = graph(name)
    for task_id, deps in tasks:
        g = g.node(task_id, "PROBE.WORK", deps, noop)
    return g


def result(status: str, ms: float, code: str | None = None) -> NodeResult[Any]:
    error = None if code is None else ErrorInfo(code, "safe message")
    return NodeResult("exec", "PROBE.WORK", status, error=error, duration_ms=ms)  # type: ignore[arg-type]


DIAMOND = build(
    "diamond", ("s", []), ("left", ["s"]), ("right", ["s"]), ("join", ["left", "right"])
)

# Ids that would break an unescaped Mermaid or DOT statement.
AWKWARD_IDS = [
    'say "hi"',
    "a[b]{c}(d)",
    "x --> y",
    "end",
    "ünïcødé 🧠",
    "#quot;",
    "#35;",
    "<b>bold</b> & more",
    "`md`",
    "a;b|c",
    "line\nbreak",
    "%% not a comment",
    "back\\slash",
    "graph",
]


# --- Mermaid, read back --------------------------------------------------------------------------

_MERMAID_ENTITIES = {"quot": '"', "lt": "<", "gt": ">", "amp": "&"}
_NODE = re.compile(r'    (n\d+)\["([^"]*)"\]')
_EDGE = re.compile(r"    (n\d+) --> (n\d+)")
_CLASSDEF = re.compile(r"    classDef (\w+) ([\w#:,. -]+)")
_CLASS = re.compile(r"    class (n\d+(?:,n\d+)*) (\w+)")


@dataclass
class Flowchart:
    title: str
    direction: str
    labels: dict[str, list[str]] = field(default_factory=dict)
    edges: list[tuple[str, str]] = field(default_factory=list)
    class_defs: dict[str, str] = field(default_factory=dict)
    classes: dict[str, str] = field(default_factory=dict)

    def node_of(self, task_id: str) -> str:
        found = [node for node, label in self.labels.items() if label[0] == task_id]
        assert len(found) == 1, (task_id, self.labels)
        return found[0]


def _unescape_label(raw: str) -> list[str]:
    parts = raw.split("<br/>")
    for part in parts:
        # Outside the entities, a line may hold no character Mermaid would read as syntax.
        assert not re.search(r"[`&<>]", part), raw
        assert not re.search(r"#(?!(quot|lt|gt|amp|\d+);)", part), raw

    def entity(match: re.Match[str]) -> str:
        name = match.group(1)
        return chr(int(name)) if name.isdigit() else _MERMAID_ENTITIES[name]

    return [re.sub(r"#(quot|lt|gt|amp|\d+);", entity, part) for part in parts]


def parse_mermaid(text: str) -> Flowchart:
    """A structural parse of what :func:`pictures.mermaid` writes: every line must be the
    front matter, the header, a node, an edge or a style, and everything named must exist."""
    assert text.endswith("\n")
    lines = text.splitlines()
    assert lines[0] == "---"
    assert lines[1].startswith("title: ")
    assert lines[2] == "---"
    header = re.fullmatch(r"flowchart (TD|TB|BT|LR|RL)", lines[3])
    assert header is not None, lines[3]
    chart = Flowchart(title=json.loads(lines[1].removeprefix("title: ")), direction=header[1])
    for line in lines[4:]:
        if node := _NODE.fullmatch(line):
            assert node[1] not in chart.labels, f"node {node[1]} declared twice"
            chart.labels[node[1]] = _unescape_label(node[2])
        elif edge := _EDGE.fullmatch(line):
            assert edge[1] in chart.labels, line
            assert edge[2] in chart.labels, line
            chart.edges.append((edge[1], edge[2]))
        elif class_def := _CLASSDEF.fullmatch(line):
            chart.class_defs[class_def[1]] = class_def[2]
        elif assigned := _CLASS.fullmatch(line):
            assert assigned[2] in chart.class_defs, f"class {assigned[2]} used before classDef"
            for node_id in assigned[1].split(","):
                assert node_id in chart.labels, line
                assert node_id not in chart.classes, line
                chart.classes[node_id] = assigned[2]
        else:
            pytest.fail(f"not a flowchart statement: {line!r}")
    return chart


def edges_by_task(chart: Flowchart) -> list[tuple[str, str]]:
    return [(chart.labels[a][0], chart.labels[b][0]) for a, b in chart.edges]


def test_mermaid_draws_every_task_and_every_edge_exactly_once() -> None:
    chart = parse_mermaid(DIAMOND.to_mermaid())
    assert chart.title == "diamond"
    assert chart.direction == "TD"
    assert sorted(label[0] for label in chart.labels.values()) == ["join", "left", "right", "s"]
    assert all(label[1] == "PROBE.WORK" and len(label) == 2 for label in chart.labels.values())
    assert sorted(edges_by_task(chart)) == [
        ("left", "join"),
        ("right", "join"),
        ("s", "left"),
        ("s", "right"),
    ]
    assert len(chart.edges) == len(set(chart.edges))
    assert chart.class_defs == {}
    assert chart.classes == {}


def test_mermaid_escapes_task_ids_and_graph_names_that_would_break_the_syntax() -> None:
    g = graph('the "odd" <graph> #1')
    previous: list[str] = []
    for task_id in AWKWARD_IDS:
        g = g.node(task_id, "PROBE.WORK", previous, noop)
        previous = [task_id]
    chart = parse_mermaid(pictures.mermaid(g.name, g.tasks))
    assert chart.title == 'the "odd" <graph> #1'
    shown = [label[0] for label in chart.labels.values()]
    # A line break would end the statement, so it is drawn as a space.
    assert shown == [task_id.replace("\n", " ") for task_id in AWKWARD_IDS]
    assert edges_by_task(chart) == [
        (a.replace("\n", " "), b.replace("\n", " ")) for a, b in pairwise(AWKWARD_IDS)
    ]


def test_mermaid_of_a_run_shows_status_duration_and_a_style_per_status() -> None:
    g = build(
        "run",
        ("ok", []),
        ("bad", ["ok"]),
        ("slow", ["ok"]),
        ("stopped", ["ok"]),
        ("paused", ["ok"]),
        ("after", ["bad"]),
    )
    results = {
        "ok": result("success", 3.21),
        "bad": result("failed", 1.0, "INVALID_INPUT"),
        "slow": result("timeout", 5000.0, "TIMEOUT"),
        "stopped": result("cancelled", 0.5, "CANCELLED"),
        "paused": result("failed", 2.0, "INTERRUPTED"),
        "ignored": result("success", 1.0),  # not a task of the graph: not drawn
    }
    chart = parse_mermaid(pictures.mermaid(g.name, g.tasks, results))
    outcomes = {label[0]: label[2] for label in chart.labels.values()}
    assert outcomes == {
        "ok": "✓ 3.2 ms",
        "bad": "✗ failed INVALID_INPUT · 1.0 ms",
        "slow": "⏱ timeout · 5.00 s",
        "stopped": "⊘ cancelled · 0.5 ms",
        "paused": "↯ interrupted · 2.0 ms",
        "after": "○ not run",
    }
    classes = {chart.labels[node][0]: style for node, style in chart.classes.items()}
    assert classes == {
        "ok": "success",
        "bad": "failed",
        "slow": "timeout",
        "stopped": "cancelled",
        "paused": "interrupted",
        "after": "not_run",
    }
    assert set(chart.class_defs) == set(classes.values())
    assert "stroke-dasharray" in chart.class_defs["not_run"]


def test_mermaid_styles_only_the_statuses_a_run_has() -> None:
    results = {task: result("success", 1.0) for task in ("s", "left", "right", "join")}
    chart = parse_mermaid(DIAMOND.to_mermaid(results=results))
    assert set(chart.class_defs) == {"success"}
    assert set(chart.classes.values()) == {"success"}
    assert len(chart.classes) == 4


def test_mermaid_direction_is_checked() -> None:
    assert parse_mermaid(DIAMOND.to_mermaid("LR")).direction == "LR"
    with pytest.raises(ValueError, match="direction"):
        DIAMOND.to_mermaid("sideways")  # type: ignore[arg-type]


def test_mermaid_of_an_empty_graph_is_only_the_header() -> None:
    chart = parse_mermaid(graph("empty").to_mermaid())
    assert chart.labels == {}
    assert chart.edges == []


# --- DOT, read back ------------------------------------------------------------------------------

_DOT_STRING = r'"((?:[^"\\]|\\.)*)"'
_DOT_NODE = re.compile(rf"    (n\d+) \[label={_DOT_STRING}(.*)\];")
_DOT_EDGE = re.compile(r"    (n\d+) -> (n\d+);")


def _dot_unescape(text: str) -> str:
    return re.sub(r"\\(.)", lambda m: "\n" if m[1] == "n" else m[1], text)


def parse_dot(text: str) -> tuple[str, dict[str, str], dict[str, str], list[tuple[str, str]]]:
    """Title, node -> label, node -> other attributes, edges; every line accounted for."""
    lines = text.splitlines()
    opening = re.fullmatch(rf"digraph {_DOT_STRING} {{", lines[0])
    assert opening is not None, lines[0]
    assert lines[1] == f"    graph [label={lines[0][len('digraph ') : -2]}, labelloc=t];"
    assert lines[2].startswith("    node [")
    assert lines[-1] == "}"
    labels: dict[str, str] = {}
    attributes: dict[str, str] = {}
    edges: list[tuple[str, str]] = []
    for line in lines[3:-1]:
        if node := _DOT_NODE.fullmatch(line):
            assert node[1] not in labels
            labels[node[1]] = _dot_unescape(node[2])
            attributes[node[1]] = node[3]
        elif edge := _DOT_EDGE.fullmatch(line):
            assert edge[1] in labels
            assert edge[2] in labels
            edges.append((edge[1], edge[2]))
        else:
            pytest.fail(f"not a DOT statement: {line!r}")
    return _dot_unescape(opening[1]), labels, attributes, edges


def test_dot_quotes_and_escapes_ids_and_draws_each_edge_once() -> None:
    g = graph('dot "graph" \\ name')
    previous: list[str] = []
    for task_id in AWKWARD_IDS:
        g = g.node(task_id, "PROBE.WORK", previous, noop)
        previous = [task_id]
    title, labels, _, edges = parse_dot(g.to_dot())
    assert title == 'dot "graph" \\ name'
    assert [label.rsplit("\n", 1)[0] for label in labels.values()] == AWKWARD_IDS
    assert all(label.endswith("\nPROBE.WORK") for label in labels.values())
    ids = {node: label.rsplit("\n", 1)[0] for node, label in labels.items()}
    assert [(ids[a], ids[b]) for a, b in edges] == list(pairwise(AWKWARD_IDS))


def test_dot_of_a_run_colours_each_task_by_status() -> None:
    results = {
        "s": result("success", 2.0),
        "left": result("failed", 1.0, "NOT_FOUND"),
        "right": result("success", 4.0),
    }
    _, labels, attributes, edges = parse_dot(pictures.dot(DIAMOND.name, DIAMOND.tasks, results))
    by_task = {label.split("\n")[0]: node for node, label in labels.items()}
    assert labels[by_task["s"]] == "s\nPROBE.WORK\n✓ 2.0 ms"
    assert labels[by_task["left"]] == "left\nPROBE.WORK\n✗ failed NOT_FOUND · 1.0 ms"
    assert labels[by_task["join"]] == "join\nPROBE.WORK\n○ not run"
    assert 'fillcolor="#d4edda"' in attributes[by_task["s"]]
    assert 'fillcolor="#f8d7da"' in attributes[by_task["left"]]
    assert "dashed" in attributes[by_task["join"]]
    assert len(edges) == 4


# --- the plan's shape ----------------------------------------------------------------------------


def test_describe_a_chain() -> None:
    shape = build("chain", ("a", []), ("b", ["a"]), ("c", ["b"])).describe()
    assert shape == PlanShape(
        graph_id="chain",
        tasks=3,
        edges=2,
        roots=("a",),
        leaves=("c",),
        levels=(("a",), ("b",), ("c",)),
        width=1,
        depth=3,
        critical_path=("a", "b", "c"),
    )


def test_describe_a_fan_out_and_in() -> None:
    g = build(
        "fan",
        ("root", []),
        ("a", ["root"]),
        ("b", ["root"]),
        ("c", ["root"]),
        ("d", ["root"]),
        ("merge", ["c", "a"]),
    )
    shape = g.describe()
    assert shape.levels == (("root",), ("a", "b", "c", "d"), ("merge",))
    assert (shape.width, shape.depth, shape.edges) == (4, 3, 6)
    assert shape.leaves == ("b", "d", "merge")
    # Two chains of three tasks: the one through the task declared first wins.
    assert shape.critical_path == ("root", "a", "merge")
    assert shape.critical_path_ms is None


def test_a_task_sits_one_level_below_its_deepest_dependency() -> None:
    # "late" depends on a root and on the diamond's end: its level is the longest path to it.
    g = DIAMOND.node("late", "PROBE.WORK", ["s", "join"], noop)
    shape = g.describe()
    assert shape.levels == (("s",), ("left", "right"), ("join",), ("late",))
    assert shape.critical_path == ("s", "left", "join", "late")
    assert (shape.width, shape.depth) == (2, 4)


def test_describe_a_disconnected_graph() -> None:
    g = build("islands", ("a", []), ("x", []), ("b", ["a"]), ("y", []), ("c", ["b"]), ("z", ["y"]))
    shape = g.describe()
    assert shape.roots == ("a", "x", "y")
    assert shape.leaves == ("x", "c", "z")
    assert shape.levels == (("a", "x", "y"), ("b", "z"), ("c",))
    assert (shape.width, shape.depth, shape.edges) == (3, 3, 3)
    assert shape.critical_path == ("a", "b", "c")


def test_describe_an_empty_graph() -> None:
    shape = graph("empty").describe()
    assert shape == PlanShape(
        graph_id="empty",
        tasks=0,
        edges=0,
        roots=(),
        leaves=(),
        levels=(),
        width=0,
        depth=0,
        critical_path=(),
    )
    assert shape.render() == "graph 'empty': 0 tasks, 0 edges"


def test_durations_make_the_slowest_chain_critical() -> None:
    # By count, both branches tie and "left" (declared first) would win; "right" is slower.
    run = {
        "s": result("success", 1.0),
        "left": result("success", 2.0),
        "right": result("success", 30.0),
        "join": result("success", 1.5),
    }
    shape = DIAMOND.describe(pictures.durations(run))
    assert shape.critical_path == ("s", "right", "join")
    assert shape.critical_path_ms == pytest.approx(32.5)
    assert shape.levels == DIAMOND.describe().levels


def test_a_short_slow_chain_beats_a_long_fast_one() -> None:
    g = build("g", ("a", []), ("b", ["a"]), ("c", ["b"]), ("z", []))
    shape = g.describe({"a": 1.0, "b": 1.0, "c": 1.0, "z": 10.0})
    assert shape.critical_path == ("z",)
    assert shape.critical_path_ms == 10.0
    assert g.describe().critical_path == ("a", "b", "c")


def test_tasks_without_a_duration_weigh_nothing() -> None:
    g = build("g", ("a", []), ("b", ["a"]), ("c", []))
    shape = g.describe({"c": 4.0})  # a and b did not run
    assert shape.critical_path == ("c",)
    assert g.describe({}).critical_path_ms == 0.0


@pytest.mark.parametrize("bad", [-1.0, float("nan"), float("inf")])
def test_durations_must_be_finite_and_not_negative(bad: float) -> None:
    with pytest.raises(ValueError, match="task 'left'"):
        DIAMOND.describe({"left": bad})


def test_render_lists_levels_and_the_critical_path() -> None:
    text = str(DIAMOND.describe({"s": 1.0, "left": 2.0, "right": 3.0, "join": 1.0}))
    assert text.splitlines() == [
        "graph 'diamond': 4 tasks, 4 edges",
        "roots: s",
        "leaves: join",
        "levels: 3 (widest: 2 tasks)",
        "  0: s",
        "  1: left, right",
        "  2: join",
        "critical path (5.0 ms): s -> right -> join",
    ]
    odd = build("odd", ("a, b", []), ("two\nlines", ["a, b"])).describe().render()
    assert "critical path (2 tasks): 'a, b' -> 'two\\nlines'" in odd


def test_run_status_reads_interrupted_from_the_error_code() -> None:
    assert pictures.run_status(None) == "not_run"
    assert pictures.run_status(result("failed", 1.0, "INTERRUPTED")) == "interrupted"
    assert pictures.run_status(result("failed", 1.0, "INTERNAL_ERROR")) == "failed"
    assert pictures.run_status(result("timeout", 1.0, "TIMEOUT")) == "timeout"


def test_graph_methods_draw_what_the_functions_draw() -> None:
    run = {"s": result("success", 1.0)}
    assert DIAMOND.to_mermaid("LR", results=run) == pictures.mermaid(
        "diamond", DIAMOND.tasks, run, direction="LR"
    )
    assert DIAMOND.to_dot(results=run) == pictures.dot("diamond", DIAMOND.tasks, run)
    assert DIAMOND.describe() == pictures.describe("diamond", DIAMOND.tasks)


def test_importing_ditto_and_drawing_does_not_load_networkx() -> None:
    code = (
        "import sys, ditto, ditto.app.cli.app\n"
        "from ditto.graph import pictures\n"
        "g = ditto.graph('g').node('a', 'PROBE.WORK', [], lambda i, d: None)\n"
        "g.to_mermaid(); g.to_dot()\n"
        "assert 'networkx' not in sys.modules, 'loaded early'\n"
        "g.describe()\n"
        "assert 'networkx' in sys.modules\n"
    )
    completed = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60
    )
    assert completed.returncode == 0, completed.stderr
