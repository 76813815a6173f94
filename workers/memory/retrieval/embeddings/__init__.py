"""Embedders for vector search: the ``Embedder`` port, ``HashingEmbedder`` (no model),
``MiniLMEmbedder`` (all-MiniLM-L6-v2 in numpy) and ``CallableEmbedder`` (any function)."""

from workers.memory.retrieval.embeddings.base import Embedder, EmbeddingModel, embed_texts, model_of
from workers.memory.retrieval.embeddings.callable import CallableEmbedder
from workers.memory.retrieval.embeddings.hashing import HashingEmbedder
from workers.memory.retrieval.embeddings.minilm import MiniLMEmbedder

__all__ = (
    "CallableEmbedder",
    "Embedder",
    "EmbeddingModel",
    "HashingEmbedder",
    "MiniLMEmbedder",
    "embed_texts",
    "model_of",
)
