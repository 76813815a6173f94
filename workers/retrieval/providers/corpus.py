"""``CorpusProvider``: a folder of text and Markdown files as a RETRIEVAL target.

At :meth:`~CorpusProvider.open` every ``*.md``, ``*.markdown`` and ``*.txt`` file under the
folder is read (UTF-8), cut into chunks of whole paragraphs (at most ``chunk_words`` words; a
longer paragraph is cut between words) and indexed in memory: an
:class:`~workers.memory.stores.inprocess.InProcessMemoryStore` holds one record per chunk with
its BM25 terms and, with an embedder, its vector. The corpus is then searched with the MEMORY
worker's own pipeline (:mod:`.pipeline`), so keyword, vector and hybrid ranking, fusion and the
rerank stage are the same ones MEMORY.SEARCH uses. Nothing is written back to the folder.

A chunk's id is ``<path>#<n>`` (the path relative to the folder, with ``/``; ``n`` counts from
0), stable while the file's text is; its metadata holds ``path``, ``folder`` (the path's
directory, ``""`` at the top), ``chunk`` and, for Markdown, the file's first heading as
``title``. Filters are the MEMORY filter over those records (``metadata``, ``source`` = path,
``created_after``... by the file's modification time). :meth:`reload` reads the folder again.

Chunks are embedded once: a reload embeds only the chunks whose text changed, and with a
``cache`` file (:mod:`workers.memory.retrieval.embeddings.cache`) the next process embeds
only what the file lacks.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import anyio

from ditto.errors import ErrorCode
from ditto.runtime.context import NodeContext
from workers.memory.model.contracts import MemoryItem
from workers.memory.model.records import now_from, utc_now
from workers.memory.retrieval.embeddings.base import Embedder, model_of
from workers.memory.retrieval.embeddings.cache import VectorCache, VectorCacheError
from workers.memory.retrieval.hybrid import SearchEngine, SearchSettings
from workers.memory.retrieval.vectors import Vectors, vector_text
from workers.memory.stores.inprocess import InProcessMemoryStore
from workers.retrieval.contracts import CandidateSource, RetrievalCandidate
from workers.retrieval.errors import RetrievalError, invalid
from workers.retrieval.ports import ProviderRequest, ProviderResult
from workers.retrieval.providers.pipeline import engine_strategies, run_engine

__all__ = ("SUFFIXES", "CorpusProvider", "chunk_text")

SUFFIXES = (".md", ".markdown", ".txt")
_PARAGRAPH = re.compile(r"\n\s*\n")
_HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*#*\s*$", re.MULTILINE)
_MAX_FILE_BYTES = 20_000_000
"""A larger file is refused at open: a corpus is text people wrote, not a data dump."""


def chunk_text(text: str, chunk_words: int) -> list[str]:
    """``text`` as chunks of at most ``chunk_words`` words that end between paragraphs where
    they can: a paragraph that fits in a chunk of its own is never cut, and only one longer
    than a chunk is cut between words (its first piece filling what the chunk has left, so a
    heading stays with the text under it); no empty chunk."""
    chunks: list[str] = []
    current: list[str] = []
    size = 0
    for paragraph in _PARAGRAPH.split(text):
        words = paragraph.split()
        whole = True
        while words:
            room = chunk_words - size
            if len(words) <= room:
                current.append(paragraph.strip() if whole else " ".join(words))
                size += len(words)
                break
            if size and len(words) <= chunk_words:
                taken: list[str] = []  # it fits a chunk of its own: start one
            else:
                taken, words, whole = words[:room], words[room:], False
                current.append(" ".join(taken))
            chunks.append("\n\n".join(current))
            current, size = [], 0
    if current:
        chunks.append("\n\n".join(current))
    return chunks


class CorpusProvider:
    """Searches the text and Markdown files under ``folder`` (see the module).

    Args:
        folder: The corpus; it must exist when the provider opens.
        embedder: Embeds every chunk at open and each query: turns on ``vector`` and
            ``hybrid`` (``auto`` becomes hybrid).
        settings: The pipeline's defaults (fusion, ``min_score``, rerank...).
        chunk_words: Most words of a chunk (16..2000).
        cache: A file to keep the chunks' vectors in between processes (see
            :mod:`workers.memory.retrieval.embeddings.cache`); ``None``: they are kept in
            memory between reloads only.
    """

    kind = "corpus"

    def __init__(
        self,
        folder: str | Path,
        embedder: Embedder | None = None,
        *,
        settings: SearchSettings | None = None,
        chunk_words: int = 200,
        cache: str | Path | None = None,
    ) -> None:
        if isinstance(chunk_words, bool) or not isinstance(chunk_words, int):
            raise invalid("chunk_words must be an integer")
        if not 16 <= chunk_words <= 2000:
            raise invalid("chunk_words must be from 16 to 2000")
        if embedder is not None:
            model_of(embedder)  # a clear error now, not at open
        self.folder = Path(folder)
        self.embedder = embedder
        self.settings = settings
        self.chunk_words = chunk_words
        self.vectors = VectorCache(cache)
        self._store = InProcessMemoryStore()
        self._engine = SearchEngine(self._store, embedder, settings)
        self.strategies = engine_strategies(self._store, self._engine)
        self._size = 0
        self._opened = False
        self._lock = anyio.Lock()

    @property
    def size(self) -> int:
        """Chunks indexed (0 before :meth:`open`)."""
        return self._size

    async def open(self) -> None:
        if self._opened:
            return
        async with self._lock:
            if not self._opened:
                await self._load()
                self._opened = True

    async def reload(self) -> None:
        """Read the folder again (a search meanwhile sees the old index or the new one)."""
        async with self._lock:
            await self._load()
            self._opened = True

    async def aclose(self) -> None:
        """Nothing to release: the index lives in this process."""

    async def _load(self) -> None:
        records = await anyio.to_thread.run_sync(self._read_folder)
        store = InProcessMemoryStore()
        await store.restore(records)
        if self.embedder is not None and records:
            model = model_of(self.embedder)
            texts = [vector_text(item) for item in records]
            try:
                matrix = await self.vectors.embed(self.embedder, texts)
            except VectorCacheError as exc:
                raise _unreadable(exc.message) from exc
            await store.put_vectors([item.id for item in records], Vectors(model, matrix))
        engine = SearchEngine(store, self.embedder, self.settings)
        # One swap: a search sees the old index or the new one, never half of one.
        self._store, self._engine, self._size = store, engine, len(records)

    def _read_folder(self) -> list[MemoryItem]:
        if not self.folder.is_dir():
            raise _unreadable(f"the corpus folder {self.folder.name!r} does not exist")
        return [record for path in self._files() for record in self._records(path)]

    def _files(self) -> Iterator[Path]:
        for path in sorted(self.folder.rglob("*")):
            relative = path.relative_to(self.folder)
            if any(part.startswith(".") for part in relative.parts):
                continue  # .git and other hidden folders are not the corpus
            if path.suffix.lower() in SUFFIXES and path.is_file():
                yield path

    def _records(self, path: Path) -> list[MemoryItem]:
        relative = path.relative_to(self.folder).as_posix()
        try:
            if path.stat().st_size > _MAX_FILE_BYTES:
                raise _unreadable(f"corpus file {relative!r} is over {_MAX_FILE_BYTES} bytes")
            text = path.read_text(encoding="utf-8")
            modified = datetime.fromtimestamp(path.stat().st_mtime, UTC)
        except UnicodeDecodeError:
            raise _unreadable(f"corpus file {relative!r} is not UTF-8 text") from None
        except OSError as exc:
            raise RetrievalError(
                f"cannot read corpus file {relative!r} ({exc.strerror or 'I/O error'})",
                code=ErrorCode.RETRIEVAL_PROVIDER_UNAVAILABLE,
                retryable=True,
            ) from exc
        heading = _HEADING.search(text) if path.suffix.lower() != ".txt" else None
        base = {"path": relative, "folder": path.relative_to(self.folder).parent.as_posix()}
        if base["folder"] == ".":
            base["folder"] = ""
        if heading is not None:
            base["title"] = heading.group(1)
        return [
            MemoryItem(
                id=f"{relative}#{number}",
                key=None,
                namespace="default",
                content=chunk,
                summary=None,
                category="document",
                tags=[],
                metadata={**base, "chunk": number},
                source=relative,
                created_at=modified,
                updated_at=modified,
                version=1,
                usage_count=0,
                last_used_at=None,
            )
            for number, chunk in enumerate(chunk_text(text, self.chunk_words))
        ]

    async def search(self, request: ProviderRequest, ctx: NodeContext) -> ProviderResult:
        if request.namespace is not None:
            raise invalid("a corpus target has no namespaces")
        now = now_from(utc_now)
        hits, missing = await run_engine(self._engine, request, request.filter, ctx, now)
        candidates = [
            RetrievalCandidate(
                content=hit.memory.content,
                id=hit.memory.id,
                score=hit.score,
                source=CandidateSource(request.target, hit.memory.id),
                metadata={
                    **hit.memory.metadata,
                    **({} if hit.explain is None else {"explain": hit.explain}),
                },
            )
            for hit in hits
        ]
        return ProviderResult(candidates, None if missing is None else {"vector_missing": missing})


def _unreadable(message: str) -> RetrievalError:
    """The corpus cannot be served as it is (the folder or a file): not the caller's input."""
    return RetrievalError(message, code=ErrorCode.RETRIEVAL_PROVIDER_UNAVAILABLE)
