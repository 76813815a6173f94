"""Long texts in chunks: what is embedded for a record whose text exceeds the embedder's window.

An embedder reads a bounded window (MiniLM: 256 word pieces) and ignores the rest, so one vector
per record leaves a long record's later passages unfindable by meaning. A record is therefore
embedded as *chunks*: a text of at most ``window`` words is one chunk (itself, unchanged); a
longer one is cut into windows of ``window`` words, each starting ``3/4 · window`` words after
the previous one (a quarter overlaps, so a passage cut by one boundary is whole in the next
window), at most :data:`MAX_CHUNKS` of them. The store keeps one vector per chunk and ranks a
record by its best chunk (:mod:`~workers.memory.retrieval.vector_index`).

The window is the embedder's optional ``window`` attribute, in *words* (whitespace-separated
tokens) — the unit the splitter counts. MiniLM declares 128: about 170 word pieces of English
prose, which leaves room inside its 256 for punctuation and rare words that split into several
pieces. An embedder without a window (the hashing embedder reads any length) embeds every text
whole. The rerank stage's embedding reranker splits with this same function.
"""

from __future__ import annotations

from collections.abc import Sequence

from ditto.errors import InvalidInputError
from workers.memory.retrieval.embeddings.base import Embedder, EmbeddingModel, embed_texts
from workers.memory.retrieval.vectors import Vectors, hash_text

__all__ = ("MAX_CHUNKS", "chunks", "embed_records", "window_of")

MAX_CHUNKS = 128
"""Most chunks stored per record: ``128 × 96 + 32`` = 12,320 words at MiniLM's window (a long
chat session is a few thousand); words past them are not embedded (keyword search still finds
them). Bounds one record's vectors at 192 KB (384-d)."""


def window_of(embedder: Embedder) -> int | None:
    """The embedder's window in words (``None``: it reads any length).

    Raises:
        InvalidInputError: A ``window`` that is not a positive integer.
    """
    window = getattr(embedder, "window", None)  # optional in the Embedder port
    if window is None:
        return None
    if isinstance(window, bool) or not isinstance(window, int) or window < 4:
        raise InvalidInputError("an embedder's window must be an integer of at least 4 words")
    return window


def chunks(text: str, window: int | None, limit: int = MAX_CHUNKS) -> list[str]:
    """``text`` in overlapping windows of ``window`` words (at most ``limit``); the text itself
    when it fits (or ``window`` is ``None``), and ``[""]`` for an empty one (it is similar to
    nothing)."""
    if window is None:
        return [text]
    words = text.split()
    if len(words) <= window:
        return [text]
    stride = max(window * 3 // 4, 1)
    starts = range(0, len(words) - window + stride, stride)
    return [" ".join(words[start : start + window]) for start in starts][:limit]


async def embed_records(embedder: Embedder, model: EmbeddingModel, texts: Sequence[str]) -> Vectors:
    """The vectors of records whose embedded texts are ``texts``: one per chunk, in one run of
    the embedder, with each text's hash (the store checks it against the record it keeps).

    Raises:
        MemoryStoreError: ``EMBEDDING_FAILED`` (or the embedder's own coded error).
    """
    window = window_of(embedder)
    pieces = [chunks(text, window) for text in texts]
    matrix = await embed_texts(embedder, [piece for split in pieces for piece in split])
    counts = None if window is None else tuple(len(split) for split in pieces)
    return Vectors(model, matrix, tuple(map(hash_text, texts)), counts)
