"""``ditto graph show``: the picture of a graph named ``MODULE:ATTR`` in the current directory,
or of one run of it on the configured runtime; one-line errors and exit 2 for a bad target."""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.app.cli.runner import invoke_cli, run_cli
from tests.graph.test_pictures import parse_dot, parse_mermaid

MODULE = "ditto_cli_test_graphs"

SOURCE = """
from ditto import define_worker, graph


def write(run_input, deps):
    return {"memories": [{"content": run_input or "the espresso machine is broken", "key": "note"}]}


def search(run_input, deps):
    deps["write"].unwrap()
    return {"query": "espresso"}


def explode(run_input, deps):
    raise ValueError("the binder cannot bind")


recall = (
    graph("recall")
    .node("write", "MEMORY.WRITE", [], write)
    .node("find", "MEMORY.SEARCH", ["write"], search)
    .node("again", "MEMORY.SEARCH", ["write"], search)
)


def build():
    return recall


class holder:
    recall = recall


unknown = graph("unknown").node("probe", "PROBE.WORK", [], write)
stops = recall.node("bad", "MEMORY.SEARCH", ["find"], explode).node(
    "never", "MEMORY.SEARCH", ["bad"], search
)
rejected = graph("rejected").node("write", "MEMORY.WRITE", [], lambda run_input, deps: {"x": 1})
not_a_graph = 42


def needs_an_argument(name):
    return recall


def raises():
    raise RuntimeError("no graph today")


async def probe_work(value, ctx):
    return {"done": True}


probe_worker = define_worker("probe", {"PROBE.WORK": probe_work})
"""


@pytest.fixture
def project(tmp_path: Path) -> Iterator[Path]:
    """A folder holding the graphs module and a ditto.yaml with a private SQLite store."""
    (tmp_path / f"{MODULE}.py").write_text(SOURCE)
    (tmp_path / "ditto.yaml").write_text(
        f"workers:\n  memory:\n    sqlite_path: '{tmp_path / 'memory.sqlite'}'\n"
    )
    path = list(sys.path)
    yield tmp_path
    # The CLI imports the module into this process: forget it so the next test loads its own.
    sys.modules.pop(MODULE, None)
    sys.path[:] = path


def test_mermaid_is_the_default_picture(project: Path) -> None:
    completed = invoke_cli("graph", "show", f"{MODULE}:recall", cwd=project)
    assert completed.exit_code == 0, completed.stderr
    chart = parse_mermaid(completed.stdout)
    assert chart.title == "recall"
    assert sorted(label[0] for label in chart.labels.values()) == ["again", "find", "write"]
    assert len(chart.edges) == 2
    assert chart.classes == {}
    assert not (project / "memory.sqlite").exists()  # drawing runs nothing


@pytest.mark.parametrize("target", ["build", "holder.recall"])
def test_a_function_or_a_dotted_attribute_may_name_the_graph(project: Path, target: str) -> None:
    completed = invoke_cli("graph", "show", f"{MODULE}:{target}", cwd=project)
    assert completed.exit_code == 0, completed.stderr
    assert parse_mermaid(completed.stdout).title == "recall"


def test_dot_format(project: Path) -> None:
    completed = invoke_cli("graph", "show", f"{MODULE}:recall", "--format", "dot", cwd=project)
    assert completed.exit_code == 0, completed.stderr
    title, labels, _, edges = parse_dot(completed.stdout)
    assert title == "recall"
    assert sorted(labels.values()) == [
        "again\nMEMORY.SEARCH",
        "find\nMEMORY.SEARCH",
        "write\nMEMORY.WRITE",
    ]
    assert len(edges) == 2


def test_text_format_describes_the_shape(project: Path) -> None:
    completed = invoke_cli("graph", "show", f"{MODULE}:stops", "-f", "text", cwd=project)
    assert completed.exit_code == 0, completed.stderr
    assert completed.stdout.splitlines() == [
        "graph 'recall': 5 tasks, 4 edges",
        "roots: write",
        "leaves: again, never",
        "levels: 4 (widest: 2 tasks)",
        "  0: write",
        "  1: find, again",
        "  2: bad",
        "  3: never",
        "critical path (4 tasks): write -> find -> bad -> never",
    ]


