"""The ``Embedder`` port and the checks every embedding goes through.

An embedder turns texts into vectors of one model. The store keeps each vector with its model's
identity (``model_id`` and ``dimension``) and refuses to compare vectors of different models
(``EMBEDDING_MISMATCH``). Every vector is checked — count, dimension, finite values — and
L2-normalised once here, so cosine similarity is a dot product everywhere else.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from ditto.errors import DittoError, ErrorCode, InvalidInputError
from workers.memory.model.errors import MemoryStoreError

__all__ = (
    "Embedder",
    "EmbeddingModel",
    "Matrix",
    "cosine_floor_of",
    "embed_texts",
    "embeds_queries_apart",
    "model_of",
)

logger = logging.getLogger("ditto.workers.memory.embeddings")

Matrix = npt.NDArray[np.float32]
"""``(n, dimension)`` float32 vectors, one row per text, L2-normalised."""


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into vectors of one model.

    ``model_id`` names the model (and its version); ``dimension`` is the vector length. ``embed``
    returns one vector per text, in order, as a sequence of float sequences or a 2-D array.

    Optional: ``window`` (an ``int``, in words) — how much of a text the model reads. A record
    longer than that is embedded in overlapping chunks, one vector each
    (:mod:`~workers.memory.retrieval.chunking`); without it every text is embedded whole.

    Optional: ``async embed_query(texts)`` — vectors for search queries, for a model trained
    with different inputs for a query and a passage (e5's ``query:`` and ``passage:``
    prefixes). Searches embed their query with it; records, chunks and candidates always go
    through ``embed``. Without it a query is embedded like any text.

    Optional: ``cosine_floor`` (a ``float`` in [0, 1)) — the cosine a query typically has
    with an unrelated text. MiniLM's is about 0.05 (it declares none: 0); e5's about 0.77,
    so its relevant texts score 0.85-0.9 and unrelated ones 0.75-0.8. The hybrid fusion
    measures a vector leg's scores from it (``(cosine - floor) / (1 - floor)``), or the leg
    would look flat on every query and count for nothing.
    """

    model_id: str
    dimension: int

    async def embed(self, texts: Sequence[str]) -> Any: ...


@dataclass(frozen=True, slots=True)
class EmbeddingModel:
    """The identity a store keeps with every vector."""

    model_id: str
    dimension: int

    def __post_init__(self) -> None:
        if not isinstance(self.model_id, str) or not self.model_id or len(self.model_id) > 256:
            raise InvalidInputError("an embedder's model_id must be a non-empty string")
        if isinstance(self.dimension, bool) or not isinstance(self.dimension, int):
            raise InvalidInputError("an embedder's dimension must be an integer")
        if not 1 <= self.dimension <= 65_536:
            raise InvalidInputError("an embedder's dimension must be from 1 to 65536")

    def __str__(self) -> str:
        return f"{self.model_id} ({self.dimension}-d)"


def model_of(embedder: Embedder) -> EmbeddingModel:
    """The embedder's identity, checked.

    Raises:
        InvalidInputError: Not an embedder, or a bad ``model_id`` / ``dimension``.
    """
    if not isinstance(embedder, Embedder) or not inspect.iscoroutinefunction(embedder.embed):
        raise InvalidInputError(
            "an embedder needs model_id, dimension and an async embed(texts) method"
        )
    return EmbeddingModel(embedder.model_id, embedder.dimension)


def embeds_queries_apart(embedder: Embedder) -> bool:
    """Whether ``embedder`` has its own ``embed_query`` for search queries."""
    return inspect.iscoroutinefunction(getattr(embedder, "embed_query", None))


def cosine_floor_of(embedder: Embedder) -> float:
    """The embedder's ``cosine_floor`` (0 when it declares none).

    Raises:
        InvalidInputError: A ``cosine_floor`` that is not a number in [0, 1).
    """
    floor = getattr(embedder, "cosine_floor", None)  # optional in the Embedder port
    if floor is None:
        return 0.0
    if isinstance(floor, bool) or not isinstance(floor, int | float) or not 0 <= floor < 1:
        raise InvalidInputError("an embedder's cosine_floor must be a number from 0 to below 1")
    return float(floor)


def _failed(message: str) -> MemoryStoreError:
    return MemoryStoreError(message, code=ErrorCode.EMBEDDING_FAILED)


async def embed_texts(
    embedder: Embedder, texts: Sequence[str], *, batch_size: int = 64, queries: bool = False
) -> Matrix:
    """Embed ``texts`` in batches and check the result.

    ``queries=True`` embeds search queries: through the embedder's ``embed_query`` when it has
    one (see :class:`Embedder`), else through ``embed``.

    Returns:
        A ``(len(texts), dimension)`` float32 matrix of L2-normalised rows (an all-zero vector
        stays zero: it is similar to nothing).

    Raises:
        MemoryStoreError: ``EMBEDDING_FAILED`` when the embedder raises or returns the wrong
            number of vectors, a wrong dimension or a value that is not finite;
            ``EMBEDDER_UNAVAILABLE`` (and other coded errors) from the embedder as they are.
    """
    dimension = embedder.dimension
    if not texts:
        return np.zeros((0, dimension), dtype=np.float32)
    embed = embedder.embed
    if queries and embeds_queries_apart(embedder):
        embed = embedder.embed_query  # type: ignore[attr-defined]
    parts: list[Matrix] = []
    for start in range(0, len(texts), batch_size):
        batch = list(texts[start : start + batch_size])
        try:
            raw = await embed(batch)
        except DittoError:
            raise
        except Exception as exc:
            logger.exception("the embedder %r failed", embedder.model_id)
            raise _failed(
                f"the embedder {embedder.model_id!r} failed (details in the log)"
            ) from exc
        try:
            vectors = np.asarray(raw, dtype=np.float32)
        except (TypeError, ValueError) as exc:
            raise _failed(
                f"the embedder {embedder.model_id!r} returned something that is not vectors"
            ) from exc
        if vectors.ndim != 2 or vectors.shape[0] != len(batch):
            count = vectors.shape[0] if vectors.ndim else 0
            raise _failed(
                f"the embedder {embedder.model_id!r} returned {count} vectors for {len(batch)} "
                "texts (or not one vector per text)"
            )
        if vectors.shape[1] != dimension:
            raise _failed(
                f"the embedder {embedder.model_id!r} returned {vectors.shape[1]}-d vectors; it "
                f"declares dimension {dimension}"
            )
        if not np.isfinite(vectors).all():
            raise _failed(f"the embedder {embedder.model_id!r} returned a value that is not finite")
        parts.append(vectors)
    matrix = np.concatenate(parts) if len(parts) > 1 else parts[0]
    return normalised(matrix)


def normalised(matrix: Matrix) -> Matrix:
    """Rows scaled to unit length (zero rows stay zero), as a new contiguous float32 array."""
    squares = np.einsum("ij,ij->i", matrix, matrix)  # cheaper than linalg.norm for one row
    norms = np.sqrt(np.maximum(squares, np.float32(1e-24)))[:, None]
    return np.ascontiguousarray(matrix / norms, dtype=np.float32)
