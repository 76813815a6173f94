"""The Markdown store's vectors on disk: ``.ditto/vectors.bin``, an append-only log of frames,
mirrored in memory with the index vector search ranks by.

Vectors are derived data — an embedding of a record's text — so they live beside the records,
not in them: git ignores the log (``.ditto/.gitignore``), and a deleted log is rebuilt from the
files by ``ditto memory reindex``. Each vector carries the hash of the text it was computed
from, and counts only while the record still has that text: a person's edit leaves the record
without a vector (reported as missing) until it is embedded again. So the log never has to be
in step with the record files: it is appended after each batch commits, and a crash between
the two can make a vector late, never wrong.

A frame is ``kind (1 byte) | payload length (u32) | payload | crc32 of the three (u32)``,
little endian. ``S``: the store's models (JSON: the active one and a reindex target); ``V``:
a record's vectors of one model (model id, dimension, record id, text hash, then one vector of
``dimension`` float32 components per chunk of its text — one for a short text, several for one
longer than the embedder's window, all replaced together); ``X``: a record's vectors are gone.
A frame cut short by a crash, or one whose checksum fails, ends the log: it is cut there (what
followed is lost, and reported as missing vectors). When the log holds more than twice as many
frames as the vectors it describes, it is rewritten (temporary file and rename); other stores
on the folder notice the new file and read it from the start. Every store on the folder appends
holding the folder's lock, so a store catches up by reading what was appended since it last
looked.
"""

from __future__ import annotations

import logging
import os
import struct
import zlib
from collections.abc import Collection, Sequence
from pathlib import Path

import msgspec
import numpy as np

from workers.memory.retrieval.embeddings.base import EmbeddingModel, Matrix
from workers.memory.retrieval.vectors import VectorIndex, VectorState
from workers.memory.stores.markdown.files import atomic_write

__all__ = ("VectorLog",)

logger = logging.getLogger("workers.memory.stores.markdown")

_HEAD = struct.Struct("<cI")
_CRC = struct.Struct("<I")
_SHORT = struct.Struct("<H")
_WORD = struct.Struct("<I")
_STATE, _VECTOR, _FORGET = b"S", b"V", b"X"
_MIN_COMPACTION = 1024
"""Frames a log may hold beyond twice its vectors before it is rewritten."""


class _StateFrame(msgspec.Struct, frozen=True):
    active: tuple[str, int] | None = None
    target: tuple[str, int] | None = None


def _model(pair: tuple[str, int] | None) -> EmbeddingModel | None:
    return EmbeddingModel(pair[0], pair[1]) if pair is not None else None


def _pair(model: EmbeddingModel | None) -> tuple[str, int] | None:
    return (model.model_id, model.dimension) if model is not None else None


Held = dict[EmbeddingModel, tuple[Matrix, str]]
"""A record's vectors: model -> (unit vectors, one row per chunk; hash of their text)."""


