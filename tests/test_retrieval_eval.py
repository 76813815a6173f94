"""The evaluation harness: its BEIR loader and metrics, and a run on the bundled sample."""

from __future__ import annotations

import gzip
import importlib.util
import math
import os
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).parents[1]


def _harness(name: str = "retrieval_eval") -> ModuleType:
    sys.path.insert(0, str(ROOT / "bench"))  # the harness imports its sibling modules
    spec = importlib.util.spec_from_file_location(name, ROOT / "bench" / f"{name}.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def test_metrics_match_hand_computed_values() -> None:
    harness = _harness()
    relevant = {"a": 1.0, "b": 2.0}
    assert harness.recall(["x", "a", "b"], relevant, 1) == 0
    assert harness.recall(["x", "a", "b"], relevant, 2) == 0.5
    assert harness.recall(["x", "a", "b"], relevant, 10) == 1
    dcg = 1 / math.log2(3) + 2 / math.log2(4)
    idcg = 2 / math.log2(2) + 1 / math.log2(3)
    assert math.isclose(harness.ndcg(["x", "a", "b"], relevant), dcg / idcg)
    assert harness.ndcg(["b", "a"], relevant) == 1.0


def test_the_loader_reads_beir_folders(tmp_path: Path) -> None:
    (tmp_path / "qrels").mkdir()
    (tmp_path / "corpus.jsonl").write_text(
        '{"_id": "d1", "title": "T", "text": "body"}\n{"_id": 2, "text": "two"}\n'
    )
    (tmp_path / "queries.jsonl").write_text('{"_id": "q1", "text": "what"}\n')
    (tmp_path / "qrels" / "test.tsv").write_text(
        "query-id\tcorpus-id\tscore\nq1\td1\t1\nq1\t2\t0\nq9\td1\t1\n"
    )
    data = _harness("datasets").load(str(tmp_path))
    assert [(doc.key, doc.text) for doc in data.documents] == [("d1", "T\nbody"), ("2", "two")]
    assert data.judgements == {"q1": {"d1": 1.0}}  # zero scores and unknown queries left out


def test_the_loader_reads_gzipped_beir_files(tmp_path: Path) -> None:
    files = {
        "corpus.jsonl": '{"_id": "d1", "title": "T", "text": "body"}\n',
        "queries.jsonl": '{"_id": "q1", "text": "what"}\n',
        "qrels.tsv": "query-id\tcorpus-id\tscore\nq1\td1\t2\n",
    }
    for name, text in files.items():
        (tmp_path / f"{name}.gz").write_bytes(gzip.compress(text.encode()))
    data = _harness("datasets").load(str(tmp_path))
    assert [(doc.key, doc.text) for doc in data.documents] == [("d1", "T\nbody")]
    assert data.judgements == {"q1": {"d1": 2.0}}


def test_the_bundled_squad_set_loads_with_one_paragraph_per_question() -> None:
    data = _harness("datasets").load("squad-dev")
    assert (len(data.documents), len(data.queries), len(data.judgements)) == (2067, 2067, 2067)
    assert all(len(relevant) == 1 for relevant in data.judgements.values())
    first = data.documents[0]
    assert first.key == "Super_Bowl_50-0"
    assert first.text.startswith("Super Bowl 50\nSuper Bowl 50 was an American football game")


def test_a_changed_bundled_file_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    datasets = _harness("datasets")
    copy = tmp_path / "squad_dev"
    shutil.copytree(datasets.SQUAD_DEV, copy)
    qrels = copy / "qrels.tsv.gz"
    qrels.write_bytes(gzip.compress(gzip.decompress(qrels.read_bytes()) + b"extra\tline\t1\n"))
    monkeypatch.setattr(datasets, "SQUAD_DEV", copy)
    with pytest.raises(SystemExit, match=r"qrels\.tsv\.gz is not the expected file"):
        datasets.load("squad-dev")


def test_sessions_join_consecutive_documents_and_keep_the_best_gain() -> None:
    datasets = _harness("datasets")
    data = datasets.Dataset(
        "toy",
        [datasets.Document(ns, f"{ns}{n}", f"text {ns}{n}") for ns in "ab" for n in range(5)],
        [datasets.Query("q1", "what", "a"), datasets.Query("q2", "who", "b")],
        {"q1": {"a1": 1.0, "a3": 2.0, "a4": 1.0}, "q2": {"b4": 1.0}},
    )
    grouped = datasets.sessions(data, 2)
    assert [(doc.namespace, doc.key) for doc in grouped.documents] == [
        (ns, f"session-{n}") for ns in "ab" for n in range(3)
    ]
    assert grouped.documents[1].text == "text a2\n\ntext a3"
    assert grouped.judgements == {
        "q1": {"session-0": 1.0, "session-1": 2.0, "session-2": 1.0},
        "q2": {"session-2": 1.0},
    }
    first = datasets.first_queries(data, 1)
    assert [query.id for query in first.queries] == ["q1"]
    assert {doc.namespace for doc in first.documents} == {"a"}


def test_the_sample_runs_end_to_end(tmp_path: Path) -> None:
    completed = subprocess.run(
        [
            sys.executable,
            str(ROOT / "bench" / "retrieval_eval.py"),
            *("--data", "sample", "--embedder", "hashing", "--markdown"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={**os.environ, "DITTO_BENCH_CACHE": str(tmp_path)},
    )
    assert completed.returncode == 0, completed.stderr
    rows = {line.split()[0]: line for line in completed.stdout.splitlines() if line.strip()}
    assert "22 judged queries" in completed.stdout
    assert {"keyword", "vector", "hybrid"} <= rows.keys()
    assert "| sample | hybrid |" in completed.stdout  # the README table
