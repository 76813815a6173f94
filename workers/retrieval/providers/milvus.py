"""``MilvusProvider``: a Milvus collection as a RETRIEVAL vector target, through ``pymilvus``.

The only module that imports ``pymilvus`` (the ``retrieval`` extra); with ``milvus-lite``
installed, a local ``*.db`` URI runs a real Milvus engine inside this process, and a
``http://host:19530`` URI reaches a Milvus server with the same code.

The collection holds ``id`` (VARCHAR primary key), ``vector`` (FLOAT_VECTOR), ``text``
(VARCHAR) and ``metadata`` (JSON), with a ``FLAT`` (exact) or ``HNSW`` (approximate) index on
the vector, cosine metric. Its properties record the embedding model and dimension the vectors
came from; searching or writing with another embedder is ``EMBEDDING_MISMATCH`` (vectors of two
models are never compared).

Search (strategy ``vector`` only) embeds the query with the provider's embedder and asks Milvus
for the ``limit`` nearest vectors with the filter applied *by Milvus*, before the limit. Filters
are the MEMORY filter's ``metadata`` equality on string and numeric values; any other condition,
a boolean or a null is refused (Milvus compares a JSON ``true`` equal to ``1``, which the MEMORY
filter never does). Scores are cosine similarities; ties are ordered by id.

The provider never writes while searching; :meth:`MilvusProvider.upsert` is how an application
loads documents into the collection (each embedded with the same embedder).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar

import anyio
import msgspec

from ditto.errors import DittoError, ErrorCode, map_exceptions
from ditto.extras import install_hint
from ditto.runtime.context import NodeContext
from workers.memory.model.contracts import MemoryFilter
from workers.memory.retrieval.embeddings.base import Embedder, EmbeddingModel, embed_texts, model_of
from workers.retrieval.contracts import CandidateSource, RetrievalCandidate
from workers.retrieval.errors import RetrievalError, invalid
from workers.retrieval.ports import ProviderRequest, ProviderResult

__all__ = ("MilvusDocument", "MilvusProvider", "milvus_filter")

try:
    from pymilvus import DataType, MilvusClient, MilvusException
    from pymilvus.exceptions import ConnectError, MilvusUnavailableException
except ImportError as exc:  # the extra is optional: say how to install it
    raise ImportError(
        f"MilvusProvider needs the retrieval extra (pymilvus, milvus-lite): "
        f"{install_hint('retrieval')}"
    ) from exc

logger = logging.getLogger("ditto.workers.retrieval.milvus")

T = TypeVar("T")
Index = Literal["FLAT", "HNSW"]
_MODEL = "ditto.embedding.model"
_DIMENSION = "ditto.embedding.dimension"
_MAX_TEXT = 65_535
_MAX_ID = 512
_OUTPUT = ["text", "metadata"]


def _backend(exc: MilvusException) -> DittoError:
    # Milvus messages may quote the request (vectors, filter text): the code is enough here.
    return RetrievalError(
        f"Milvus failed (code {exc.code}; details in the log)",
        code=ErrorCode.RETRIEVAL_BACKEND_ERROR,
    )


def _unreachable(exc: MilvusException) -> DittoError:
    return RetrievalError(
        "Milvus cannot be reached", code=ErrorCode.RETRIEVAL_PROVIDER_UNAVAILABLE, retryable=True
    )


_ERRORS = map_exceptions(
    {(ConnectError, MilvusUnavailableException): _unreachable, MilvusException: _backend}
)
"""The driver boundary: a connection pymilvus cannot make or lost may pass (retryable); any
other ``MilvusException`` is what the server refused."""


@dataclass(frozen=True, slots=True)
class MilvusDocument:
    """A document to load into the collection with :meth:`MilvusProvider.upsert`."""

    id: str
    text: str
    metadata: Mapping[str, Any] = field(default_factory=dict)


class MilvusProvider:
    """Searches one Milvus collection by vector (see the module).

    Args:
        client: A ready ``MilvusClient`` (the application closes it); or use :meth:`from_uri`.
        collection: The collection's name.
        embedder: The model the collection's vectors come from.
        index: ``FLAT`` (exact, the default) or ``HNSW`` (approximate) — used when
            :meth:`upsert` creates the collection.
    """

    kind = "milvus"
    strategies: tuple[str, ...] = ("vector",)

    def __init__(
        self,
        client: MilvusClient,
        collection: str,
        embedder: Embedder,
        *,
        index: Index = "FLAT",
    ) -> None:
        if not isinstance(collection, str) or not collection:
            raise invalid("a Milvus collection name must be a non-empty string")
        if index not in ("FLAT", "HNSW"):
            raise invalid("index must be FLAT or HNSW")
        self.client = client
        self.collection = collection
        self.embedder = embedder
        self.model: EmbeddingModel = model_of(embedder)
        self.index = index
        self._owns = False
        self._lite_path: str | None = None
        self._checked = False

    @classmethod
    def from_uri(
        cls, uri: str, collection: str, embedder: Embedder, *, index: Index = "FLAT"
    ) -> MilvusProvider:
        """A provider with a client of its own on ``uri`` (a Milvus Lite ``*.db`` path or a
        server URL), closed by :meth:`aclose`."""
        with _ERRORS:
            client = MilvusClient(uri)
        provider = cls(client, collection, embedder, index=index)
        provider._owns = True
        provider._lite_path = None if "://" in uri else uri
        return provider

    async def _run(self, call: Callable[[], T]) -> T:
        """``call`` on a worker thread (pymilvus blocks), through the driver boundary."""
        with _ERRORS:
            return await anyio.to_thread.run_sync(call)

    async def open(self) -> None:
        """Check that the collection exists and holds vectors of this embedder's model, and
        load it for search.

        Raises:
            RetrievalError: ``RETRIEVAL_PROVIDER_UNAVAILABLE`` (no such collection),
                ``EMBEDDING_MISMATCH``.
        """
        if self._checked:
            return
        if not await self._run(lambda: self.client.has_collection(self.collection)):
            raise RetrievalError(
                f"Milvus has no collection {self.collection!r} (load it with upsert first)",
                code=ErrorCode.RETRIEVAL_PROVIDER_UNAVAILABLE,
            )
        await self._check_model()
        # A collection opened anew (another process, a restarted engine) is not searchable
        # until loaded; loading a loaded one costs a round trip, once per provider.
        await self._run(lambda: self.client.load_collection(self.collection))
        self._checked = True

    async def _check_model(self) -> None:
        described = await self._run(lambda: self.client.describe_collection(self.collection))
        properties = described.get("properties") or {}
        held = (properties.get(_MODEL), properties.get(_DIMENSION))
        if held != (self.model.model_id, str(self.model.dimension)):
            raise RetrievalError(
                f"Milvus collection {self.collection!r} holds vectors of another model "
                f"({held[0]}, {held[1]}-d), not {self.model}",
                code=ErrorCode.EMBEDDING_MISMATCH,
            )

    async def aclose(self) -> None:
        """Close the client :meth:`from_uri` made, and stop the Milvus Lite engine it started
        for a local file (it would hold the file's lock until the process exits)."""
        if not self._owns:
            return
        await self._run(self.client.close)
        if self._lite_path is not None:
            from milvus_lite.server_manager import server_manager_instance

            path = self._lite_path
            await anyio.to_thread.run_sync(lambda: server_manager_instance.release_server(path))

    async def upsert(self, documents: Sequence[MilvusDocument]) -> int:
        """Embed ``documents`` and write them (a document with an id already there replaces
        it), creating the collection on first use. The RETRIEVAL node never calls it.

        Returns:
            How many documents were written.

        Raises:
            RetrievalError: ``INVALID_INPUT`` for an id or text over Milvus's limits or
                metadata that is not a JSON object; ``EMBEDDING_MISMATCH``.
        """
        for document in documents:
            if not document.id or len(document.id.encode()) > _MAX_ID:
                raise invalid(f"a Milvus document id must be 1 to {_MAX_ID} bytes")
            if len(document.text.encode()) > _MAX_TEXT:
                raise invalid(f"document {document.id!r} is over {_MAX_TEXT} bytes of text")
            if not isinstance(document.metadata, Mapping):
                raise invalid(f"document {document.id!r}: metadata must be an object")
        if not await self._run(lambda: self.client.has_collection(self.collection)):
            await self._run(self._create)
        await self._check_model()
        if not documents:
            return 0
        matrix = await embed_texts(self.embedder, [document.text for document in documents])
        rows = [
            {
                "id": document.id,
                "vector": vector.tolist(),
                "text": document.text,
                "metadata": dict(document.metadata),
            }
            for document, vector in zip(documents, matrix, strict=True)
        ]
        await self._run(lambda: self.client.upsert(self.collection, rows))
        return len(rows)

    def _create(self) -> None:
        schema = MilvusClient.create_schema(auto_id=False, enable_dynamic_field=False)
        schema.add_field("id", DataType.VARCHAR, is_primary=True, max_length=_MAX_ID)
        schema.add_field("vector", DataType.FLOAT_VECTOR, dim=self.model.dimension)
        schema.add_field("text", DataType.VARCHAR, max_length=_MAX_TEXT)
        schema.add_field("metadata", DataType.JSON)
        indexes = self.client.prepare_index_params()
        params = {"M": 16, "efConstruction": 200} if self.index == "HNSW" else {}
        indexes.add_index(
            field_name="vector", index_type=self.index, metric_type="COSINE", params=params
        )
        self.client.create_collection(
            self.collection,
            schema=schema,
            index_params=indexes,
            consistency_level="Strong",
            properties={_MODEL: self.model.model_id, _DIMENSION: str(self.model.dimension)},
        )

    async def search(self, request: ProviderRequest, ctx: NodeContext) -> ProviderResult:
        if request.namespace is not None:
            raise invalid("a Milvus target has no namespaces")
        if not isinstance(request.query, str):
            raise invalid("vector search needs a text query")
        unknown = sorted(request.options.keys() - {"explain"})
        if unknown:
            raise invalid(f"a Milvus target has no option {unknown[0]!r} (it takes: explain)")
        explain = request.options.get("explain", False)
        if not isinstance(explain, bool):
            raise invalid("options.explain must be true or false")
        expression = milvus_filter(request.filter)
        vector = (await embed_texts(self.embedder, [request.query], queries=True))[0].tolist()
        params: dict[str, Any] = {"metric_type": "COSINE"}
        if self.index == "HNSW":
            params["params"] = {"ef": max(request.limit, 64)}
        found = await self._run(
            lambda: self.client.search(
                self.collection,
                data=[vector],
                limit=request.limit,
                filter=expression,
                output_fields=_OUTPUT,
                search_params=params,
            )
        )
        hits = sorted(found[0], key=lambda hit: (-float(hit["distance"]), str(hit["id"])))
        candidates = []
        for rank, hit in enumerate(hits, start=1):
            entity = hit["entity"]
            score = float(hit["distance"])
            metadata = dict(entity.get("metadata") or {})
            if explain:
                metadata["explain"] = {"strategy": "vector", "vector_rank": rank, "cosine": score}
            candidates.append(
                RetrievalCandidate(
                    content=entity.get("text"),
                    id=str(hit["id"]),
                    score=score,
                    source=CandidateSource(request.target, str(hit["id"])),
                    metadata=metadata,
                )
            )
        return ProviderResult(candidates, {"index": self.index})


def milvus_filter(filter: MemoryFilter) -> str:
    """The Milvus boolean expression of ``filter``'s metadata equalities (``""``: none).

    Raises:
        RetrievalError: ``INVALID_INPUT`` for any other condition, or a boolean or null value.
    """
    if msgspec.structs.replace(filter, metadata=None) != MemoryFilter():
        raise invalid("a Milvus target filters on metadata only")
    terms = []
    for name, value in sorted((filter.metadata or {}).items()):
        if isinstance(value, bool) or value is None or not isinstance(value, str | int | float):
            raise invalid(f"a Milvus metadata filter takes strings and numbers ({name!r})")
        # Metadata keys match ^[A-Za-z0-9_:\-]{1,128}$ (the contract): safe inside quotes.
        literal = json.dumps(value, ensure_ascii=False)
        terms.append(f'metadata["{name}"] == {literal}')
    return " and ".join(terms)