class VectorLog:
    """The vectors of one Markdown folder (use it holding the folder's lock).

    Args:
        path: The log file (it may not exist yet: no vectors, no model).
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self.state = VectorState()
        self.held: dict[str, Held] = {}
        """id -> its vectors, of every model the log holds."""
        self.index = VectorIndex()
        """The active model's vectors, ranked by vector search."""
        self._frames = 0
        self._read_to = 0
        self._inode: int | None = None

    # ----------------------------------------------------------------- reading

    def refresh(self) -> None:
        """Take in what other stores appended (everything, when the file was replaced or
        removed), cutting a torn or corrupt tail."""
        try:
            stat = self.path.stat()
            size, inode = stat.st_size, stat.st_ino
        except FileNotFoundError:
            size, inode = 0, None
        if inode != self._inode or size < self._read_to:
            self._forget_everything()
            self._inode = inode
        if size == self._read_to:
            return
        with open(self.path, "rb") as file:
            file.seek(self._read_to)
            data = file.read(size - self._read_to)
        used = self._apply(data)
        if used < len(data):
            logger.warning(
                "cutting %s at byte %d: the rest is a frame a crash left unfinished or a "
                "damaged one (the records it held will be reported as lacking vectors until "
                "`ditto memory reindex`)",
                self.path,
                self._read_to + used,
            )
            with open(self.path, "r+b") as file:
                file.truncate(self._read_to + used)
        self._read_to += used

    def _forget_everything(self) -> None:
        self.state, self.held, self._frames, self._read_to = VectorState(), {}, 0, 0
        self.index.reset(None)

    def _apply(self, data: bytes) -> int:
        """Apply the whole frames at the start of ``data``; how many bytes they take."""
        view = memoryview(data)
        at = 0
        while at + _HEAD.size <= len(data):
            kind, length = _HEAD.unpack_from(view, at)
            end = at + _HEAD.size + length
            if end + _CRC.size > len(data):
                break
            (crc,) = _CRC.unpack_from(view, end)
            if zlib.crc32(view[at:end]) != crc or kind not in (_STATE, _VECTOR, _FORGET):
                break
            payload = view[at + _HEAD.size : end]
            try:
                self._apply_frame(kind, payload)
            except (ValueError, msgspec.DecodeError, struct.error, UnicodeDecodeError):
                break  # a frame that checks out but does not parse: written by no store
            self._frames += 1
            at = end + _CRC.size
        return at

    def _apply_frame(self, kind: bytes, payload: memoryview) -> None:
        if kind == _STATE:
            frame = msgspec.json.decode(payload, type=_StateFrame)
            self._set_state(VectorState(_model(frame.active), _model(frame.target)))
        elif kind == _VECTOR:
            model, item_id, fingerprint, vector = _parse_vector(payload)
            self._hold(item_id, model, vector, fingerprint)
        else:
            (length,) = _SHORT.unpack_from(payload, 0)
            self._drop(bytes(payload[_SHORT.size : _SHORT.size + length]).decode())

    # ----------------------------------------------------------------- in memory

    def _set_state(self, state: VectorState) -> None:
        active = state.active
        if active != self.state.active:
            self.index.reset(active)
            ids = [item_id for item_id, held in self.held.items() if active in held]
            if active is not None and ids:
                chunks = [self.held[i][active][0] for i in ids]
                self.index.upsert(ids, np.concatenate(chunks), [len(rows) for rows in chunks])
        self.state = state

    def _hold(self, item_id: str, model: EmbeddingModel, vector: Matrix, fingerprint: str) -> None:
        held = self.held.setdefault(item_id, {})
        for other in [m for m, (_, old) in held.items() if old != fingerprint]:
            del held[other]  # another model's vector of the old text is stale
            if other == self.state.active:
                self.index.remove([item_id])
        held[model] = (vector, fingerprint)
        if model == self.state.active:
            self.index.upsert([item_id], vector, [len(vector)])

    def _drop(self, item_id: str) -> None:
        if self.held.pop(item_id, None) is not None:
            self.index.remove([item_id])

    # ----------------------------------------------------------------- writing

    def set_state(self, state: VectorState) -> None:
        """Record the store's models."""
        self.refresh()
        self._append(_state_frame(state))

    def put(
        self,
        model: EmbeddingModel,
        ids: Sequence[str],
        vectors: Sequence[Matrix],
        fingerprints: Sequence[str],
    ) -> None:
        """Keep ``vectors[i]`` (one row per chunk) as the vectors of ``ids[i]``, computed from
        the text hashed ``fingerprints[i]``; the first model becomes the active one."""
        self.refresh()  # a log a person removed since the operation began starts afresh
        frames = []
        if self.state.active is None:
            frames.append(_state_frame(VectorState(model, self.state.target)))
        frames.extend(
            _vector_frame(model, item_id, chunks, fingerprint)
            for item_id, chunks, fingerprint in zip(ids, vectors, fingerprints, strict=True)
        )
        self._append(b"".join(frames))

    def forget(self, ids: Collection[str]) -> None:
        """Drop every vector of ``ids`` (deleted records)."""
        self.refresh()
        gone = [item_id for item_id in ids if item_id in self.held]
        if gone:
            self._append(b"".join(_frame(_FORGET, _text(item_id)) for item_id in gone))

    def keep_only(self, state: VectorState, live: Collection[str]) -> None:
        """Rewrite the log with ``state`` and the vectors of the ``live`` records of its
        models: a finished reindex drops the old model's, and a log grown long with
        replaced and deleted vectors shrinks to one frame per vector."""
        models = {state.active, state.target} - {None}
        frames = [_state_frame(state)]
        for item_id in sorted(set(live) & self.held.keys()):
            frames.extend(
                _vector_frame(model, item_id, vector, fingerprint)
                for model, (vector, fingerprint) in sorted(
                    self.held[item_id].items(), key=lambda pair: pair[0].model_id
                )
                if model in models
            )
        atomic_write(self.path, b"".join(frames))
        self._inode = None  # read back from the new file: one source of truth
        self.refresh()

    def compact_if_long(self, live: Collection[str]) -> None:
        """:meth:`keep_only` with the current state, once the log has grown long."""
        vectors = sum(len(held) for held in self.held.values())
        if self._frames > 2 * vectors + _MIN_COMPACTION:
            self.keep_only(self.state, live)

    def _append(self, data: bytes) -> None:
        # Without fsync: a vector lost with the page cache is reported as missing, no worse.
        with open(self.path, "ab") as file:
            file.write(data)
            self._inode = os.fstat(file.fileno()).st_ino
        self._read_to += self._apply(data)


def _frame(kind: bytes, payload: bytes) -> bytes:
    head = _HEAD.pack(kind, len(payload)) + payload
    return head + _CRC.pack(zlib.crc32(head))


def _text(value: str) -> bytes:
    encoded = value.encode("utf-8", "surrogatepass")
    return _SHORT.pack(len(encoded)) + encoded


def _state_frame(state: VectorState) -> bytes:
    frame = _StateFrame(_pair(state.active), _pair(state.target))
    return _frame(_STATE, msgspec.json.encode(frame))


def _vector_frame(model: EmbeddingModel, item_id: str, vector: Matrix, fingerprint: str) -> bytes:
    payload = b"".join(
        (
            _text(model.model_id),
            _WORD.pack(model.dimension),
            _text(item_id),
            bytes.fromhex(fingerprint),
            np.ascontiguousarray(vector, dtype="<f4").tobytes(),
        )
    )
    return _frame(_VECTOR, payload)


def _parse_vector(payload: memoryview) -> tuple[EmbeddingModel, str, str, Matrix]:
    at = 0

    def text() -> str:
        nonlocal at
        (length,) = _SHORT.unpack_from(payload, at)
        value = bytes(payload[at + _SHORT.size : at + _SHORT.size + length])
        at += _SHORT.size + length
        return value.decode("utf-8", "surrogatepass")

    model_id = text()
    (dimension,) = _WORD.unpack_from(payload, at)
    at += _WORD.size
    item_id = text()
    fingerprint = bytes(payload[at : at + 32]).hex()
    at += 32
    size = len(payload) - at
    if size <= 0 or size % (4 * dimension):
        raise ValueError("a vector frame of the wrong length")
    vectors = np.frombuffer(payload[at:], dtype="<f4").reshape(-1, dimension).astype(np.float32)
    return EmbeddingModel(model_id, dimension), item_id, fingerprint, vectors
