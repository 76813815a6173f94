"""Vectors of texts already embedded, so a corpus is embedded once, not at every open.

A :class:`VectorCache` answers "the vector of this text under this model" for the texts it has
seen, and embeds the others. It always keeps the vectors of the last texts it was asked about
in memory (the RETRIEVAL worker's corpus provider reloads a folder embedding only the chunks
that changed), and with a ``path`` it also keeps every vector in a SQLite file there, so the
next process opening the same corpus embeds nothing it already has.

Entries are keyed by the embedding model's identity (``model_id`` and dimension: vectors of two
models are never mixed) and the SHA-256 of the exact text embedded; a changed chunk has another
hash, so a stale vector is never served. The file is only a cache: one that is not a readable
cache is moved aside (``<name>.damaged``, kept for a person to look at) with a warning naming
it, and a new one is started; nothing is ever deleted.
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Iterable, Sequence
from pathlib import Path

import anyio
import numpy as np

from ditto.errors import ErrorCode
from workers.memory.model.errors import MemoryStoreError
from workers.memory.retrieval.embeddings.base import (
    Embedder,
    EmbeddingModel,
    Matrix,
    embed_texts,
    model_of,
)
from workers.memory.retrieval.vectors import hash_text

__all__ = ("VectorCache", "VectorCacheError")

logger = logging.getLogger("ditto.workers.memory.vector_cache")

_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS vectors (model TEXT NOT NULL, dimension INTEGER NOT NULL, "
    "hash TEXT NOT NULL, vector BLOB NOT NULL, PRIMARY KEY (model, dimension, hash)) "
    "WITHOUT ROWID"
)
_LOOKUP_BATCH = 500
"""Hashes per lookup statement (SQLite's default limit is 32,766 parameters)."""


class VectorCacheError(MemoryStoreError):
    """The cache file cannot be used (a folder that cannot be written, a full disk...)."""

    default_code = ErrorCode.STORE_UNAVAILABLE


class VectorCache:
    """Vectors by model and text (see the module).

    Args:
        path: The SQLite file to keep vectors in across processes (created with its folder;
            ``~`` is the home folder); ``None``: in memory only, for the texts of the last
            :meth:`embed`.
    """

    def __init__(self, path: str | Path | None = None) -> None:
        self.path = None if path is None else Path(path).expanduser()
        self._recent: dict[tuple[EmbeddingModel, str], Matrix] = {}
        self.embedded = 0
        """Texts the last :meth:`embed` had to embed (the others came from the cache)."""

    async def embed(self, embedder: Embedder, texts: Sequence[str]) -> Matrix:
        """The ``(len(texts), dimension)`` unit vectors of ``texts``, embedding only those
        neither the memory nor the file holds for this model (and adding them to both).

        Raises:
            VectorCacheError: ``STORE_UNAVAILABLE`` when the file cannot be used (a folder
                that cannot be written, a full disk).
            MemoryStoreError: As :func:`embed_texts` does, when the embedder fails.
        """
        model = model_of(embedder)
        hashes = [hash_text(text) for text in texts]
        found = {h: self._recent[(model, h)] for h in hashes if (model, h) in self._recent}
        if self.path is not None:
            wanted = [h for h in dict.fromkeys(hashes) if h not in found]
            found |= await anyio.to_thread.run_sync(self._read, model, wanted)
        missing = list(dict.fromkeys(h for h in hashes if h not in found))
        first_text = dict(zip(hashes, texts, strict=True))
        fresh = await embed_texts(embedder, [first_text[h] for h in missing])
        found |= dict(zip(missing, fresh, strict=True))
        if self.path is not None and missing:
            await anyio.to_thread.run_sync(self._write, model, zip(missing, fresh, strict=True))
        self.embedded = len(missing)
        # Keep what this corpus holds now: a reload asks for the same texts again.
        self._recent = {(model, h): found[h] for h in hashes}
        if not hashes:
            return np.zeros((0, model.dimension), dtype=np.float32)
        return np.stack([found[h] for h in hashes]).astype(np.float32, copy=False)

    def _read(self, model: EmbeddingModel, hashes: list[str]) -> dict[str, Matrix]:
        found: dict[str, Matrix] = {}
        if not hashes:
            return found
        with self._connection() as connection:
            for start in range(0, len(hashes), _LOOKUP_BATCH):
                part = hashes[start : start + _LOOKUP_BATCH]
                rows = connection.execute(
                    "SELECT hash, vector FROM vectors WHERE model = ? AND dimension = ? "
                    f"AND hash IN ({', '.join('?' * len(part))})",
                    (model.model_id, model.dimension, *part),
                )
                for text_hash, blob in rows:
                    vector = np.frombuffer(blob, dtype=np.float32)
                    if vector.shape == (model.dimension,) and np.isfinite(vector).all():
                        found[text_hash] = vector
        return found

    def _write(self, model: EmbeddingModel, vectors: Iterable[tuple[str, Matrix]]) -> None:
        rows = [
            (model.model_id, model.dimension, text_hash, np.asarray(vector, np.float32).tobytes())
            for text_hash, vector in vectors
        ]
        with self._connection() as connection:
            connection.executemany("INSERT OR REPLACE INTO vectors VALUES (?, ?, ?, ?)", rows)

    def _connection(self) -> _Cache:
        assert self.path is not None
        return _Cache(self.path)


class _Cache:
    """One use of the cache file: opened (created, or moved aside and started again when it is
    not a cache), committed and closed."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._connection: sqlite3.Connection | None = None

    def __enter__(self) -> sqlite3.Connection:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._connection = self._open()
        except sqlite3.DatabaseError as exc:
            if not self.path.exists() or isinstance(exc, sqlite3.OperationalError):
                raise _unwritable(self.path, exc) from exc
            aside = self.path.with_name(self.path.name + ".damaged")
            logger.warning(
                "the vector cache %s is not a readable cache (%s): moved to %s, starting a new one",
                self.path,
                exc,
                aside.name,
            )
            self.path.replace(aside)
            self._connection = self._open()
        except OSError as exc:
            raise _unwritable(self.path, exc) from exc
        return self._connection

    def _open(self) -> sqlite3.Connection:
        connection = sqlite3.connect(self.path, timeout=30)
        try:
            connection.execute(_SCHEMA)
            connection.execute("SELECT count(*) FROM vectors WHERE 0").fetchone()
        except BaseException:
            connection.close()
            raise
        return connection

    def __exit__(self, kind: object, error: BaseException | None, trace: object) -> None:
        assert self._connection is not None
        try:
            if isinstance(error, sqlite3.Error):  # a table of another shape, a full disk
                raise _unwritable(self.path, error) from error
            if error is None:
                self._connection.commit()
        except sqlite3.Error as exc:
            raise _unwritable(self.path, exc) from exc
        finally:
            self._connection.close()


def _unwritable(path: Path, exc: BaseException) -> VectorCacheError:
    # An OSError's text names the whole path; the file's name is enough (and safe) here.
    reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
    return VectorCacheError(
        f"the vector cache {path.name!r} cannot be used ({type(exc).__name__}: {reason})"
    )