def test_run_draws_each_task_with_its_status_and_duration(project: Path) -> None:
    completed = invoke_cli(
        "graph", "show", f"{MODULE}:recall", "--run", "--input", '"a note on espresso"',
        cwd=project,
    )  # fmt: skip
    assert completed.exit_code == 0, completed.stderr
    chart = parse_mermaid(completed.stdout)
    assert set(chart.classes.values()) == {"success"}
    assert len(chart.classes) == 3
    for label in chart.labels.values():
        assert re.fullmatch(r"✓ \d+\.\d ms|✓ \d+\.\d\d s", label[2]), label
    # It ran on the configured store: the write is there.
    listed = invoke_cli("memory", "get", "note", "--config", str(project / "ditto.yaml"))
    assert listed.exit_code == 0, listed.stderr
    assert "a note on espresso" in listed.stdout


def test_run_in_text_shows_statuses_and_the_slowest_chain(project: Path) -> None:
    completed = invoke_cli(
        "graph", "show", f"{MODULE}:recall", "--run", "--format", "text", cwd=project
    )
    assert completed.exit_code == 0, completed.stderr
    lines = completed.stdout.splitlines()
    assert lines[-4] == "tasks:"
    assert [line.split()[:2] for line in lines[-3:]] == [
        ["write:", "success"],
        ["find:", "success"],
        ["again:", "success"],
    ]
    critical = next(line for line in lines if line.startswith("critical path ("))
    assert " ms): write -> " in critical


