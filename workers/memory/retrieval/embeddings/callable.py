"""``CallableEmbedder``: any function as an embedder (a hosted embedding API, a local model)."""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from workers.memory.retrieval.embeddings.base import EmbeddingModel

__all__ = ("CallableEmbedder",)

EmbedFunction = Callable[[list[str]], Any | Awaitable[Any]]


class CallableEmbedder:
    """Wraps ``fn(texts) -> vectors`` (sync or async) with the identity the store keeps.

    Example::

        async def embed(texts: list[str]) -> list[list[float]]:
            response = await client.embeddings.create(model="text-embedding-3-small", input=texts)
            return [item.embedding for item in response.data]

        embedder = CallableEmbedder(embed, model_id="openai/text-embedding-3-small", dimension=1536)

    Every vector it returns is checked (count, dimension, finite values) before anything is
    stored. A sync ``fn`` runs in the calling thread: keep it fast, or make it async.

    Args:
        fn: Takes a list of texts, returns one vector per text.
        model_id: Names the model; vectors of another ``model_id`` are never compared.
        dimension: The vector length ``fn`` returns.
    """

    def __init__(self, fn: EmbedFunction, model_id: str, dimension: int) -> None:
        if not callable(fn):
            raise TypeError("fn must be callable")
        model = EmbeddingModel(model_id, dimension)
        self.fn = fn
        self.model_id = model.model_id
        self.dimension = model.dimension

    async def embed(self, texts: Sequence[str]) -> Any:
        result = self.fn(list(texts))
        if inspect.isawaitable(result):
            result = await result
        return result
