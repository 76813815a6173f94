"""The approximate graph saved beside a file-backed store, and checked before it is used again.

Building an HNSW graph over 1M rows takes many minutes, so a store with a file (SQLite) saves
its graph when it closes: ``<store>.ann`` (usearch's own format) and ``<store>.ann.npz`` (what
the graph reflects). Opening the store again, the index loads its rows from the store as
always; when they cross the threshold it uses the saved graph instead of building one —
only if the graph reflects exactly those rows:

* the same model, dimension and graph settings;
* the same records with the same number of chunks each, and every row's vector the same
  (compared through a fixed random projection of each row, float64, so any changed vector
  shows);
* a graph file of the size and with the checksum written beside it, holding every key.

Anything else — missing, stale, damaged — is a warning naming the file, and the graph is built
again (never a silent wrong answer). Writes go to temporary names and are renamed into place,
the graph first: a crash between the two leaves a description that does not match the graph.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from workers.memory.retrieval.ann_index import AnnSettings, new_graph
from workers.memory.retrieval.embeddings.base import EmbeddingModel, Matrix

__all__ = (
    "Renumbered",
    "SavedGraph",
    "load_graph",
    "load_saved",
    "projection",
    "save_graph",
    "saved_names",
)

log = logging.getLogger(__name__)

FORMAT = 1
_EDGE = 1 << 20
"""Bytes at each end of the graph file that its checksum covers (with its size)."""


def projection(matrix: npt.NDArray[np.float32]) -> npt.NDArray[np.float64]:
    """Each row's fingerprint: its product with a fixed random vector, in float64."""
    direction = np.random.default_rng(FORMAT).normal(size=matrix.shape[1])
    return np.asarray(matrix, dtype=np.float64) @ direction


@dataclass(frozen=True, slots=True)
class SavedGraph:
    """What a saved graph reflects: its rows, by key, and the records the keys belong to."""

    model: str
    dimension: int
    settings: AnnSettings
    keys: npt.NDArray[np.uint64]
    fingerprints: npt.NDArray[np.float64]
    """:func:`projection` of each key's row."""
    names: dict[int, str]
    """Record number -> id."""


def save_graph(path: Path, graph: Any, saved: SavedGraph) -> None:
    """Write ``graph`` to ``path`` and its description beside it (``path`` + ``.npz``)."""
    temporary = path.with_name(path.name + ".tmp")
    graph.save(str(temporary))
    meta = {
        "format": FORMAT,
        "model": saved.model,
        "dimension": saved.dimension,
        "settings": {k: v for k, v in asdict(saved.settings).items() if k != "threshold"},
        "graph": _checksum(temporary),
    }
    serials = np.fromiter(saved.names, dtype=np.int64, count=len(saved.names))
    described = path.with_name(path.name + ".npz.tmp")
    with described.open("wb") as out:
        np.savez(
            out,
            meta=np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8),
            keys=saved.keys,
            fingerprints=saved.fingerprints,
            serials=serials,
            ids=np.frombuffer("\n".join(saved.names.values()).encode(), dtype=np.uint8),
        )
    os.replace(temporary, path)
    os.replace(described, path.with_name(path.name + ".npz"))


def load_graph(path: Path, expected: SavedGraph) -> Any | None:
    """The saved graph if it reflects exactly ``expected`` (keys in any order; the caller
    numbered its records as the file did, :func:`saved_names`), else ``None`` after a warning
    naming the file."""
    try:
        return _load(path, expected)
    except _Stale as exc:
        log.warning("the saved vector graph %s is not used (%s): building it again", path, exc)
    except Exception as exc:  # a damaged file: numpy, json or usearch refusing it
        log.warning("the saved vector graph %s is damaged (%s): building it again", path, exc)
    return None


def saved_names(path: Path) -> tuple[npt.NDArray[np.uint64], dict[int, str]] | None:
    """The keys and record names a saved graph was written with (``None``: no file)."""
    described = path.with_name(path.name + ".npz")
    if not described.exists() or not path.exists():
        return None
    with np.load(described, allow_pickle=False) as data:
        ids = bytes(data["ids"]).decode().split("\n") if len(data["ids"]) else []
        names = dict(zip(data["serials"].tolist(), ids, strict=True))
        return data["keys"].astype(np.uint64), names


class Renumbered(Protocol):
    """What :func:`load_saved` needs of the vector index."""

    model: EmbeddingModel | None
    ann_settings: AnnSettings

    def renumber(self, serial_of: dict[str, int]) -> npt.NDArray[np.uint64] | None: ...

    def matrix_rows(self, count: int) -> Matrix: ...

    def adopt_numbering(self, keys: npt.NDArray[np.uint64], names: dict[int, str]) -> None: ...


def load_saved(path: Path, index: Renumbered) -> Any | None:
    """The graph saved at ``path`` if it reflects ``index``'s rows exactly — then ``index``
    numbers its records as the file did — else ``None`` after a warning naming the file.
    Call holding ``index.lock``."""
    assert index.model is not None
    try:
        found = saved_names(path)
    except Exception as exc:
        log.warning("the saved vector graph %s is damaged (%s): building it again", path, exc)
        return None
    if found is None:
        log.warning("no saved vector graph at %s: building one (saved when the store closes)", path)
        return None
    _, names = found
    keys = index.renumber({item_id: serial for serial, item_id in names.items()})
    if keys is None:
        log.warning(
            "the saved vector graph %s is not used (records were added since): building it again",
            path,
        )
        return None
    count = len(keys)
    expected = SavedGraph(
        index.model.model_id,
        index.model.dimension,
        index.ann_settings,
        keys,
        projection(index.matrix_rows(count)),
        names,
    )
    graph = load_graph(path, expected)
    if graph is not None:
        index.adopt_numbering(keys, names)
    return graph


class _Stale(Exception):
    pass


def _load(path: Path, expected: SavedGraph) -> Any:
    described = path.with_name(path.name + ".npz")
    with np.load(described, allow_pickle=False) as data:
        meta = json.loads(bytes(data["meta"]).decode())
        keys = data["keys"].astype(np.uint64)
        fingerprints = data["fingerprints"]
    wanted = {k: v for k, v in asdict(expected.settings).items() if k != "threshold"}
    if meta.get("format") != FORMAT:
        raise _Stale("another format")
    if (meta["model"], meta["dimension"]) != (expected.model, expected.dimension):
        raise _Stale("vectors of another model")
    if meta["settings"] != wanted:
        raise _Stale("other graph settings")
    if meta["graph"] != _checksum(path):
        raise _Stale("the graph file is not the one described")
    order, other = np.argsort(keys), np.argsort(expected.keys)
    if len(keys) != len(expected.keys) or not np.array_equal(keys[order], expected.keys[other]):
        raise _Stale("the store's records changed since it was saved")
    if not np.allclose(fingerprints[order], expected.fingerprints[other], rtol=0, atol=1e-6):
        raise _Stale("the store's vectors changed since it was saved")
    graph = new_graph(expected.settings, expected.dimension)
    graph.load(str(path))
    if len(graph) != len(keys) or not bool(np.all(graph.contains(keys))):
        raise _Stale("the graph does not hold every row")
    return graph


def _checksum(path: Path) -> str:
    size = path.stat().st_size
    digest = hashlib.sha256(str(size).encode())
    with path.open("rb") as source:
        digest.update(source.read(_EDGE))
        if size > _EDGE:
            source.seek(max(_EDGE, size - _EDGE))
            digest.update(source.read(_EDGE))
    return digest.hexdigest()
