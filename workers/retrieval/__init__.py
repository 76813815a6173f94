"""The RETRIEVAL worker: ``RETRIEVAL.SEARCH`` over configured targets, no storage of its own.

A target is a :class:`RetrievalProvider`: :class:`MemoryStoreProvider` (a memory store,
read-only), :class:`CorpusProvider` (a folder of text and Markdown files) or
:class:`MilvusProvider` (a Milvus collection; the ``retrieval`` extra). The memory and corpus
providers rank with the MEMORY worker's own pipeline. :class:`RetrievalSearchProvider` lets
``MEMORY.SEARCH`` hand its searches to a RETRIEVAL worker, local or remote.

Each name is imported on first use, so importing the package loads no driver.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ditto.lazy import lazy_attributes

if TYPE_CHECKING:
    from workers.retrieval.bridge import RetrievalSearchProvider
    from workers.retrieval.contracts import (
        CandidateSource,
        RetrievalCandidate,
        RetrievalQuery,
        RetrievalSearchInput,
        RetrievalSearchOutput,
        RetrievalTarget,
    )
    from workers.retrieval.ports import ProviderRequest, ProviderResult, RetrievalProvider
    from workers.retrieval.providers.corpus import CorpusProvider
    from workers.retrieval.providers.memory import MemoryStoreProvider
    from workers.retrieval.providers.milvus import MilvusDocument, MilvusProvider
    from workers.retrieval.worker import create_retrieval_worker

__all__ = (
    "CandidateSource",
    "CorpusProvider",
    "MemoryStoreProvider",
    "MilvusDocument",
    "MilvusProvider",
    "ProviderRequest",
    "ProviderResult",
    "RetrievalCandidate",
    "RetrievalProvider",
    "RetrievalQuery",
    "RetrievalSearchInput",
    "RetrievalSearchOutput",
    "RetrievalSearchProvider",
    "RetrievalTarget",
    "create_retrieval_worker",
)

__getattr__ = lazy_attributes(
    __name__,
    globals(),
    {
        "CandidateSource": "workers.retrieval.contracts",
        "CorpusProvider": "workers.retrieval.providers.corpus",
        "MemoryStoreProvider": "workers.retrieval.providers.memory",
        "MilvusDocument": "workers.retrieval.providers.milvus",
        "MilvusProvider": "workers.retrieval.providers.milvus",
        "ProviderRequest": "workers.retrieval.ports",
        "ProviderResult": "workers.retrieval.ports",
        "RetrievalCandidate": "workers.retrieval.contracts",
        "RetrievalProvider": "workers.retrieval.ports",
        "RetrievalQuery": "workers.retrieval.contracts",
        "RetrievalSearchInput": "workers.retrieval.contracts",
        "RetrievalSearchOutput": "workers.retrieval.contracts",
        "RetrievalSearchProvider": "workers.retrieval.bridge",
        "RetrievalTarget": "workers.retrieval.contracts",
        "create_retrieval_worker": "workers.retrieval.worker",
    },
)