def test_run_dot_with_an_explicit_config(
    project: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    elsewhere = tmp_path_factory.mktemp("elsewhere")
    config = elsewhere / "other.yaml"
    config.write_text(f"workers:\n  memory:\n    sqlite_path: '{elsewhere / 'other.sqlite'}'\n")
    completed = invoke_cli(
        "graph", "show", f"{MODULE}:recall", "--run", "-f", "dot", "--config", str(config),
        cwd=project,
    )  # fmt: skip
    assert completed.exit_code == 0, completed.stderr
    _, labels, attributes, _ = parse_dot(completed.stdout)
    assert all("\n✓ " in label for label in labels.values())
    assert all('fillcolor="#d4edda"' in extra for extra in attributes.values())
    assert (elsewhere / "other.sqlite").exists()
    assert not (project / "memory.sqlite").exists()


def test_a_failed_task_is_drawn_and_exits_1(project: Path) -> None:
    completed = invoke_cli("graph", "show", f"{MODULE}:rejected", "--run", cwd=project)
    assert completed.exit_code == 1
    chart = parse_mermaid(completed.stdout)
    (label,) = chart.labels.values()
    assert label[2].startswith("✗ failed INVALID_INPUT · ")
    assert set(chart.classes.values()) == {"failed"}
    assert completed.stderr.strip() == "the run did not succeed: 1 failed, 0 did not run"


def test_a_binder_that_raises_draws_the_partial_run_and_exits_1(project: Path) -> None:
    completed = invoke_cli("graph", "show", f"{MODULE}:stops", "--run", cwd=project)
    assert completed.exit_code == 1
    chart = parse_mermaid(completed.stdout)
    classes = {chart.labels[node][0]: style for node, style in chart.classes.items()}
    assert classes == {
        "write": "success",
        "find": "success",
        "again": "success",
        "bad": "not_run",
        "never": "not_run",
    }
    assert completed.stderr.startswith("GRAPH_RUN_FAILED: ")
    assert "'bad'" in completed.stderr
    assert "Traceback" not in completed.stderr


def test_run_registers_a_worker_named_on_the_command_line(project: Path) -> None:
    (project / "ditto.yaml").unlink()  # no configuration: MEMORY would use ./memory.sqlite
    completed = invoke_cli(
        "graph",
        "show",
        f"{MODULE}:unknown",
        "--run",
        "--worker",
        f"{MODULE}:probe_worker",
        "--format",
        "text",
        cwd=project,
    )
    assert completed.exit_code == 0, completed.stderr
    assert "probe" in completed.stdout
    # The plan uses no MEMORY node: no memory store was opened, nothing created here.
    assert sorted(path.name for path in project.iterdir() if "sqlite" in path.name) == []


def test_a_worker_option_without_run_is_a_usage_error(project: Path) -> None:
    completed = invoke_cli(
        "graph", "show", f"{MODULE}:unknown", "--worker", f"{MODULE}:probe_worker", cwd=project
    )
    assert completed.exit_code == 2
    assert "--worker" in completed.stderr


def test_a_worker_that_is_not_one_is_a_usage_error(project: Path) -> None:
    completed = invoke_cli(
        "graph", "show", f"{MODULE}:unknown", "--run", "--worker", f"{MODULE}:recall", cwd=project
    )
    assert completed.exit_code == 2
    assert "not a worker definition" in completed.stderr


def test_a_node_type_no_worker_runs_exits_2(project: Path) -> None:
    completed = invoke_cli("graph", "show", f"{MODULE}:unknown", "--run", cwd=project)
    assert completed.exit_code == 2
    assert completed.stdout == ""
    assert completed.stderr.startswith("UNKNOWN_NODE: ")


@pytest.mark.parametrize(
    ("target", "message"),
    [
        ("recall", "'recall' is not MODULE:ATTR (e.g. myapp.graphs:recall)"),
        (f"{MODULE}:", f"'{MODULE}:' is not MODULE:ATTR (e.g. myapp.graphs:recall)"),
        (":recall", "':recall' is not MODULE:ATTR (e.g. myapp.graphs:recall)"),
        ("no_such_module_here:recall", "no module named 'no_such_module_here'"),
        (f"{MODULE}:missing", f"'{MODULE}' has no attribute 'missing'"),
        (f"{MODULE}:holder.missing", f"'{MODULE}' has no attribute 'holder.missing'"),
        (f"{MODULE}:not_a_graph", f"{MODULE}:not_a_graph is a int, not a Graph"),
        (
            f"{MODULE}:needs_an_argument",
            f"calling {MODULE}:needs_an_argument() raised TypeError",
        ),
        (f"{MODULE}:raises", f"calling {MODULE}:raises() raised RuntimeError: no graph today"),
    ],
)
def test_a_bad_target_is_one_line_and_exit_2(project: Path, target: str, message: str) -> None:
    completed = invoke_cli("graph", "show", target, cwd=project)
    assert completed.exit_code == 2
    assert completed.stdout == ""
    assert message in completed.stderr
    assert len(completed.stderr.strip().splitlines()) == 1
    assert "Traceback" not in completed.stderr


def test_a_module_that_fails_to_import_is_reported_with_its_line(project: Path) -> None:
    (project / "broken_graphs.py").write_text("import math\n\nVALUE = 1 / 0\n")
    try:
        completed = invoke_cli("graph", "show", "broken_graphs:VALUE", cwd=project)
    finally:
        sys.modules.pop("broken_graphs", None)
    assert completed.exit_code == 2
    assert "importing 'broken_graphs' raised ZeroDivisionError: division by zero" in (
        completed.stderr
    )
    assert "broken_graphs.py, line 3" in completed.stderr


@pytest.mark.parametrize("text", ["{not json", "", "[1,"])
def test_input_that_is_not_json_exits_2(project: Path, text: str) -> None:
    completed = invoke_cli(
        "graph", "show", f"{MODULE}:recall", "--run", "--input", text, cwd=project
    )
    assert completed.exit_code == 2
    assert completed.stderr.startswith("--input is not valid JSON: ")
    assert not (project / "memory.sqlite").exists()


def test_input_without_run_exits_2(project: Path) -> None:
    completed = invoke_cli("graph", "show", f"{MODULE}:recall", "--input", "1", cwd=project)
    assert completed.exit_code == 2
    assert "pass --run" in completed.stderr


def test_an_unknown_format_exits_2(project: Path) -> None:
    completed = invoke_cli("graph", "show", f"{MODULE}:recall", "--format", "png", cwd=project)
    assert completed.exit_code == 2
    assert "png" in completed.stderr


def test_the_console_script_imports_from_the_current_directory(project: Path) -> None:
    completed = run_cli("graph", "show", f"{MODULE}:recall", "--format", "dot", cwd=project)
    assert completed.returncode == 0, completed.stderr
    assert len(parse_dot(completed.stdout)[1]) == 3
