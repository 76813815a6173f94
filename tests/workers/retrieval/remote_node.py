"""The RETRIEVAL worker a remote test serves (``ditto worker serve --worker
remote_node:build``): an SQLite memory store, opened read-only, and a corpus folder, both named
by the test in the environment. Copied into the test's directory, like the probe worker."""

from __future__ import annotations

import os

from ditto.runtime.worker import WorkerDefinition
from workers.memory import SqliteMemoryStore
from workers.memory.retrieval.embeddings import HashingEmbedder
from workers.retrieval import CorpusProvider, MemoryStoreProvider, create_retrieval_worker


def build() -> WorkerDefinition:
    embedder = HashingEmbedder(256)
    store = SqliteMemoryStore(os.environ["RETRIEVAL_TEST_SQLITE"], read_only=True)
    return create_retrieval_worker(
        {
            "memory": MemoryStoreProvider(store, embedder, owns_store=True),
            "docs": CorpusProvider(os.environ["RETRIEVAL_TEST_CORPUS"], embedder),
        },
        own_targets=True,
    )
