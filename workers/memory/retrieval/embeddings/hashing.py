"""``HashingEmbedder``: deterministic vectors from word and character-trigram hashes.

No model, no download, no extra: for demos, tests and "vector search on" before a real model is
installed. Similar wording gives similar vectors (shared words and trigrams), but it knows no
synonyms — use :class:`~workers.memory.retrieval.embeddings.minilm.MiniLMEmbedder` for meaning.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from hashlib import blake2b

import numpy as np

from ditto.errors import InvalidInputError
from workers.memory.retrieval.embeddings.base import Matrix
from workers.memory.retrieval.text import words

__all__ = ("HashingEmbedder",)

_TRIGRAM_WEIGHT = 0.5


class HashingEmbedder:
    """Signed feature hashing of words (weight 1) and character trigrams (weight 0.5).

    Args:
        dimension: Vector length (the hash space), 8..65536.
    """

    def __init__(self, dimension: int = 256) -> None:
        if isinstance(dimension, bool) or not isinstance(dimension, int):
            raise InvalidInputError("dimension must be an integer")
        if not 8 <= dimension <= 65_536:
            raise InvalidInputError("dimension must be from 8 to 65536")
        self.dimension = dimension
        self.model_id = f"ditto-hashing-v1-{dimension}"

    async def embed(self, texts: Sequence[str]) -> Matrix:
        if len(texts) > 64:  # big batches off the event loop
            return await asyncio.to_thread(self.embed_now, texts)
        return self.embed_now(texts)

    def embed_now(self, texts: Sequence[str]) -> Matrix:
        """The vectors, computed in the calling thread."""
        matrix = np.zeros((len(texts), self.dimension), dtype=np.float32)
        for row, text in enumerate(texts):
            for word in words(text):
                self._add(matrix, row, word, 1.0)
                padded = f"<{word}>"
                for start in range(len(padded) - 2):
                    self._add(matrix, row, padded[start : start + 3], _TRIGRAM_WEIGHT)
        return matrix

    def _add(self, matrix: Matrix, row: int, feature: str, weight: float) -> None:
        digest = int.from_bytes(blake2b(feature.encode(), digest_size=8).digest(), "little")
        sign = 1.0 if digest >> 63 else -1.0
        matrix[row, digest % self.dimension] += sign * weight
